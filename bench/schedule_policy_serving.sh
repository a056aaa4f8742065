#!/usr/bin/env bash
# Prefix-cache hit rate and output throughput of --schedule-policy fcfs (A) against lpm (B): two
# servers on one model, the same shared-prefix requests (`kiln bench serving --dataset
# shared-prefix`: PREFIX_GROUPS system prompts of PREFIX_LEN tokens taking turns, INPUT_LEN
# tokens of each request's own after them), all sent at once, more than MAX_RUNNING run at a
# time so that a queue forms; alternating rounds, each after a cache flush, after one unmeasured
# warm-up run on each server. Two KV pool sizes (KV_TOKENS_LIST): one that holds every prefix,
# and one that holds only some, where the order of admission decides what the cache keeps; the
# context length is CONTEXT for both (--kv-tokens alone would also cap it).
# Usage: bench/schedule_policy_serving.sh [OUTDIR]   (default build/release/schedule-policy)
# Environment: MODEL (the default model), THREADS (2), ROUNDS (5), PREFIX_GROUPS (8),
# PREFIX_LEN (256), INPUT_LEN (32), OUTPUT_LEN (32), PROMPTS (64), MAX_RUNNING (4),
# KV_TOKENS_LIST ("16384 1536"), CONTEXT (1024), PORT (31700; B uses PORT + 1).
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
O=${1:-build/release/schedule-policy}
threads=${THREADS:-2} rounds=${ROUNDS:-5} port=${PORT:-31700}
mkdir -p "$O"
model_args=()
[[ -n ${MODEL:-} ]] && model_args=(-m "$MODEL")
workload=(--dataset shared-prefix --shared-prefix-groups "${PREFIX_GROUPS:-8}"
  --shared-prefix-len "${PREFIX_LEN:-256}" --input-len "${INPUT_LEN:-32}"
  --output-len "${OUTPUT_LEN:-32}" --num-prompts "${PROMPTS:-64}")
for kv in ${KV_TOKENS_LIST:-16384 1536}; do
  common=("${model_args[@]}" --threads "$threads" --max-running-requests "${MAX_RUNNING:-4}"
    --kv-tokens "$kv" --context-length "${CONTEXT:-1024}" --random-seed 1)
  $K serve "${common[@]}" --port "$port" --schedule-policy fcfs >"$O/serve_fcfs_kv$kv.log" 2>&1 &
  a=$!
  $K serve "${common[@]}" --port $((port + 1)) --schedule-policy lpm >"$O/serve_lpm_kv$kv.log" 2>&1 &
  b=$!
  trap 'kill -TERM $a $b 2>/dev/null; wait $a $b 2>/dev/null' EXIT
  for p in $port $((port + 1)); do
    for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 1; done
  done
  for p in $port $((port + 1)); do  # warm-up: first touch of the pool's pages, plans
    $K bench serving --url "http://127.0.0.1:$p" "${workload[@]}" >/dev/null 2>&1
  done
  echo "== kv-tokens $kv, A fcfs, B lpm, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  $K bench serving --url "http://127.0.0.1:$port" --compare-url "http://127.0.0.1:$((port + 1))" \
    --rounds "$rounds" "${workload[@]}" --json "$O/kv$kv.json" 2>&1 | tee "$O/kv$kv.txt" |
    grep -v '^[AB] \['
  echo "   after: load $(cut -d' ' -f1-3 /proc/loadavg)"
  kill -TERM $a $b 2>/dev/null
  wait $a $b 2>/dev/null
  trap - EXIT
done
