#!/usr/bin/env bash
# GSM8K served in graph mode and in eager mode, alternating (ROUNDS rounds; which mode goes first
# alternates too, so a drift of the host's speed within the run does not favour one), on fresh servers
# that differ only in --graph-mode: output tok/s side by side, and whether every completion is
# identical between the modes (greedy decoding: it must be), and where each server's step time
# went (kiln_step_seconds_total by kind of step).
# Usage: bench/gsm8k_graph_vs_eager.sh [OUTDIR]   (default build/release/gsm8k-graph-vs-eager)
# Environment: ROUNDS (2), QUESTIONS (64), PARALLEL (32), THREADS (2), PORT (31555), FIRST_ROUND (1:
# FIRST_ROUND=2 ROUNDS=2 adds round 2, eager first, to an OUTDIR that holds round 1), MODEL (a GGUF
# path or installed name; default: the default model), MODE (completion or chat: kiln eval's
# --mode), SHOTS (5 in completion mode, 0 in chat mode).
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
O=${1:-build/release/gsm8k-graph-vs-eager}
rounds=${ROUNDS:-2} questions=${QUESTIONS:-64} parallel=${PARALLEL:-32}
threads=${THREADS:-2} port=${PORT:-31555} mode=${MODE:-completion}
shots=${SHOTS:-$([[ $mode == chat ]] && echo 0 || echo 5)}
model_args=()
[[ -n ${MODEL:-} ]] && model_args=(-m "$MODEL")
mkdir -p "$O"
for round in $(seq "${FIRST_ROUND:-1}" "$rounds"); do
  order="optimize off"
  ((round % 2 == 0)) && order="off optimize"
  for gm in $order; do
    $K serve "${model_args[@]}" --port "$port" --threads "$threads" --graph-mode "$gm" >"$O/serve_${gm}_$round.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 1; done
    echo "== graph-mode $gm, round $round, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
    $K eval gsm8k --url "http://127.0.0.1:$port" --mode "$mode" --num-shots "$shots" --api openai \
      --num-questions "$questions" --parallel "$parallel" \
      --output-jsonl "$O/out_${gm}_$round.jsonl" 2>&1 | grep -E "Accuracy|throughput"
    # Where the step time went: steps, rows and seconds by kind of step.
    curl -s "http://127.0.0.1:$port/metrics" | grep -E "^kiln_step(s|_rows|_seconds)_total" |
      grep -v " 0$" | tee "$O/steps_${gm}_$round.txt"
    kill -TERM "$pid"
    wait "$pid"
  done
done
# Completions must not depend on the mode (nor on the round).
completions() { .venv/bin/python3 -c 'import json, sys
for line in open(sys.argv[1]): print(json.dumps(json.loads(line)["completion"]))' "$1"; }
first=$(ls "$O"/out_*.jsonl | head -n 1)  # any run: all must be equal
for f in "$O"/out_*.jsonl; do
  if cmp -s <(completions "$first") <(completions "$f"); then
    echo "identical completions: $(basename "$f")"
  else
    echo "DIFFERENT completions: $(basename "$f")"
  fi
done
