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
K=build/release/kiln
model=${1:-qwen2.5-coder-1.5b}
O=${2:-build/release/tool-calls}
threads=${THREADS:-2} port=${PORT:-31578}
mkdir -p "$O"
[[ -f $model ]] || model=$($K pull "$model") || exit 1
url=http://127.0.0.1:$port
llama_bin=""
if [[ " ${ENGINES:-kiln llama} " == *" llama "* ]]; then
  llama_bin=$(llama_cpp_bin_dir "$O" llama-server) || exit 1
fi

start_server() {  # engine log
  case $1 in
    kiln) $K serve -m "$model" --port "$port" --threads "$threads" >"$2" 2>&1 & ;;
    llama) "$llama_bin/llama-server" -m "$model" --port "$port" -t "$threads" -np 1 -c 8192 \
      --jinja >"$2" 2>&1 & ;;
  esac
  pid=$!
  wait_until_healthy "$url" "$pid" "$1" "$2"
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
