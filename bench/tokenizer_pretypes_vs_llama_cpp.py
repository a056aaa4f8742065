"""Every pre-tokenizer type kiln runs (`kiln tokenize --pre-types`), against llama.cpp's own
tokenizer: a copy of a vocabulary of llama.cpp's test set with tokenizer.ggml.pre set to each
name (Llama 3's vocabulary for the byte-level types; Gemma 4's for the SentencePiece-style ones),
tokenized by kiln and by libllama (bench/llama_vocab_tokenize.cpp) on a corpus: the texts of
the whole test set plus texts aimed at the regexes' differences (case changes, digit runs, CJK,
Indic and Thai marks, whitespace kinds, contractions). Prints, per name, texts equal / total;
exits non-zero on any difference.

Usage: bench/tokenizer_pretypes_vs_llama_cpp.sh (builds what it needs, then runs this).
"""
import argparse
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

SEP = "\n__ggml_vocab_test__\n"
EXTRA = [
    "HelloWorld camelCaseString XMLHttpRequest ÑandúGRANDE ΑΒΓδεζ straße İstanbul",
    "I'M HERE, YOU'RE THERE, WE'LL SEE, THEY'D GO, IT'S 'S'T",
    "<sentinel:12> IMGIMGABCZ IMGIMGAAAAAZ text\t\ttabs  two    four",
    "1 12 123 1234 12345 123456 1234567 ١٢٣٤٥ ४५६ 3.14159 1,000,000",
    "नमस्ते दुनिया ภาษาไทย 한국어 텍스트 にほんご カタカナ 中文字符 ｆｕｌｌｗｉｄｔｈ",
    "def f(x):\n\treturn x**2 // 3 # comment\r\n\r\n    }\n}",
    "   leading\n\n\n  trailing   \n",
    "emoji 😀👍🏽 🇫🇷 👨‍👩‍👧 ❤️ combining e\u0301 a\u0308 x\u0323\u0302",
    "$100 + <tag> ^caret~ |pipe| `tick` @at #hash 50% a&b",
    "ideographic\u3000space nbsp\u00a0here en\u2002space line\u2028sep",
    "Olá, você está? Ça va. ¿Qué tal? ¡Hola! «quotes» „low” ‘single’",
    "…。，、।۔،(paren) [bracket] {brace}",
    "\u017fome long s and Kelvin \u212a sign",
    "a" * 300 + " " + "9" * 40,
]

# GGUF metadata value types and the byte size of the fixed-size ones.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def with_string_keys(src, dst, values):
    """Copies a GGUF file that holds no tensors with the string keys `values` set (replaced or
    added). Only the metadata section changes, so the copy is made at the byte level."""
    data = pathlib.Path(src).read_bytes()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF" and n_tensors == 0, src
    pos = 24
    kept = []

    def skip_value(pos, vtype):
        if vtype in FIXED:
            return pos + FIXED[vtype]
        if vtype == STRING:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        assert vtype == ARRAY
        etype, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if etype in FIXED:
            return pos + FIXED[etype] * count
        for _ in range(count):
            pos = skip_value(pos, etype)
        return pos

    for _ in range(n_kv):
        start = pos
        (klen,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, vtype)
        if key not in values:
            kept.append(data[start:pos])

    def string_kv(key, value):
        k, v = key.encode(), value.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", STRING, len(v)) + v

    kept += [string_kv(k, v) for k, v in values.items()]
    out = struct.pack("<4sIQQ", magic, version, 0, len(kept)) + b"".join(kept)
    out += b"\0" * (-len(out) % 32)  # the (empty) data section starts aligned
    pathlib.Path(dst).write_bytes(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--llama-tokenize", required=True)
    ap.add_argument("--models", required=True, help="llama.cpp's models/ folder")
    args = ap.parse_args()
    models = pathlib.Path(args.models)

    texts = []
    for f in sorted(models.glob("ggml-vocab-*.gguf.inp")):
        for t in f.read_bytes().decode("utf-8").split(SEP):
            if t and t not in texts:
                texts.append(t)
    texts += EXTRA

    rows = [json.loads(line) for line in subprocess.run(
        [args.kiln, "tokenize", "--pre-types"], check=True, capture_output=True,
        text=True).stdout.splitlines()]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "corpus.txt"
        corpus.write_bytes((SEP.join(texts) + SEP).encode("utf-8"))
        for row in rows:
            if row["refusal"]:
                print(f"{row['type']}: refused ({', '.join(row['names'])})")
                continue
            for name in row["names"]:
                if row["byte_level"]:
                    base, keys = "llama-bpe", {"tokenizer.ggml.pre": name}
                else:
                    # Gemma 4's vocabulary; a gemma4 model forces the gemma4 pre-type, so the
                    # others are given as gpt2 models.
                    base = "gemma-4"
                    keys = {"tokenizer.ggml.pre": name}
                    if name != "gemma4":
                        keys["tokenizer.ggml.model"] = "gpt2"
                variant = tmp / f"{name}.gguf"
                with_string_keys(models / f"ggml-vocab-{base}.gguf", variant, keys)
                ref = subprocess.run([args.llama_tokenize, str(variant), str(corpus)],
                                     capture_output=True, text=True)
                if ref.returncode != 0:
                    print(f"{row['type']} {name}: llama.cpp does not load it "
                          f"({ref.stderr.strip().splitlines()[-1:]})")
                    continue
                got = subprocess.run([args.kiln, "tokenize", "-m", str(variant), "--text-file",
                                      str(corpus), "--no-parse-special", "--split-on", SEP],
                                     capture_output=True, text=True)
                if got.returncode != 0:
                    print(f"{row['type']} {name}: kiln failed: {got.stderr.strip()}")
                    failed += 1
                    continue
                want = ref.stdout.splitlines()
                have = [" ".join(map(str, json.loads(line)["ids"]))
                        for line in got.stdout.splitlines()]
                bad = [i for i in range(len(texts)) if want[i] != have[i]]
                print(f"{row['type']} {name}: {len(texts) - len(bad)}/{len(texts)} texts equal"
                      + (f", first difference on {texts[bad[0]][:60]!r}" if bad else ""))
                failed += bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
