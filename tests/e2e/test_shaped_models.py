"""bench/make_shaped_model.py's files load and run in kiln, and a loaded model's resident memory
stays near its packed weights (the file pages repacking consumed are released).

The llama.cpp half (the quantized files load there too) needs llama.cpp's tools, which CI does
not build: bench/shaped_models_check.sh runs it.
"""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from kiln_server import REPO, kiln_bin

sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import make_shaped_model  # noqa: E402
from gguf_file import GgufFile  # noqa: E402

SCRIPT = REPO / "bench" / "make_shaped_model.py"
# Tokenizers from the tiny fixture models (byte-level BPE vocabularies of ~512 pieces), so
# the test needs no download; the shapes' vocabularies (1024) are larger, so this pads them.
TOKENIZER = {"tiny-llama3": "tiny-llama.gguf", "tiny-qwen3": "tiny-qwen3.gguf", "mem-llama": "tiny-llama.gguf"}


def make(shape: str, out: pathlib.Path, models: pathlib.Path) -> pathlib.Path:
    subprocess.run([sys.executable, str(SCRIPT), "--shape", shape, "--out", str(out), "--tokenizer-from",
                    str(models / TOKENIZER[shape])], check=True, capture_output=True, text=True)
    path = out / f"{shape}-f16.gguf"
    assert path.is_file()
    return path


def kiln(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([kiln_bin(), *args], capture_output=True, text=True, timeout=600,
                       env=None if env is None else {**os.environ, **env})
    assert r.returncode == 0, f"kiln {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r


@pytest.mark.parametrize("shape", ["tiny-llama3", "tiny-qwen3"])
def test_shape_file_has_the_shapes_tensors_and_metadata(shape, tmp_path, models):
    spec = make_shaped_model.SHAPES[shape]
    f = GgufFile(make(shape, tmp_path, models))
    arch = spec.arch
    assert f.get("general.architecture") == arch
    assert f.get(f"{arch}.block_count") == spec.n_layer
    assert f.get(f"{arch}.embedding_length") == spec.n_embd
    assert f.get(f"{arch}.attention.head_count_kv") == spec.n_head_kv
    assert len(f.get("tokenizer.ggml.tokens")) == spec.n_vocab
    expected = {name: shape for name, shape, _, _ in make_shaped_model.tensor_specs(spec)}
    stored = {name: tuple(reversed(dims)) for name, (dims, _, _) in f.tensor_info.items()}
    assert stored == expected
    assert ("output.weight" in stored) == (not spec.tied)
    assert ("rope_freqs.weight" in stored) == (spec.rope_scaling_factor > 0)
    assert ("blk.0.attn_q_norm.weight" in stored) == (arch == "qwen3")


@pytest.mark.parametrize("shape", ["tiny-llama3", "tiny-qwen3"])
def test_shape_file_runs_in_kiln_with_finite_logits(shape, tmp_path, models):
    path = make(shape, tmp_path, models)
    r = kiln("run", "-m", str(path), "-p", "Hello world", "-n", "8", "--ignore-eos", "-t", "2",
             "--graph-mode", "off")
    assert re.search(r"generated: 8 tokens", r.stdout + r.stderr), r.stdout + r.stderr
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(str(i) for i in range(1, 33)))
    out = tmp_path / "logits.bin"
    kiln("logits", "-m", str(path), "--ids", str(ids), "-o", str(out), "-t", "2")
    logits = np.fromfile(out, dtype=np.float32).reshape(32, -1)
    assert logits.shape[1] == make_shaped_model.SHAPES[shape].n_vocab
    assert np.isfinite(logits).all()
    # The weights are scaled for logits of std ~3 at every position: far smaller would mean the
    # hidden state collapsed, far larger that it blew up on its way through the layers.
    std = logits.std(axis=1)
    assert (std > 0.5).all() and (std < 30).all(), std


# What a process holds besides its weights and KV: the executable, libraries, thread stacks,
# the tokenizer, the compiled plans, allocator slack. Measured ~35 MiB for the tiny models.
BASELINE_MIB = 64.0


