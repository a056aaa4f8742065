"""kiln's reading of Hugging Face tokenizer.json files against the `tokenizers` library itself,
on a varied corpus (code, CJK, emoji, whitespace runs, digits, contractions, special tokens):
`kiln tokenize -m DIR` must give the library's ids for every text.

Families: SentencePiece-style BPE (Metaspace, byte fallback) from the oracle fixtures'
converted tokenizers and variants of it (Metaspace "always", Gemma's Replace normalizer, the
legacy Prepend + Replace normalizers), and byte-level BPE trained here, offline, with the `tokenizers` trainer
on this repository's own text, with Llama 3's, Qwen 2's and Qwen 3.5's split regexes and GPT-2's.

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/model/test_hf_tokenizer.py
"""
import json
import os
import pathlib
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "oracle" / "data"
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen 3.5: combining marks are part of words.
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "Hello world",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many in May.",
    " leading space",
    "trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
    "    indented code\n        deeper",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * 3.14159; }",
    "I'm sure they'll say it's fine, we've DONE IT'S",
    "1234567890 12 345 6789 0.5 -17 1e10",
    "日本語のテキストと中文文本，还有한국어.",
    "Emoji: 😀👍🏽🇫🇷 👨‍👩‍👧 ❤️",
    "Mixed: naïve café résumé Ελληνικά русский עברית العربية",
    "Combining marks: e\u0301 a\u0308 x\u0323\u0302, नमस्ते दुनिया, ภาษาไทย",
    "   ",
    "\n",
    "a",
    "<s>hello</s> <s> x",
    "text<s>more<unk>and </s>",
    "<|begin_of_text|>Hi<|eot_id|>\n<think>why</think>",
    "ZWJ\u200dand\u00a0nbsp and\u2028line sep",
    "".join(chr(c) for c in range(0x20, 0x7f)),
    "The quick brown fox jumps over the lazy dog. " * 8,
]


def kiln_ids(model_dir, text, add_special=False, tmp_path=None):
    f = tmp_path / "text.txt"
    f.write_bytes(text.encode("utf-8"))
    args = [KILN, "tokenize", "-m", str(model_dir), "--text-file", str(f)]
    if add_special:
        args.append("--add-special")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["ids"]


def repo_text():
    parts = []
    for pattern in ("docs/*.md", "src/kiln/model/*.cc", "tests/oracle/*.py", "README.md"):
        for p in sorted(ROOT.glob(pattern)):
            parts.append(p.read_text(encoding="utf-8"))
    return parts + CORPUS[:12]


def train_byte_level(out_dir, regex, ignore_merges):
    """A small byte-level BPE as Llama 3 / Qwen 2 build theirs: Split by the regex, then
    ByteLevel without its own regex; or, with regex None, GPT-2's ByteLevel alone."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if regex is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|eot_id|>"])
    tok.train_from_iterator(repo_text(), trainer=trainer)
    tok.add_tokens([tokenizers.AddedToken("<think>", special=False),
                    tokenizers.AddedToken("</think>", special=False)])
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": False}))
    return out_dir


@pytest.fixture(scope="module")
def byte_level_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("byte_level")
    return {
        "llama3": train_byte_level(base / "llama3", LLAMA3_REGEX, ignore_merges=True),
        "qwen2": train_byte_level(base / "qwen2", QWEN2_REGEX, ignore_merges=False),
        "qwen35": train_byte_level(base / "qwen35", QWEN35_REGEX, ignore_merges=False),
        "gpt2": train_byte_level(base / "gpt2", None, ignore_merges=False),
    }


# The other ways SentencePiece-style tokenizer.json files put U+2581 spaces in, made from the
# llama fixture's file: Metaspace prepending to every fragment, Gemma's Replace normalizer (no
# prefix), and older Llama 2 / Mistral files' Prepend + Replace normalizers.
SPACE = "\u2581"
METASPACE_VARIANTS = {
    "metaspace-always": {"pre_tokenizer": {"type": "Metaspace", "replacement": SPACE,
                                           "prepend_scheme": "always", "split": False}},
    "replace-gemma": {"pre_tokenizer": None, "normalizer": {
        "type": "Replace", "pattern": {"String": " "}, "content": SPACE}},
    "prepend-replace-legacy": {"pre_tokenizer": None, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}},
}


@pytest.fixture(scope="module")
def metaspace_variant_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("metaspace")
    src = ORACLE / "llama" / "hf"
    dirs = {}
    for name, changes in METASPACE_VARIANTS.items():
        d = base / name
        d.mkdir()
        tok = json.loads((src / "tokenizer.json").read_text())
        tok.update(changes)
        (d / "tokenizer.json").write_text(json.dumps(tok))
        (d / "tokenizer_config.json").write_text((src / "tokenizer_config.json").read_text())
        dirs[name] = d
    return dirs


def model_dirs(byte_level_dirs, metaspace_variant_dirs):
    dirs = dict(byte_level_dirs)
    dirs.update(metaspace_variant_dirs)
    # SentencePiece-style; qwen2's also has an added token past the model's vocabulary.
    dirs["metaspace-llama"] = ORACLE / "llama" / "hf"
    dirs["metaspace-qwen2"] = ORACLE / "qwen2" / "hf"
    return dirs


@pytest.mark.parametrize("family", ["llama3", "qwen2", "qwen35", "gpt2", "metaspace-llama", "metaspace-qwen2",
                                    *METASPACE_VARIANTS])
def test_ids_match_tokenizers(family, byte_level_dirs, metaspace_variant_dirs, tmp_path):
    model_dir = model_dirs(byte_level_dirs, metaspace_variant_dirs)[family]
    ref = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    mismatches = []
    for text in CORPUS:
        want = ref.encode(text, add_special_tokens=False).ids
        got = kiln_ids(model_dir, text, tmp_path=tmp_path)
        if got != want:
            mismatches.append(f"{text!r}: kiln {got} tokenizers {want}")
    assert not mismatches, "\n".join(mismatches)


def test_special_tokens_added_as_the_template_says(tmp_path):
    model_dir = ORACLE / "llama" / "hf"
    ref = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    for text in ("Hello world", " x"):
        assert kiln_ids(model_dir, text, add_special=True, tmp_path=tmp_path) == \
            ref.encode(text, add_special_tokens=True).ids
