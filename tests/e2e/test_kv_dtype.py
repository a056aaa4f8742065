"""`--kv-dtype`: a q8 KV cache runs end to end (graph mode checked against eager mode step by
step), logits stay close to the f16 cache's, and a bad value is one clear error line.

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/e2e/test_kv_dtype.py
"""
import pathlib
import subprocess

import numpy as np
import pytest
from kiln_server import kiln_bin as _kiln_bin
from kiln_server import tiny_models_dir as _tiny_models


@pytest.fixture(scope="module")
def tiny_gemma() -> pathlib.Path:
    return _tiny_models() / "tiny-gemma3.gguf"


def kiln(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([_kiln_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_run_q8_with_graph_check(tiny_gemma):
    r = kiln("run", "-m", tiny_gemma, "-p", "hello there", "-n", 16, "--ignore-eos", "--threads", 2,
             "--max-graph-bs", 2, "--kv-dtype", "q8", "--check-graph")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "0 diverged" in r.stderr


def test_logits_q8_close_to_f16(tiny_gemma, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(str(5 + (i * 37) % 100) for i in range(64)))
    out = {}
    for dtype in ("f16", "q8"):
        path = tmp_path / f"{dtype}.bin"
        r = kiln("logits", "-m", tiny_gemma, "--ids", ids, "-o", path, "--threads", 2, "--kv-dtype", dtype)
        assert r.returncode == 0, r.stderr
        out[dtype] = np.fromfile(path, dtype=np.float32)
    assert out["f16"].shape == out["q8"].shape
    diff = np.abs(out["f16"] - out["q8"]).max()
    assert 0 < diff < 0.05 * np.abs(out["f16"]).max()


@pytest.mark.parametrize("command", [["run", "-p", "hi"], ["serve", "--port", "0"]])
def test_bad_kv_dtype_is_one_clear_error(tiny_gemma, command):
    r = kiln(command[0], "-m", tiny_gemma, *command[1:], "--kv-dtype", "q4", timeout=60)
    assert r.returncode != 0, r.stdout
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("kiln: error: "), lines[0]
    assert "unknown KV cache dtype 'q4' (expected f16 or q8)" in lines[0]
