#!/usr/bin/env bash
# Serving throughput with and without speculative decoding, at several concurrencies: two
# servers on one model (A plain, B with ALGO), measured with the same requests by
# `kiln bench serving --compare-url` in alternating rounds. Random-id prompts, ignore_eos: a
# load with little to copy, where speculation must not cost throughput (the policy's job).
# Usage: bench/speculative_serving.sh [OUTDIR]   (default build/release/speculative-serving)
# Environment: MODEL (qwen2.5-coder-1.5b), ALGO (ngram, or standalone with DRAFT_MODEL,
# default qwen2.5-coder-0.5b), DRAFT (4), THREADS (2), ROUNDS (2), CONCURRENCY ("1 4 32"),
# INPUT_LEN (128), OUTPUT_LEN (96), PORT (31600; B uses PORT + 1).
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
O=${1:-build/release/speculative-serving}
model=${MODEL:-qwen2.5-coder-1.5b} algo=${ALGO:-ngram} draft=${DRAFT:-4} threads=${THREADS:-2}
rounds=${ROUNDS:-2} port=${PORT:-31600}
mkdir -p "$O"
spec_args=(--speculative-algorithm "$algo" --speculative-num-draft-tokens "$draft")
[[ $algo == standalone ]] &&
  spec_args+=(--speculative-draft-model-path "${DRAFT_MODEL:-qwen2.5-coder-0.5b}")
$K serve -m "$model" --port "$port" --threads "$threads" >"$O/serve_plain.log" 2>&1 &
a=$!
$K serve -m "$model" --port $((port + 1)) --threads "$threads" "${spec_args[@]}" \
  >"$O/serve_$algo.log" 2>&1 &
b=$!
trap 'kill -TERM $a $b 2>/dev/null; wait $a $b 2>/dev/null' EXIT
for p in $port $((port + 1)); do
  for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 1; done
done
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores;" \
  "model $model, A plain, B $algo ${DRAFT_MODEL:-} (up to $draft), $threads threads each"
for c in ${CONCURRENCY:-1 4 32}; do
  n=$((c < 4 ? 6 : 3 * c))
  ((n > 48)) && n=48
  echo "== concurrency $c, $n prompts, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  $K bench serving --url "http://127.0.0.1:$port" --compare-url "http://127.0.0.1:$((port + 1))" \
    --rounds "$rounds" --num-prompts "$n" --max-concurrency "$c" --input-len "${INPUT_LEN:-128}" \
    --output-len "${OUTPUT_LEN:-96}" --json "$O/c$c.json" 2>&1 | tee "$O/c$c.txt" | tail -n 12
done
echo "== speculation on B: $(curl -s "http://127.0.0.1:$((port + 1))/metrics" | grep -E '^kiln_spec_(verify_steps|proposed_tokens|accepted_tokens)_total' | tr '\n' ' ')"
