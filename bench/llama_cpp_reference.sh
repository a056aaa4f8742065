#!/usr/bin/env bash
# kiln against llama.cpp on the same model, shapes and threads, measured side by side in one run
# (this host's speed drifts 2-3x within an hour, so only ratios taken minutes apart mean much).
#
# llama.cpp is the reference the kernel targets are stated against (decode at batch 1/8/32 with
# 128-token prompts and 64 generated tokens per sequence; prefill of a 512-token prompt). It is
# built by bench/llama_cpp_build.sh (its llama-batched-bench and llama-bench tools only, ~8
# minutes on 2 cores the first time).
#
# Each pair of measurements runs back to back, and the order flips between rounds so that a
# drifting host does not favour either side. Prints one table with each round's tok/s and ratio,
# the geometric mean of the ratios and the target ratio.
#
# Usage: bench/llama_cpp_reference.sh [OUTDIR] [ROUNDS]   (default build/release/llama-cpp-ref, 4)
# Needs a release build (scripts/build.sh release) and the default model (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release/llama-cpp-ref}
ROUNDS=${2:-4}
THREADS=2
K=build/release/kiln
mkdir -p "$OUT"
source bench/llama_cpp_build.sh
bin=$(llama_cpp_bin_dir "$OUT" llama-batched-bench llama-bench)
model=$(.venv/bin/python3 scripts/default_model.py)

log() { echo "$* $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log"; }
llama_decode() {  # $1 batch size, $2 output file
  "$bin/llama-batched-bench" -m "$model" -c $(($1 * 192)) -b 2048 -ub 512 -npp 128 -ntg 64 \
    -npl "$1" -t $THREADS -tb $THREADS --output-format jsonl >"$2" 2>"$2.log"
}
kiln_decode() {
  $K bench --threads $THREADS --batch-sizes "$1" --input-len 128 --output-len 64 --modes graph \
    --json "$2" >"$2.log" 2>&1
}
llama_prefill() {
  "$bin/llama-bench" -m "$model" -p 512 -n 0 -t $THREADS -o json >"$1" 2>"$1.log"
}
kiln_prefill() {
  $K bench --threads $THREADS --batch-sizes 1 --input-len 512 --output-len 4 --modes graph \
    --json "$1" >"$1.log" 2>&1
}

log "start"
for r in $(seq 1 "$ROUNDS"); do
  for shape in 1 8 32 prefill; do
    if [[ $shape == prefill ]]; then
      pair=("llama_prefill $OUT/r${r}_llama_prefill.json" "kiln_prefill $OUT/r${r}_kiln_prefill.json")
    else
      pair=("llama_decode $shape $OUT/r${r}_llama_bs$shape.jsonl"
        "kiln_decode $shape $OUT/r${r}_kiln_bs$shape.json")
    fi
    if ((r % 2)); then first=0; else first=1; fi
    ${pair[$first]}
    ${pair[$((1 - first))]}
    log "round $r $shape"
  done
done
.venv/bin/python3 bench/llama_cpp_reference_table.py "$OUT" "$ROUNDS" | tee "$OUT/table.txt"
