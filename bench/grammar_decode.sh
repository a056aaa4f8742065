#!/usr/bin/env bash
# Grammar-constrained decoding, kiln against llama.cpp's llama-server on the same GGUF file and
# prompts (bench/grammar_decode.py): decode tok/s at batch 1 and 8 under each GBNF grammar of
# tests/fixtures/grammars and unconstrained, rounds interleaved between the engines, medians and
# spread, each engine's slowdown from the grammar. Then the mask time per step of each grammar
# on the default model's 262,144-token vocabulary (`kiln grammar-check --model`: a random walk,
# every step's vocabulary walk timed as a cache miss pays it, and the cache's hit fraction).
# Usage: bench/grammar_decode.sh [MODEL] [OUTDIR]   MODEL: a GGUF path or installed name (default
# qwen2.5-coder-1.5b). Environment: THREADS (2), PORT (31579), ENGINES ("kiln llama"), ROUNDS
# (3), MAX_TOKENS (128), MASK_MODEL (the default model), MASK_STEPS (300).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/llama_cpp_build.sh
source bench/server_health.sh
engine_servers "${1:-qwen2.5-coder-1.5b}" "${2:-build/release/grammar-decode}" "${PORT:-31579}" || exit 1

start_server() {  # engine log
  start_engine_server "$1" "$2" -np 8 -c 16384
}

out="$O/decode.jsonl"
: >"$out"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for engine in ${ENGINES:-kiln llama}; do
    start_server "$engine" "$O/serve_${engine}_r$round.log" || continue
    echo "== $engine round $round, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
    .venv/bin/python bench/grammar_decode.py run --url "$url" --engine "$engine" \
      --round "$round" --out "$out" --max-tokens "${MAX_TOKENS:-128}" 2>"$O/run_${engine}_r$round.log"
    kill "$pid"
    wait "$pid" 2>/dev/null
  done
done
.venv/bin/python bench/grammar_decode.py report "$out" | tee "$O/report.md"

echo
echo "mask time per step (cache misses), vocabulary of ${MASK_MODEL:-the default model}:"
mask_model=${MASK_MODEL:-$(.venv/bin/python scripts/default_model.py)}
for g in tests/fixtures/grammars/*.gbnf; do
  printf '%s ' "$(basename "$g" .gbnf)"
  $K grammar-check --grammar "$g" --model "$mask_model" --mask-steps "${MASK_STEPS:-300}"
done | tee "$O/mask_time.txt"
