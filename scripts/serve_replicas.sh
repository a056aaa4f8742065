#!/usr/bin/env bash
# Data-parallel replicas on one machine: N `kiln serve` workers (ports BASE+1..BASE+N, each with
# THREADS threads) behind SGLang's router (PyPI sglang-router, installed by scripts/setup.sh)
# on port BASE. Ctrl-C stops everything.
#
# Usage: scripts/serve_replicas.sh [-n N] [-t THREADS] [-p BASE] [--policy cache_aware|round_robin|
#        power_of_two|random] [-- kiln serve options, e.g. -m model.gguf]
# Across machines, start `kiln serve --host 0.0.0.0 --port P ...` on each and the router with
# their addresses:
#   .venv/bin/python3 -m sglang_router.launch_router --host 0.0.0.0 --port 30000 \
#     --worker-urls http://host1:P http://host2:P --policy cache_aware
set -euo pipefail
cd "$(dirname "$0")/.."
N=2 THREADS=1 BASE=30000 POLICY=cache_aware
while (($#)); do
  case $1 in
    -n) N=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    -p) BASE=$2; shift 2 ;;
    --policy) POLICY=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
urls=()
for ((i = 1; i <= N; i++)); do
  port=$((BASE + i))
  build/release/kiln serve --port "$port" --threads "$THREADS" "$@" >"build/release/worker$i.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$port")
done
for url in "${urls[@]}"; do
  until curl -sf "$url/health" >/dev/null; do
    kill -0 "${pids[@]}" || { echo "a worker exited; see build/release/worker*.log" >&2; exit 1; }
    sleep 0.5
  done
done
echo "workers ready: ${urls[*]}; router on http://127.0.0.1:$BASE ($POLICY)"
.venv/bin/python3 -m sglang_router.launch_router --host 127.0.0.1 --port "$BASE" \
  --policy "$POLICY" --worker-urls "${urls[@]}" &
pids+=($!)
wait
