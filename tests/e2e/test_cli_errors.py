"""`kiln run` on bad input: one clear error line on stderr and a non-zero exit, never a crash."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))


def run_kiln(*args, timeout=120):
    return subprocess.run([KILN, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    data = os.environ.get("KILN_TESTDATA")
    if data and (pathlib.Path(data) / "models" / "tiny-llama.gguf").exists():
        return pathlib.Path(data) / "models"
    out = tmp_path_factory.mktemp("fixtures")
    import make_models

    make_models.generate(out)
    return out / "models"


def assert_one_error_line(proc, *needles):
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kiln: error: "), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_file():
    assert_one_error_line(run_kiln("run", "-m", "/nonexistent/model.gguf", "-p", "hi"), "cannot open")


def test_not_gguf(tmp_path):
    f = tmp_path / "notes.gguf"
    f.write_text("this is not a model\n" * 10)
    assert_one_error_line(run_kiln("run", "-m", str(f), "-p", "hi"), "GGUF")


def write_variant(src, dst, arch=None, retype=None):
    """Copies a GGUF file, optionally renaming its architecture or storing one tensor as Q2_K."""
    import gguf

    r = gguf.GGUFReader(str(src))
    old_arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    new_arch = arch or old_arch
    w = gguf.GGUFWriter(str(dst), new_arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        new_key = key.replace(old_arch + ".", new_arch + ".", 1)
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [str(bytes(field.parts[i]), "utf-8") for i in field.data]
            else:
                vals = [field.parts[i][0].item() for i in field.data]
            w.add_array(new_key, vals)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_string(new_key, str(bytes(field.parts[-1]), "utf-8"))
        else:
            w.add_key_value(new_key, field.parts[-1][0].item(), vtype)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        if retype and t.name == retype:
            n_blocks = int(np.prod(shape)) // 256
            w.add_tensor(t.name, np.zeros(n_blocks * 84, dtype=np.uint8), raw_shape=shape,
                         raw_dtype=gguf.GGMLQuantizationType.Q2_K)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_shape=shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_unsupported_architecture(tiny_models, tmp_path):
    dst = tmp_path / "bert.gguf"
    write_variant(tiny_models / "tiny-llama.gguf", dst, arch="bert")
    assert_one_error_line(run_kiln("run", "-m", str(dst), "-p", "hi"), "unsupported architecture 'bert'")


def test_unsupported_tensor_type(tiny_models, tmp_path):
    dst = tmp_path / "q2k.gguf"
    write_variant(tiny_models / "tiny-gemma3.gguf", dst, retype="blk.0.ffn_up.weight")
    assert_one_error_line(run_kiln("run", "-m", str(dst), "-p", "hi"), "q2_k")


def test_prompt_longer_than_context(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-c", "32", "-p", "word " * 200, "-n", "4")
    assert_one_error_line(proc, "exceeds the context")


def test_invalid_flag_value(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-p", "hi", "--temp", "-1")
    assert proc.returncode != 0


def test_tiny_model_runs(tiny_models):
    proc = run_kiln("run", "-m", str(tiny_models / "tiny-llama.gguf"), "-p", "hello", "-n", "8", "--ignore-eos")
    assert proc.returncode == 0, proc.stderr
    assert "generated: 8 tokens" in proc.stderr
