"""A GGUF model (default: the default model, Gemma 3 270M Q4_K_M; --model takes a path or a name
`kiln pull` installed, such as qwen2.5-coder-1.5b) against Hugging Face transformers running
the same GGUF file dequantized to float32: top-1 agreement and KL divergence of the next-token
distributions at every position of a few hundred tokens of varied text (GSM8K questions and
answers: prose, numbers, arithmetic). Printed, not asserted: quantized weights make kiln and
the dequantized float model differ by design, and the figure is for reading next to other
engines' on the same positions.

Run by hand in the oracle venv (scripts/oracle_venv.sh) after a release build:

    .venv-oracle/bin/python3 bench/default_model_vs_transformers.py [--positions 300]
        [--model qwen2.5-coder-1.5b] [--llama-perplexity build/llama-cpp-ref/.../llama-perplexity]

kiln's rows come from `kiln logits` (every position through the decode path), in eager and in
graph mode. transformers' come from `from_pretrained(..., gguf_file=...)`, which dequantizes
every tensor to float32.

With --bf16-emulation, a third row: the same transformers model with every linear layer (the LM
head included) computed as a bf16 matmul contract would (the matrix engine's TDPBF16PS road):
the dequantized weight rounded to bf16 once, each input row rounded to bf16, products summed in
float32. It tells whether that contract keeps kiln's fidelity before any kernel is written
(docs/performance.md, "AMX"); attention and norms stay float32, as kiln's are.

With --llama-perplexity BIN, llama.cpp is measured on the same footing: llama-perplexity
--kl-divergence-base saves its log-probabilities for the second half of each --ctx-size window
of a text file (its usual method; each window starts with BOS), and transformers and kiln are
run on exactly those windows, so all three are compared at the same positions with the same
context. llama.cpp's file stores each row as 16-bit steps between the row's minimum (clamped to
max - 16) and maximum logit; it is decoded here the way llama-perplexity --kl-divergence reads
it.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parent.parent
GSM8K = ROOT / "data" / "gsm8k" / "train.jsonl"


def default_model() -> pathlib.Path:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python3"), str(ROOT / "scripts" / "default_model.py")],
                         check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip())


def resolve_model(kiln: str, name: str) -> pathlib.Path:
    """A GGUF path as it is; a bare name as the file `kiln pull` installed under it."""
    if pathlib.Path(name).is_file():
        return pathlib.Path(name)
    out = subprocess.run([kiln, "pull", name], check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip())


def kiln_adds_bos(kiln: str, model: pathlib.Path) -> bool:
    """Whether the model's tokenizer starts a text with BOS (llama-perplexity asks the same)."""
    def ids(*flags):
        out = subprocess.run([kiln, "tokenize", "-m", str(model), "--text", "a", *flags],
                             check=True, capture_output=True, text=True)
        return json.loads(out.stdout)["ids"]
    return len(ids("--add-special")) > len(ids())


def gsm8k_text() -> str:
    items = [json.loads(line) for line in GSM8K.read_text().splitlines()[100:140]]
    return "\n\n".join(f"Question: {it['question']}\nAnswer: {it['answer']}" for it in items)


def text_ids(tok, n: int) -> list[int]:
    ids = tok(gsm8k_text(), add_special_tokens=True)["input_ids"]
    assert len(ids) >= n, f"only {len(ids)} tokens of text"
    return ids[:n]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def compare(name: str, got: np.ndarray, ref: np.ndarray) -> dict:
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    top1 = (got.argmax(axis=-1) == ref.argmax(axis=-1)).mean()
    row = {"who": name, "positions": int(ref.shape[0]), "top1_agreement": float(top1),
           "mean_kl": float(kl.mean()), "p99_kl": float(np.quantile(kl, 0.99)),
           "max_kl": float(kl.max())}
    print(f"{name:28s} positions {row['positions']:4d}  top-1 agreement {top1 * 100:6.2f}%  "
          f"mean KL {row['mean_kl']:.5f}  p99 KL {row['p99_kl']:.4f}  max KL {row['max_kl']:.4f}")
    return row


def bf16_emulation(hf) -> None:
    """Every nn.Linear of hf computes bf16(x) @ bf16(W)^T in float32 from now on."""
    for module in hf.modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        w = module.weight.detach().to(torch.bfloat16).to(torch.float32)
        b = module.bias

        def forward(x, w=w, b=b):
            return torch.nn.functional.linear(x.to(torch.bfloat16).to(torch.float32), w, b)

        module.forward = forward


