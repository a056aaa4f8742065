#!/usr/bin/env bash
# Tool calling on a real model, kiln against llama.cpp's llama-server --jinja on the same GGUF
# file: the 60 prompts of bench/prompts/tool_calls/cases.json, one server at a time, requests
# one at a time, greedy, tool_choice "auto" (bench/tool_calls_compare.py). Prints, per engine,
# how many calls were made and how many validate against their function's schema (jsonschema
# with formats), agreement with the expected call / no call and the expected names, latency.
# Usage: bench/tool_calls_vs_llama_server.sh [MODEL] [OUTDIR]   MODEL: a GGUF path or installed
# name (default qwen2.5-coder-1.5b). Environment: THREADS (2), PORT (31578), ENGINES
# ("kiln llama"), ROUNDS (1: each engine runs the whole set this many times, alternating).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/llama_cpp_build.sh
source bench/server_health.sh
engine_servers "${1:-qwen2.5-coder-1.5b}" "${2:-build/release/tool-calls}" "${PORT:-31578}" || exit 1

start_server() {  # engine log
  start_engine_server "$1" "$2" -np 1 -c 8192 --jinja
}

files=()
for round in $(seq 1 "${ROUNDS:-1}"); do
  for engine in ${ENGINES:-kiln llama}; do
    tag=${engine}_r$round
    start_server "$engine" "$O/serve_$tag.log" || continue
    echo "== $engine round $round, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
    .venv/bin/python bench/tool_calls_compare.py run --url "$url" --engine "$engine" \
      --out "$O/$tag.jsonl" 2>"$O/run_$tag.log"
    files+=("$O/$tag.jsonl")
    kill "$pid"
    wait "$pid" 2>/dev/null
  done
done
.venv/bin/python bench/tool_calls_compare.py report "${files[@]}" | tee "$O/report.md"
