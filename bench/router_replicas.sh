#!/usr/bin/env bash
# Data parallelism through SGLang's router on this machine: GSM8K (`kiln eval gsm8k`) against
#   single   one `kiln serve` with 2 threads,
#   cache    two workers with 1 thread each behind sglang-router, cache-aware policy,
#   rr       the same two workers, round robin,
# in alternating rounds. On one 2-core machine the replicas share the cores the single server
# uses, so this measures the router's overhead and what routing does to the prefix cache, not
# scaling. Prints accuracy, output throughput and the prefix-cache hit rate (hit tokens over
# prompt tokens, summed over the workers' /metrics) per round.
#
# Usage: bench/router_replicas.sh [QUESTIONS] [PARALLEL] [ROUNDS]   (defaults 60, 16, 2)
# Needs a release build and scripts/setup.sh (default model, sglang-router).
set -euo pipefail
cd "$(dirname "$0")/.."
Q=${1:-60}
PAR=${2:-16}
ROUNDS=${3:-2}
K=build/release/kiln
OUT=build/release/router-bench
mkdir -p "$OUT"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_up() { until curl -sf "$1" >/dev/null; do sleep 0.5; done; }
start_server() {  # port threads
  $K serve --port "$1" --threads "$2" --random-seed 1 >"$OUT/server$1.log" 2>&1 &
  pids+=($!)
  wait_up "http://127.0.0.1:$1/health"
}
hits() {  # port...: "hit_tokens query_tokens" summed
  local h=0 q=0 p m
  for p in "$@"; do
    m=$(curl -s "http://127.0.0.1:$p/metrics")
    h=$((h + $(echo "$m" | awk '/^kiln_prefix_cache_hit_tokens_total /{print int($2)}')))
    q=$((q + $(echo "$m" | awk '/^kiln_prefix_cache_query_tokens_total /{print int($2)}')))
  done
  echo "$h $q"
}
flush() { local p; for p in "$@"; do curl -s -X POST "http://127.0.0.1:$p/flush_cache" -H 'Content-Length: 0' >/dev/null; done; }
eval_at() {  # url label ports...
  local url=$1 label=$2
  shift 2
  flush "$@"
  read -r h0 q0 < <(hits "$@")
  $K eval gsm8k --url "$url" --num-questions "$Q" --parallel "$PAR" >"$OUT/$label.txt" 2>&1
  read -r h1 q1 < <(hits "$@")
  printf '%-7s accuracy %s  output %s tok/s  prefix-cache hit rate %.3f\n' "$label" \
    "$(awk '/^Accuracy/{print $2}' "$OUT/$label.txt")" \
    "$(awk '/^Output throughput/{print $3}' "$OUT/$label.txt")" \
    "$(echo "$h0 $q0 $h1 $q1" | awk '{print ($4 > $2) ? ($3 - $1) / ($4 - $2) : 0}')"
}

start_server 30201 2
start_server 30211 1
start_server 30212 1
routers=()
for policy in cache_aware round_robin; do
  port=$((30200 + ${#routers[@]} + 2))
  .venv/bin/python3 -m sglang_router.launch_router --host 127.0.0.1 --port "$port" \
    --policy "$policy" --prometheus-port $((port + 100)) \
    --worker-urls http://127.0.0.1:30211 http://127.0.0.1:30212 >"$OUT/router_$policy.log" 2>&1 &
  pids+=($!)
  wait_up "http://127.0.0.1:$port/v1/models"
  routers+=("$port")
done
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r"
  # Only the configuration under test runs; the others sit idle.
  eval_at http://127.0.0.1:30201 single 30201
  eval_at "http://127.0.0.1:${routers[0]}" cache 30211 30212
  eval_at "http://127.0.0.1:${routers[1]}" rr 30211 30212
done
