"""The committed oracle fixtures (tests/oracle/data, made by make_hf_goldens.py with torch and
transformers, which CI does not install) are intact: every file matches SHA256SUMS and every
case has its checkpoint, conversions and goldens, so the C++ oracle test
(tests/engine/hf_oracle_test.cc) compares kiln against what transformers really produced."""
import hashlib
import json
import pathlib

import pytest

DATA = pathlib.Path(__file__).resolve().parent / "data"
SUMS = [line.split("  ", 1) for line in (DATA / "SHA256SUMS").read_text().splitlines() if line]
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


@pytest.mark.parametrize("digest,name", SUMS, ids=[n for _, n in SUMS])
def test_checksum(digest, name):
    assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest


def test_every_file_is_listed():
    listed = {name for _, name in SUMS}
    present = {str(p.relative_to(DATA)) for p in DATA.rglob("*")
               if p.is_file() and p.name != "SHA256SUMS"}
    assert present == listed


@pytest.mark.parametrize("case", CASES)
def test_case_is_complete(case):
    d = DATA / case
    for f in ("golden.json", "golden.logits.f32", "model.f32.gguf", "model.q8_0.gguf",
              "hf/config.json", "hf/model.safetensors"):
        assert (d / f).is_file(), f
    g = json.loads((d / "golden.json").read_text())
    rows = sum(len(p["ids"]) for p in g["prompts"])
    assert (d / "golden.logits.f32").stat().st_size == rows * g["n_vocab"] * 4
