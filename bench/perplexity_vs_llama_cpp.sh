#!/usr/bin/env bash
# Perplexity of a model with `kiln perplexity` and llama.cpp's `llama-perplexity` on the same
# text file, context size and chunks (the same method: windows of CTX tokens, BOS first, the
# second half of each scored), with the time each took. The text defaults to the first 400
# GSM8K training problems ("Question: ...\nAnswer: ..." joined by blank lines) from a local
# copy of GSM8K's train.jsonl.
#
# Usage: bench/perplexity_vs_llama_cpp.sh GSM8K_TRAIN_JSONL|TEXT_FILE [CTX] [CHUNKS] [MODEL]
#        (defaults: 512, 20, the default model). Needs a release build and scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:?usage: $0 GSM8K_TRAIN_JSONL|TEXT_FILE [CTX] [CHUNKS] [MODEL]}
CTX=${2:-512}
CHUNKS=${3:-20}
MODEL=${4:-$(.venv/bin/python3 scripts/default_model.py)}
OUT=build/release/perplexity
mkdir -p "$OUT"
source bench/llama_cpp_build.sh
bin=$(llama_cpp_bin_dir "$OUT" llama-perplexity)

text=$SRC
if [[ $SRC == *.jsonl ]]; then
  text=$OUT/gsm8k_400.txt
  .venv/bin/python3 - "$SRC" "$text" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])][:400]
open(sys.argv[2], "w").write(
    "\n\n".join(f"Question: {r['question']}\nAnswer: {r['answer']}" for r in rows))
PY
fi

echo "text: $text ($(wc -c <"$text") bytes), ctx $CTX, $CHUNKS chunks, model $MODEL"
t0=$(date +%s%N)
build/release/kiln perplexity -m "$MODEL" -f "$text" -c "$CTX" --chunks "$CHUNKS" -t 2 \
  >"$OUT/kiln.txt" 2>"$OUT/kiln.log"
t1=$(date +%s%N)
"$bin/llama-perplexity" -m "$MODEL" -f "$text" -c "$CTX" --chunks "$CHUNKS" -b "$CTX" -t 2 \
  >"$OUT/llama.txt" 2>&1
t2=$(date +%s%N)
printf 'kiln      %s   (%d ms)\n' "$(grep 'Final estimate' "$OUT/kiln.txt")" $(((t1 - t0) / 1000000))
printf 'llama.cpp %s   (%d ms)\n' "$(grep -o 'Final estimate.*' "$OUT/llama.txt")" \
  $(((t2 - t1) / 1000000))
