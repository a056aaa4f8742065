"""Builds the GGUF-encoder oracle: the tiny random BERT folder tests/oracle/embeddings/bert-mean
converted by llama.cpp's own convert_hf_to_gguf.py, and llama.cpp's token ids for the case's
texts (`llama-tokenize`, with [CLS]/[SEP]). (`llama-embedding` aborts on a model this small,
GGML_ASSERT(n_outputs_max <= cparams.n_outputs_max), so its vectors are compared on the real
all-MiniLM-L6-v2 by hand instead: docs/embeddings.md.)

Run by hand in the oracle venv (the converter imports torch), with llama.cpp's tools built
(bench/llama_cpp_build.sh builds them under build/llama-cpp-ref):

    .venv-oracle/bin/python3 tests/oracle/make_bert_gguf_golden.py LLAMA_CPP_BIN_DIR

It writes tests/oracle/embeddings/bert-mean-gguf/{model.f32.gguf, llama_cpp.json} and
refreshes SHA256SUMS; all are committed, so CI needs neither llama.cpp nor torch.
"""
import hashlib
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "embeddings"
CASE = OUT / "bert-mean"


def main():
    bin_dir = pathlib.Path(sys.argv[1])
    src = subprocess.run([str(ROOT / "scripts" / "fetch_llama_cpp_src.sh")], check=True,
                         capture_output=True, text=True).stdout.strip()
    dest = OUT / "bert-mean-gguf"
    dest.mkdir(exist_ok=True)
    gguf = dest / "model.f32.gguf"
    # The converter names a BPE/WPM pre-tokenizer by hashing what the tokenizer makes of a test
    # string; the tiny tokenizer trained for the case is not in its table, so it is told the
    # one llama.cpp's converter gives all-MiniLM-L6-v2 (its WPM ignores the name).
    convert = (f"import sys; sys.path.insert(0, {src!r}); sys.argv = {['convert_hf_to_gguf.py', '--outtype', 'f32', '--outfile', str(gguf), str(CASE / 'model')]!r}\n"
               "import conversion.base as b; b.TextModel.get_vocab_base_pre = lambda self, t: 'jina-v2-en'\n"
               "import convert_hf_to_gguf; convert_hf_to_gguf.main()")
    subprocess.run([sys.executable, "-c", convert], check=True, cwd=src)
    texts = json.loads((CASE / "golden.json").read_text())["texts"]
    ids = []
    for t in texts:
        if not t:  # llama-tokenize refuses an empty prompt
            ids.append(None)
            continue
        r = subprocess.run([str(bin_dir / "llama-tokenize"), "-m", str(gguf), "-p", t, "--ids",
                            "--log-disable"], check=True, capture_output=True, text=True)
        ids.append(json.loads(r.stdout.strip().splitlines()[-1]))
    (dest / "llama_cpp.json").write_text(json.dumps(
        {"texts": texts, "ids": ids, "llama_cpp": "llama-cpp-bin 11434.0.0"}))
    files = sorted(p for p in OUT.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    (OUT / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(OUT)}\n" for p in files))


if __name__ == "__main__":
    main()