MEMORY_LINE = re.compile(r"memory after load: resident ([\d.]+) MiB \(file ([\d.]+), anonymous ([\d.]+)\), "
                         r"peak ([\d.]+) MiB; packed weights ([\d.]+) MiB")


LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:.]+\] ")


def load_memory(path: pathlib.Path, mode: str, *extra: str, env: dict | None = None):
    """(resident MiB, file pages MiB, packed MiB, log, generated text) of `kiln run` once loaded."""
    r = kiln("run", "-m", str(path), "-p", "Hi", "-n", "4", "--ignore-eos", "-t", "2", "--graph-mode", mode,
             "--max-graph-bs", "4", "--log-level", "info", *extra, env=env)
    log = r.stdout + r.stderr
    m = MEMORY_LINE.search(log)
    assert m, log
    resident, file_pages, _, _, packed = (float(x) for x in m.groups())
    # The generated text: stdout without the log lines (which carry times).
    text = "\n".join(line for line in r.stdout.splitlines() if not LOG_LINE.match(line))
    return resident, file_pages, packed, log, text


def assert_near_packed(resident: float, file_pages: float, packed: float, path: pathlib.Path) -> None:
    file_mib = path.stat().st_size / 2**20
    assert packed > 0.5 * file_mib, (packed, file_mib)  # the bound is not trivially loose
    # Nothing has been decoded at this point: the KV pool's pages are untouched (0 written).
    bound = 1.1 * packed + BASELINE_MIB
    assert resident <= bound, f"resident {resident} MiB > {bound:.1f} (packed {packed}, file pages {file_pages})"


def test_resident_memory_after_load_is_near_the_packed_weights(tmp_path, models):
    """Resident <= 1.1 x packed weights + KV written + a fixed baseline. The ~200 MB F16 model
    makes the mapped file pages dominate the baseline: if the pages repacking read stayed
    resident, the process would hold ~2x its packed weights and fail the bound."""
    path = make("mem-llama", tmp_path, models)
    resident, file_pages, packed, _, _ = load_memory(path, "off", "--no-compile-cache")
    assert_near_packed(resident, file_pages, packed, path)


def test_graph_mode_packs_each_byte_once(tmp_path, models):
    """Graph mode's merged QKV and gate/up weights are the separate ones eager mode reads,
    packed once (the parts are views): the same packed bytes as eager mode, and the same
    resident bound. Packing the merged copies on top was +45% on this Llama shape."""
    path = make("mem-llama", tmp_path, models)
    _, _, eager_packed, _, _ = load_memory(path, "off", "--no-compile-cache")
    resident, file_pages, packed, _, _ = load_memory(path, "optimize", "--no-compile-cache")
    assert packed <= eager_packed + 1.0, (packed, eager_packed)  # alignment padding only
    assert_near_packed(resident, file_pages, packed, path)


@pytest.mark.parametrize("mode", ["optimize", "off"])
def test_warm_start_maps_the_packed_weights_file(tmp_path, models, mode):
    """A cold start packs every weight into one file in the cache folder; a warm start
    maps it instead of repacking (file-backed pages, none of the model file's weight pages),
    generates the same tokens and stays within the same memory bound."""
    path = make("mem-llama", tmp_path, models)
    env = {"KILN_CACHE_DIR": str(tmp_path / "cache")}
    _, _, cold_packed, cold_log, cold_text = load_memory(path, mode, env=env)
    assert re.search(r"packed \d+ weights into \S+\.kpw", cold_log), cold_log
    assert len(list((tmp_path / "cache").glob("*.kpw"))) == 1
    resident, file_pages, packed, log, text = load_memory(path, mode, env=env)
    assert re.search(r"mapped \d+ packed weights .* \(checksum verified\)", log), log
    assert "repacked" not in log, log
    assert text == cold_text
    assert packed == cold_packed
    assert file_pages >= 0.9 * packed, (file_pages, packed)  # the weights are the file's pages
    assert_near_packed(resident, file_pages, packed, path)