def read_llama_kld_base(path: pathlib.Path):
    """llama-perplexity's --kl-divergence-base file: '_logits_', n_ctx, n_vocab, n_chunk (i32),
    the evaluated tokens (i32[n_chunk * n_ctx]), then per chunk n_ctx - 1 - n_ctx/2 rows of
    nv = 2 * ceil(n_vocab / 2) + 4 uint16: a float32 scale and minimum log-probability, then
    the quantized log-probabilities."""
    raw = path.read_bytes()
    assert raw[:8] == b"_logits_", "not a llama-perplexity logits file"
    n_ctx, n_vocab, n_chunk = np.frombuffer(raw, dtype="<i4", count=3, offset=8)
    off = 20
    tokens = np.frombuffer(raw, dtype="<i4", count=n_chunk * n_ctx, offset=off).reshape(n_chunk, n_ctx)
    off += 4 * n_chunk * n_ctx
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    rows_per_chunk = n_ctx - 1 - first
    q = np.frombuffer(raw, dtype="<u2", count=n_chunk * rows_per_chunk * nv, offset=off)
    q = q.reshape(n_chunk, rows_per_chunk, nv)
    head = q[:, :, :4].copy().view("<f4")  # [scale, min_log_prob]
    logp = head[:, :, 1:2] + head[:, :, 0:1] * q[:, :, 4:4 + n_vocab].astype(np.float64)
    return int(n_ctx), tokens, logp, first


def llama_cpp_side_by_side(args, model, tok, hf, text: str) -> list:
    """llama.cpp, kiln and transformers at the positions llama-perplexity scores."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "text.txt").write_text(text)
        subprocess.run([args.llama_perplexity, "-m", str(model), "-f", str(tmp / "text.txt"),
                        "--ctx-size", str(args.ctx_size), "--chunks", str(args.chunks), "-t", "2",
                        "--kl-divergence-base", str(tmp / "base.bin")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n_ctx, tokens, llama_logp, first = read_llama_kld_base(tmp / "base.bin")
        # llama-perplexity puts BOS first in each window when the model adds one, and keeps the
        # window's own first token otherwise.
        bos = tok.bos_token_id if kiln_adds_bos(args.kiln, model) else None
        ref_rows, kiln_rows = [], []
        for c in range(tokens.shape[0]):
            ids = tokens[c].tolist()
            if bos is not None:
                ids[0] = bos
            with torch.no_grad():
                ref = hf(torch.tensor([ids])).logits[0].numpy()
            ref_rows.append(ref[first:n_ctx - 1])
            (tmp / "ids.txt").write_text(" ".join(map(str, ids)))
            subprocess.run([args.kiln, "logits", "-m", str(model), "--ids", str(tmp / "ids.txt"),
                            "-o", str(tmp / "k.f32"), "--graph-mode", "optimize", "-t", "2"],
                           check=True, stdout=subprocess.DEVNULL)
            got = np.fromfile(tmp / "k.f32", dtype="<f4").reshape(n_ctx, -1)
            kiln_rows.append(got[first:n_ctx - 1])
        ref = np.concatenate(ref_rows)
        print(f"llama-perplexity windows: {tokens.shape[0]} x {n_ctx} tokens, scoring positions "
              f"{first}..{n_ctx - 2} of each")
        rows.append(compare("llama.cpp (llama-perplexity)", llama_logp.reshape(ref.shape), ref))
        rows.append(compare("kiln (graph mode), same rows", np.concatenate(kiln_rows), ref))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=300)
    ap.add_argument("--model", help="GGUF file or installed model name (default: the default model)")
    ap.add_argument("--kiln", default=str(ROOT / "build" / "release" / "kiln"))
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--llama-perplexity", help="llama.cpp's llama-perplexity binary: compare it too")
    ap.add_argument("--ctx-size", type=int, default=128, help="llama-perplexity window")
    ap.add_argument("--chunks", type=int, default=4, help="llama-perplexity windows")
    ap.add_argument("--bf16-emulation", action="store_true",
                    help="also a bf16 matmul contract emulated in transformers")
    args = ap.parse_args()
    if args.bf16_emulation and args.llama_perplexity:
        sys.exit("--bf16-emulation changes the reference model: run --llama-perplexity apart")
    model = resolve_model(args.kiln, args.model) if args.model else default_model()
    torch.set_num_threads(2)

    t0 = time.time()
    tok = transformers.AutoTokenizer.from_pretrained(model.parent, gguf_file=model.name)
    hf = transformers.AutoModelForCausalLM.from_pretrained(model.parent, gguf_file=model.name,
                                                           dtype=torch.float32)
    hf.eval()
    ids = text_ids(tok, args.positions)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    print(f"transformers {transformers.__version__}: {len(ids)} positions in {time.time() - t0:.1f} s")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = pathlib.Path(tmp) / "ids.txt"
        ids_file.write_text(" ".join(map(str, ids)))
        for mode in ("off", "optimize"):
            out = pathlib.Path(tmp) / f"kiln_{mode}.f32"
            subprocess.run([args.kiln, "logits", "-m", str(model), "--ids", str(ids_file), "-o",
                            str(out), "--graph-mode", mode, "-t", "2"], check=True,
                           stdout=subprocess.DEVNULL)
            got = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
            assert got.shape == ref.shape, (got.shape, ref.shape)
            rows.append(compare(f"kiln (graph-mode {mode})", got, ref))
    if args.bf16_emulation:
        bf16_emulation(hf)
        with torch.no_grad():
            got = hf(torch.tensor([ids])).logits[0].numpy()
        rows.append(compare("bf16 matmuls (emulated)", got, ref))
    if args.llama_perplexity:
        rows += llama_cpp_side_by_side(args, model, tok, hf, gsm8k_text())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"model": str(model), "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
