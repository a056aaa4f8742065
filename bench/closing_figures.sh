#!/usr/bin/env bash
# The figures of a closing note in one unattended run on a quiet machine (~5 minutes): machine
# limits, `kiln bench` per batch size with --breakdown and --op-profile, prefill of 512 tokens,
# capture of all 64 plans, `kiln run` in both modes, the matmul/attention/barrier microbenchmarks,
# and `kiln bench serving` at concurrency 1, 8 and 32 against a fresh `kiln serve`.
# Usage: bench/closing_figures.sh [OUTDIR]   (default build/release/closing-figures)
# Needs a release build (scripts/build.sh release) and the default model (scripts/setup.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
O=${1:-build/release/closing-figures}
mkdir -p "$O"
log() { echo "$* $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$O/log"; }

log "start"
# The machine's limits, measured here: read bandwidth, int8 dot and f32 FMA peaks.
build/release/bench/machine_limits_bench | tee -a "$O/log"
if grep -q avx512_vnni /proc/cpuinfo; then
  build/release/bench/contract_ceiling_bench --benchmark_filter=dots_only | tee -a "$O/log"
fi
build/release/bench/instruction_rate_bench --benchmark_filter=vfmadd | tee -a "$O/log"
for bs in 1 8 32; do
  $K bench --threads 2 --batch-sizes $bs --input-len 128 --output-len 64 --breakdown \
    --op-profile --json "$O/bench_bs$bs.json" >"$O/bench_bs$bs.txt" 2>&1
  log "bench bs$bs"
done
$K bench --threads 2 --batch-sizes 1 --input-len 512 --output-len 4 --modes graph \
  >"$O/prefill512.txt" 2>&1
$K bench --threads 2 --max-graph-bs 32 --batch-sizes 1 --input-len 16 --output-len 4 \
  --modes graph >"$O/capture64.txt" 2>&1
for mode in optimize off; do
  /usr/bin/time -f "maxrss %M KB" $K run -p "The history of the city of Rome begins" -n 64 -t 2 \
    --ignore-eos --graph-mode $mode >"$O/run_$mode.txt" 2>&1
done
build/release/bench/matmul_bench --benchmark_filter='(q_|gate_up|down_2048x640_q6|lm_head).*threads:2' \
  --benchmark_min_time=0.3 >"$O/matmul.txt" 2>&1
build/release/bench/kernels_bench --benchmark_filter='AttentionDecode.*threads:2' \
  --benchmark_min_time=0.3 >"$O/kernels.txt" 2>&1
build/release/bench/thread_pool_bench --benchmark_min_time=0.3 >"$O/thread_pool.txt" 2>&1
log "micro"
port=30999
$K serve --port $port --threads 2 >"$O/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -sf http://127.0.0.1:$port/health >/dev/null && break; sleep 1; done
for c in 1 8 32; do
  n=$((c * 4)); ((n < 16)) && n=16
  $K bench serving --url http://127.0.0.1:$port --max-concurrency $c --num-prompts $n \
    --input-len 128 --output-len 128 --json "$O/serving_c$c.json" >"$O/serving_c$c.txt" 2>&1
  log "serving c$c"
done
curl -s http://127.0.0.1:$port/metrics >"$O/serve_metrics.txt"
kill -TERM $pid
wait $pid
log "end"
