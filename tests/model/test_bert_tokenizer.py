"""kiln's WordPiece tokenizer for BERT folders (model/bert_tokenizer.cc) against the `tokenizers`
library itself on the same tokenizer.json: `kiln embed --ids` must give the library's ids
([CLS]/[SEP] and truncation included) for every text of a varied set (unicode of many kinds,
accents, CJK, Hangul, emoji, control and format characters, special tokens written in the
text, empty strings, texts past the truncation limit).

Tokenizers: the two tiny oracle folders (TemplateProcessing and BertProcessing; trained on
GSM8K) and the real all-MiniLM-L6-v2 where `kiln pull all-minilm-l6-v2` installed it
(tests/oracle/test_embedding_oracle.py installs it and compares its embeddings).

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/model/test_bert_tokenizer.py
"""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMBED = ROOT / "tests" / "oracle" / "embeddings"
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))
MINILM = pathlib.Path(os.environ.get("KILN_CACHE_DIR") or
                      pathlib.Path.home() / ".cache" / "kiln") / "models" / "all-minilm-l6-v2"

EXTRA = [
    "tabs\tand\nnewlines\r\nCRLF",
    "Ⅻ ① ²³ ½ ﬀ ﬃ Å Ω K",  # compatibility characters NFD keeps
    "ǲ ǅ ᾈ ΐ ẞ ß",  # title case, Greek with iota, sharp s
    "\u0130\u0307 \u03a3\u0345 \u1e9e",
    "🏳️‍🌈 👨‍👩‍👧 🧑🏿‍💻",
    "​\ufeffBOM and zero width\u200d joiner",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "tokenization tokenizer tokenized untokenizable",
    "[CLS][SEP][PAD][MASK][UNK]",
    "[cls] [SEP [SEP]] ]SEP[",
    "don't can't won't it's",
    "\U0002a6d6 \U0002b740 \u4e00\u9fff \uf900 \u3400",  # CJK extension ideographs
    "ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ １２３",
    "new\u2029para\u2028line\u0085nel\u000bvt\u000cff\u001cfs",
]


def texts():
    golden = json.loads((EMBED / "bert-mean" / "golden.json").read_text())
    return golden["texts"] + EXTRA


def library_ids(folder, limit, items):
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=limit)
    return [tok.encode(t).ids for t in items]


def kiln_ids(folder, items, tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in items))
    r = subprocess.run([KILN, "embed", "-m", str(folder), "-f", str(path), "--json-lines",
                        "--ids"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["ids"] for line in r.stdout.splitlines()]


def check(folder, limit, tmp_path):
    items = texts()
    want = library_ids(folder, limit, items)
    got = kiln_ids(folder, items, tmp_path)
    assert len(got) == len(items)
    for text, g, w in zip(items, got, want):
        assert g == w, f"{text!r}: kiln {g} tokenizers {w}"


@pytest.mark.parametrize("case,limit", [("bert-mean", 40), ("bert-cls", 64)])
def test_tiny_tokenizers_match_the_library(case, limit, tmp_path):
    check(EMBED / case / "model", limit, tmp_path)


def test_minilm_tokenizer_matches_the_library(tmp_path):
    if not (MINILM / "tokenizer.json").is_file():
        pytest.skip("all-MiniLM-L6-v2 is not installed (tests/oracle/test_embedding_oracle.py "
                    "installs it with `kiln pull all-minilm-l6-v2`)")
    check(MINILM, 256, tmp_path)


def test_the_comparison_can_fail(tmp_path):
    """A tokenizer.json that neither lowercases nor strips accents gives other ids."""
    folder = tmp_path / "broken"
    src = EMBED / "bert-mean" / "model"
    shutil.copytree(src, folder)
    tj = json.loads((src / "tokenizer.json").read_text())
    tj["normalizer"]["lowercase"] = False
    tj["normalizer"]["strip_accents"] = False
    (folder / "tokenizer.json").write_text(json.dumps(tj))
    got = kiln_ids(folder, ["Hello Wörld"], tmp_path)
    assert got != library_ids(src, 40, ["Hello Wörld"])
