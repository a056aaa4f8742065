"""`kiln embed` as a command: its output formats (JSON lines on stdout or to a file, .npy with
the shape and dtype NumPy reads), plain-text input (empty lines are empty texts), and one
error line for each misuse. The values themselves are checked against the oracles in
tests/oracle/test_embedding_oracle.py."""
import json
import shutil
import subprocess

import numpy as np

from kiln_server import REPO, assert_one_error_line, kiln_bin

MODEL = REPO / "tests" / "oracle" / "embeddings" / "bert-mean" / "model"


def run(*args):
    return subprocess.run([kiln_bin(), "embed", *args], capture_output=True, text=True,
                          timeout=120)


def test_formats_agree(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("Hello world\n\nHow many clips did Natalia sell?\n")
    out = run("-m", str(MODEL), "-f", str(src), "-t", "1")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines()]
    assert len(rows) == 3 and all(len(r) == 64 for r in rows)  # the empty line is a text
    assert run("-m", str(MODEL), "-f", str(src), "-o", str(tmp_path / "v.jsonl")).returncode == 0
    assert (tmp_path / "v.jsonl").read_text() == out.stdout
    assert run("-m", str(MODEL), "-f", str(src), "-o", str(tmp_path / "v.npy")).returncode == 0
    arr = np.load(tmp_path / "v.npy")
    assert arr.dtype == np.float32 and arr.shape == (3, 64)
    assert np.array_equal(arr, np.asarray(rows, np.float32))  # %.9g round-trips
    # Thread count does not change the vectors.
    two = run("-m", str(MODEL), "-f", str(src), "-t", "2")
    assert two.stdout == out.stdout


def test_errors(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("hello\n")
    assert_one_error_line(run("-f", str(src)), "needs -m")
    assert_one_error_line(run("-m", str(MODEL)), "needs -f")
    assert_one_error_line(run("-m", str(MODEL), "-f", str(tmp_path / "none.txt")), "cannot open")
    assert_one_error_line(run("-m", str(MODEL), "-f", str(src), "--pooling", "sum"), "--pooling")
    assert_one_error_line(run("-m", str(MODEL), "-f", str(src), "--normalize", "yes"), "--normalize")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{"text": 1}\n')
    assert_one_error_line(run("-m", str(MODEL), "-f", str(bad), "--json-lines"), "line 2")
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps(list(range(2, 50))) + "\n")
    assert_one_error_line(run("-m", str(MODEL), "-f", str(ids), "--json-lines"), "at most 40")
    broken = tmp_path / "broken"
    shutil.copytree(MODEL, broken)
    (broken / "1_Pooling" / "config.json").write_text(json.dumps(
        {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}))
    assert_one_error_line(run("-m", str(broken), "-f", str(src)), "2 pooling modes")
    (broken / "modules.json").write_text(json.dumps(
        [{"type": "sentence_transformers.models.Dense", "path": "2_Dense"}]))
    assert_one_error_line(run("-m", str(broken), "-f", str(src)), "Dense", "not supported")
