"""Prints the table of bench/llama_cpp_reference.sh: kiln vs llama.cpp per shape and round.

Usage: llama_cpp_reference_table.py OUTDIR ROUNDS
The "all" row is the geometric mean of the rounds' ratios: rounds alternate which side runs
first, so over an even number of rounds a host that drifts steadily favours neither side.
Targets are issue 5's: decode at batch 1 / 8 / 32 at least 1.8x / 3x / 4x llama.cpp, prefill of
512 tokens at least 2x.
"""
import json
import math
import sys
from pathlib import Path

TARGETS = {"1": 1.8, "8": 3.0, "32": 4.0, "prefill": 2.0}


def llama_tok_s(path: Path, shape: str) -> float:
    if shape == "prefill":
        runs = json.loads(path.read_text())
        return next(r["avg_ts"] for r in runs if r["n_prompt"] == 512 and r["n_gen"] == 0)
    for line in path.read_text().splitlines():
        if line.strip().startswith("{"):
            row = json.loads(line)
            if str(row["pl"]) == shape:
                return row["speed_tg"]
    raise ValueError(f"{path}: no row for batch {shape}")


def kiln_tok_s(path: Path, shape: str) -> float:
    result = json.loads(path.read_text())["results"][0]
    return result["prefill"]["tok_s"] if shape == "prefill" else result["graph"]["decode_tok_s"]


def bandwidth_fractions(out: Path, rounds: int) -> None:
    """Batch 1 reads every weight once per token: each side's bytes per token times its tok/s,
    as a fraction of the read bandwidth kiln bench measured in the same pair (its probe).
    kiln reads its repacked weights (the bench's figure); llama.cpp reads the GGUF's tensors
    as stored (their bytes, summed from the file)."""
    from gguf import GGUFReader

    print("\nbatch 1 against the memory bandwidth measured in the same pair:")
    for r in range(1, rounds + 1):
        kiln = json.loads((out / f"r{r}_kiln_bs1.json").read_text())
        probe = kiln["bandwidth"]["gbs"]
        kiln_bytes = kiln["model"]["weight_bytes_per_step"]
        if r == 1:
            gguf_bytes = sum(int(t.n_bytes) for t in GGUFReader(kiln["model"]["path"]).tensors)
        k = kiln_tok_s(out / f"r{r}_kiln_bs1.json", "1") * kiln_bytes / 1e9
        ll = llama_tok_s(out / f"r{r}_llama_bs1.jsonl", "1") * gguf_bytes / 1e9
        print(f"  round {r}: probe {probe:.1f} GB/s | kiln {k:.1f} GB/s ({100 * k / probe:.0f}%) | "
              f"llama.cpp {ll:.1f} GB/s ({100 * ll / probe:.0f}%)")
    print(f"  bytes per token: kiln {kiln_bytes / 1e6:.1f} MB, llama.cpp {gguf_bytes / 1e6:.1f} MB")


def main() -> None:
    out, rounds = Path(sys.argv[1]), int(sys.argv[2])
    print(f"{'shape':>14} | {'round':>5} | {'kiln tok/s':>10} | {'llama.cpp':>10} | "
          f"{'ratio':>6} | target")
    for shape, target in TARGETS.items():
        name = "prefill 512" if shape == "prefill" else f"decode bs {shape}"
        ratios = []
        for r in range(1, rounds + 1):
            if shape == "prefill":
                k = kiln_tok_s(out / f"r{r}_kiln_prefill.json", shape)
                ll = llama_tok_s(out / f"r{r}_llama_prefill.json", shape)
            else:
                k = kiln_tok_s(out / f"r{r}_kiln_bs{shape}.json", shape)
                ll = llama_tok_s(out / f"r{r}_llama_bs{shape}.jsonl", shape)
            ratios.append(k / ll)
            print(f"{name:>14} | {r:>5} | {k:>10.1f} | {ll:>10.1f} | {k / ll:>5.2f}x | "
                  f"{target:.1f}x")
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"{name:>14} | {'all':>5} | {'':>10} | {'':>10} | {geomean:>5.2f}x | {target:.1f}x")
    bandwidth_fractions(out, rounds)


if __name__ == "__main__":
    main()
