#!/usr/bin/env bash
# Builds and runs every benchmark of the project on this machine and prints the figures:
#   1. the microbenchmarks bench/*_bench.cc (Google Benchmark, one executable each);
#   2. `kiln bench` on the default model (Gemma 3 270M Q4_K_M): prefill and decode per batch
#      size, eager vs graph side by side, capture times, arena, barriers, host overhead,
#      batch-1 bandwidth fraction and the --breakdown of graph mode's gain.
# Results (JSON, SVG plot, raw logs) go to $KILN_BENCH_OUT (default build/release/bench-results).
#
# Environment: KILN_THREADS (default 2), KILN_JOBS (build jobs, default 2), KILN_BENCH_MODEL
# (default: the default model), KILN_BENCH_ARGS (extra `kiln bench` flags), KILN_MICRO_FILTER
# (a --benchmark_filter regex; "none" skips the microbenchmarks), KILN_MICRO_MIN_TIME
# (--benchmark_min_time in seconds, default 0.2).
set -euo pipefail
cd "$(dirname "$0")/.."

threads=${KILN_THREADS:-2}
jobs=${KILN_JOBS:-2}
out=${KILN_BENCH_OUT:-build/release/bench-results}
filter=${KILN_MICRO_FILTER:-.}
min_time=${KILN_MICRO_MIN_TIME:-0.2}  # seconds (Google Benchmark 1.7 takes a plain number)
mkdir -p "$out"

micro=()
for src in bench/*_bench.cc; do micro+=("$(basename "${src%.cc}")"); done

echo "== build (kiln ${micro[*]})"
cmake --preset release >/dev/null
ninja -C build/release -j "$jobs" kiln "${micro[@]}" >/dev/null

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ "$filter" != "none" ]]; then
  for b in "${micro[@]}"; do
    echo "== $b"
    build/release/"$b" --benchmark_filter="$filter" --benchmark_min_time="$min_time" \
      --benchmark_out="$out/$b.json" --benchmark_out_format=json | tee "$out/$b.txt"
  done
fi

model_args=()
if [[ -n "${KILN_BENCH_MODEL:-}" ]]; then model_args=(-m "$KILN_BENCH_MODEL"); fi
echo "== kiln bench (threads $threads)"
# shellcheck disable=SC2086  # KILN_BENCH_ARGS is a list of flags
build/release/kiln bench "${model_args[@]}" --threads "$threads" --batch-sizes 1,8,32 --input-len 128 \
  --output-len 64 --breakdown --json "$out/kiln_bench.json" --plot "$out/kiln_bench.svg" ${KILN_BENCH_ARGS:-} \
  | tee "$out/kiln_bench.txt"

echo "== kiln graph (decode B=1, default model)"
build/release/kiln graph "${model_args[@]}" --bs 1 --stats | tee "$out/kiln_graph.txt"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results in $out"
