#!/usr/bin/env bash
# GSM8K on an instruct model: kiln serve (graph mode, then eager mode) and llama.cpp's
# llama-server on the same GGUF file with the same prompts, one server at a time, in both of
# `kiln eval gsm8k`'s modes (completion: SGLang's few-shot prompt text; chat: the model's own
# template through /v1/chat/completions). Prints accuracy, invalid answers, latency and output
# throughput per engine and mode, whether graph and eager completions are byte-identical, and
# each kiln server's prompt, cached-prompt and generated token counts (where its step time goes).
# Usage: bench/gsm8k_vs_llama_server.sh MODEL [OUTDIR]     MODEL: a GGUF path or installed name
# Environment: QUESTIONS (200), PARALLEL (32), THREADS (2), MODES ("completion chat"),
# ENGINES ("kiln kiln-eager llama"), SHOTS_COMPLETION (5), SHOTS_CHAT (0), MAX_NEW_TOKENS (512),
# CTX_PER_SLOT (2048: llama-server's -c is PARALLEL x this), PORT (31577), EAGER_QUESTIONS and
# LLAMA_QUESTIONS (default QUESTIONS: the slower engines can answer the first N questions only;
# the graph/eager comparison covers the questions both answered).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/llama_cpp_build.sh
source bench/server_health.sh
K=build/release/kiln
model=${1:?usage: bench/gsm8k_vs_llama_server.sh MODEL [OUTDIR]}
O=${2:-build/release/gsm8k-vs-llama-server}
questions=${QUESTIONS:-200} parallel=${PARALLEL:-32} threads=${THREADS:-2}
port=${PORT:-31577} max_new=${MAX_NEW_TOKENS:-512} ctx_per_slot=${CTX_PER_SLOT:-2048}
mkdir -p "$O"
[[ -f $model ]] || model=$($K pull "$model") || exit 1
llama_bin=""
if [[ " ${ENGINES:-kiln kiln-eager llama} " == *" llama "* ]]; then
  llama_bin=$(llama_cpp_bin_dir "$O" llama-server) || exit 1
fi
url=http://127.0.0.1:$port

start_server() {  # engine log
  case $1 in
    kiln) $K serve -m "$model" --port "$port" --threads "$threads" --graph-mode optimize >"$2" 2>&1 & ;;
    kiln-eager) $K serve -m "$model" --port "$port" --threads "$threads" --graph-mode off >"$2" 2>&1 & ;;
    llama) "$llama_bin/llama-server" -m "$model" --port "$port" -t "$threads" -np "$parallel" \
      -c $((parallel * ctx_per_slot)) --jinja >"$2" 2>&1 & ;;
  esac
  pid=$!
  wait_until_healthy "$url" "$pid" "$1" "$2"
}

for mode in ${MODES:-completion chat}; do
  shots=${SHOTS_COMPLETION:-5}
  [[ $mode == chat ]] && shots=${SHOTS_CHAT:-0}
  for engine in ${ENGINES:-kiln kiln-eager llama}; do
    tag=${engine}_$mode
    start_server "$engine" "$O/serve_$tag.log" || continue
    n=$questions
    [[ $engine == kiln-eager ]] && n=${EAGER_QUESTIONS:-$questions}
    [[ $engine == llama ]] && n=${LLAMA_QUESTIONS:-$questions}
    echo "== $engine, $mode mode, $shots shots, $n questions, $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
    $K eval gsm8k --url "$url" --api openai --mode "$mode" --num-shots "$shots" \
      --num-questions "$n" --parallel "$parallel" --max-new-tokens "$max_new" \
      --output-jsonl "$O/out_$tag.jsonl" 2>&1 | tee "$O/eval_$tag.txt" | grep -E "Accuracy|Invalid|Latency|throughput"
    if [[ $engine == kiln* ]]; then
      curl -s "$url/metrics" | grep -E "^kiln_(prompt|generation)_tokens_total|^kiln_prefix_cache_hit_tokens_total|^kiln_(graph|eager|mixed)_steps_total|^kiln_step_(seconds|rows)_total|^kiln_steps_total" \
        | tee "$O/metrics_$tag.txt"
    fi
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null
  done
  # Greedy decoding: graph and eager mode must write the same bytes for every question.
  if [[ -f $O/out_kiln_$mode.jsonl && -f $O/out_kiln-eager_$mode.jsonl ]]; then
    .venv/bin/python3 - "$O/out_kiln_$mode.jsonl" "$O/out_kiln-eager_$mode.jsonl" "$mode" <<'PY'
import json, sys
graph, eager = ({r["index"]: r["completion"] for r in map(json.loads, open(f))} for f in sys.argv[1:3])
common = sorted(set(graph) & set(eager))
same = sum(graph[i] == eager[i] for i in common)
verdict = "identical" if same == len(common) else "DIFFER"
print(f"{sys.argv[3]} mode: graph and eager completions {verdict}: {same} of {len(common)} questions byte-identical")
PY
  fi
done
