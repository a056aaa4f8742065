"""Prints the table of bench/llama_cpp_reference.sh: kiln vs llama.cpp per shape and round.

Usage: llama_cpp_reference_table.py OUTDIR ROUNDS SHAPE...
Shapes: 1, 8, 32 (decode at that batch size, 128-token prompts), 8x2k (decode at batch 8 with
2048-token prompts), prefill512, prefill4096, load (seconds to load and generate one token:
lower is better, so its ratio is llama.cpp's time over kiln's, like the others >1 when kiln wins).
The "all" row is the geometric mean of the rounds' ratios: rounds alternate which side runs
first, so over an even number of rounds a host that drifts steadily favours neither side.
Targets are issue 5's for the default model and the smaller shapes: decode at batch 1 / 8 / 32 at
least 1.8x / 3x / 4x llama.cpp, prefill of 512 tokens at least 2x; for the Llama 3.1 8B shape,
issue 15's: 1.3x / 2.5x / 3x, prefill 2x. Each run's peak resident memory (from /usr/bin/time) is
shown too; kiln's at batch 1 includes the 1 GiB buffer of its bandwidth probe (the prefill runs
skip the probe, so their peak is the model's).
"""
import json
import math
import sys
from pathlib import Path

TARGETS = {"1": 1.8, "8": 3.0, "32": 4.0, "prefill512": 2.0}
# Shapes with targets of their own, by a part of the model file's name.
TARGETS_BY_MODEL = {"llama3.1-8b": {"1": 1.3, "8": 2.5, "32": 3.0, "prefill512": 2.0}}


def targets_for(model_line: str) -> dict:
    for part, targets in TARGETS_BY_MODEL.items():
        if part in model_line:
            return targets
    return TARGETS
NAMES = {"1": "decode bs 1", "8": "decode bs 8", "32": "decode bs 32", "8x2k": "decode bs 8, 2k",
         "prefill512": "prefill 512", "prefill4096": "prefill 4096", "load": "load + 1 token"}


def files(out: Path, r: int, shape: str):
    if shape == "load":
        return out / f"r{r}_kiln_load.txt", out / f"r{r}_llama_load.txt"
    if shape.startswith("prefill"):
        return out / f"r{r}_kiln_{shape}.json", out / f"r{r}_llama_{shape}.json"
    return out / f"r{r}_kiln_bs{shape}.json", out / f"r{r}_llama_bs{shape}.jsonl"


def peak_mib_and_seconds(path: Path):
    """/usr/bin/time's "%M %e" for the run that wrote path."""
    kib, seconds = Path(str(path) + ".time").read_text().split()[-2:]
    return int(kib) / 1024, float(seconds)


def llama_value(path: Path, shape: str) -> float:
    if shape == "load":
        return peak_mib_and_seconds(path)[1]
    if shape.startswith("prefill"):
        n = int(shape[len("prefill"):])
        runs = json.loads(path.read_text())
        return next(r["avg_ts"] for r in runs if r["n_prompt"] == n and r["n_gen"] == 0)
    batch = shape.split("x")[0]
    for line in path.read_text().splitlines():
        if line.strip().startswith("{"):
            row = json.loads(line)
            if str(row["pl"]) == batch:
                return row["speed_tg"]
    raise ValueError(f"{path}: no row for batch {batch}")


def kiln_value(path: Path, shape: str) -> float:
    if shape == "load":
        return peak_mib_and_seconds(path)[1]
    result = json.loads(path.read_text())["results"][0]
    return result["prefill"]["tok_s"] if shape.startswith("prefill") else result["graph"]["decode_tok_s"]


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
        k = kiln_value(out / f"r{r}_kiln_bs1.json", "1") * kiln_bytes / 1e9
        ll = llama_value(out / f"r{r}_llama_bs1.jsonl", "1") * gguf_bytes / 1e9
        print(f"  round {r}: probe {probe:.1f} GB/s | kiln {k:.1f} GB/s ({100 * k / probe:.0f}%) | "
              f"llama.cpp {ll:.1f} GB/s ({100 * ll / probe:.0f}%)")
    print(f"  bytes per token: kiln {kiln_bytes / 1e6:.1f} MB, llama.cpp {gguf_bytes / 1e6:.1f} MB")


def main() -> None:
    out, rounds = Path(sys.argv[1]), int(sys.argv[2])
    shapes = sys.argv[3:] or ["1", "8", "32", "prefill512"]
    model = out / "model"
    model_line = model.read_text().strip() if model.is_file() else ""
    if model_line:
        print(model_line)
    targets = targets_for(model_line)
    print(f"{'shape':>15} | {'round':>5} | {'kiln':>9} | {'llama.cpp':>9} | {'ratio':>6} | target | "
          f"peak MiB kiln / llama.cpp")
    for shape in shapes:
        name, target = NAMES[shape], targets.get(shape)
        unit = "s" if shape == "load" else "tok/s"
        ratios = []
        for r in range(1, rounds + 1):
            kiln_file, llama_file = files(out, r, shape)
            k, ll = kiln_value(kiln_file, shape), llama_value(llama_file, shape)
            ratio = ll / k if shape == "load" else k / ll
            ratios.append(ratio)
            peak_k, peak_l = peak_mib_and_seconds(kiln_file)[0], peak_mib_and_seconds(llama_file)[0]
            print(f"{name:>15} | {r:>5} | {k:>9.2f} | {ll:>9.2f} | {ratio:>5.2f}x | "
                  f"{f'{target:.1f}x' if target else '-':>6} | {peak_k:.0f} / {peak_l:.0f}  ({unit})")
        geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"{name:>15} | {'all':>5} | {'':>9} | {'':>9} | {geomean:>5.2f}x | "
              f"{f'{target:.1f}x' if target else '-':>6} |")
    if "1" in shapes:
        print("(kiln's peak at batch 1 includes its bandwidth probe's 1 GiB buffer)")
        bandwidth_fractions(out, rounds)


if __name__ == "__main__":
    main()
