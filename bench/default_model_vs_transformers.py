"""The default model (Gemma 3 270M Q4_K_M) against Hugging Face transformers running the same
GGUF file dequantized to float32: top-1 agreement and KL divergence of the next-token
distributions at every position of a few hundred tokens of varied text (GSM8K questions and
answers: prose, numbers, arithmetic). Printed, not asserted: quantized weights make kiln and
the dequantized float model differ by design, and the figure is for reading next to other
engines' on the same positions.

Run by hand in the oracle venv (scripts/oracle_venv.sh) after a release build:

    .venv-oracle/bin/python3 bench/default_model_vs_transformers.py [--positions 300]

kiln's rows come from `kiln logits` (every position through the decode path), in eager and in
graph mode. transformers' come from `from_pretrained(..., gguf_file=...)`, which dequantizes
every tensor to float32.
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
GSM8K = ROOT.parent / "shared" / "data" / "gsm8k" / "train.jsonl"


def default_model() -> pathlib.Path:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python3"), str(ROOT / "scripts" / "default_model.py")],
                         check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip())


def text_ids(tok, n: int) -> list[int]:
    items = [json.loads(line) for line in GSM8K.read_text().splitlines()[100:140]]
    text = "\n\n".join(f"Question: {it['question']}\nAnswer: {it['answer']}" for it in items)
    ids = tok(text, add_special_tokens=True)["input_ids"]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=300)
    ap.add_argument("--kiln", default=str(ROOT / "build" / "release" / "kiln"))
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    model = default_model()
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
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"model": str(model), "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
