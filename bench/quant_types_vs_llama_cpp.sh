#!/usr/bin/env bash
# Each GGUF quant type kiln reads, on real weights, against llama.cpp on the same file: greedy
# text of both engines for a set of prompts (equal for the first N tokens, or where they part),
# and decode speed at batch 1 and 8 side by side (bench/llama_cpp_reference.sh's method).
#
# The files are the base model requantized by llama.cpp's own llama-quantize
# (--allow-requantize: the base file's blocks dequantized and quantized again, so both engines
# read exactly the same weights; the quality of the result is beside the point here).
#
# Usage: bench/quant_types_vs_llama_cpp.sh [OUTDIR] [ROUNDS] [BASE] [TYPES]
#   OUTDIR  default build/release/quant-types
#   ROUNDS  speed rounds per type (default 3; 0 skips the speed part)
#   BASE    a GGUF file or a `kiln pull` name (default qwen2.5-coder-1.5b)
#   TYPES   llama-quantize type names (default "Q4_1 Q5_1 Q2_K Q3_K_M IQ4_NL IQ4_XS MXFP4");
#           MXFP4 (a MoE-only file type in llama-quantize) is Q8_0 with every attention and FFN
#           matrix overridden to mxfp4 by --tensor-type
# KILN_BIN: the kiln binary (default build/release/kiln).
# QUANT_TYPES_FILES: extra GGUF files to check as they are (e.g. the SmolLM2 Q4_1 file).
# Needs a release build; builds llama.cpp's tools with bench/llama_cpp_build.sh if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release/quant-types}
ROUNDS=${2:-3}
BASE=${3:-qwen2.5-coder-1.5b}
TYPES=${4:-Q4_1 Q5_1 Q2_K Q3_K_M IQ4_NL IQ4_XS MXFP4}
N=${QUANT_TYPES_TOKENS:-16}
K=${KILN_BIN:-build/release/kiln}
PY=.venv/bin/python3
mkdir -p "$OUT"
source bench/llama_cpp_build.sh
bin=$(llama_cpp_bin_dir "$OUT" llama-quantize llama-simple llama-batched-bench llama-bench)
if [[ -f $BASE ]]; then
  base=$BASE
else
  base=$($PY scripts/pull_model.py "$BASE")
fi
stem=$(basename "$base" .gguf)

files=()
for t in $TYPES; do
  f=build/quant-types/$stem-${t,,}.gguf
  if [[ ! -f $f ]]; then
    mkdir -p build/quant-types
    args=("$t")
    if [[ $t == MXFP4 ]]; then
      args=()
      for m in attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down; do
        args+=(--tensor-type "$m=mxfp4")
      done
      args=("${args[@]}" "$base" "$f.tmp" Q8_0)
    else
      args=("$base" "$f.tmp" "$t")
    fi
    "$bin/llama-quantize" --allow-requantize "${args[@]}" 2 >"$OUT/quantize-$t.log" 2>&1 ||
      { echo "llama-quantize failed for $t (see $OUT/quantize-$t.log)"; exit 1; }
    mv "$f.tmp" "$f"
  fi
  files+=("$f")
done
# shellcheck disable=SC2206
files+=(${QUANT_TYPES_FILES:-})

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; base: $base" | tee "$OUT/summary.txt"
for f in "${files[@]}"; do
  name=$(basename "$f" .gguf)
  types=$($PY - "$f" <<'EOF'
import collections, sys
from gguf import GGUFReader
counts = collections.Counter(t.tensor_type.name for t in GGUFReader(sys.argv[1]).tensors)
print(" ".join(f"{k}:{v}" for k, v in counts.most_common()))
EOF
)
  # Greedy text, one prompt per line of the prompt file; both engines add the vocabulary's BOS
  # as the file says and stop after N tokens.
  same=0
  total=0
  while IFS= read -r prompt; do
    [[ -n $prompt ]] || continue
    total=$((total + 1))
    "$bin/llama-simple" -m "$f" -n "$N" "$prompt" >"$OUT/$name-llama-$total.txt" \
      2>"$OUT/$name-llama-$total.log"
    $K run -m "$f" -t 2 --temp 0 --ignore-eos -n "$N" -p "$prompt" >"$OUT/$name-kiln-$total.txt" \
      2>"$OUT/$name-kiln-$total.log"
    if $PY - "$prompt" "$OUT/$name-llama-$total.txt" "$OUT/$name-kiln-$total.txt" \
      >>"$OUT/$name-text.txt" <<'EOF'; then same=$((same + 1)); fi
import sys
prompt, llama_file, kiln_file = sys.argv[1:]
llama = open(llama_file, encoding="utf-8", errors="replace").read()
kiln = open(kiln_file, encoding="utf-8", errors="replace").read()
# llama-simple prints the prompt then the continuation; kiln run prints the continuation.
llama = llama[len(prompt):] if llama.startswith(prompt) else llama
llama, kiln = llama.rstrip("\n"), kiln.rstrip("\n")
common = 0
while common < min(len(llama), len(kiln)) and llama[common] == kiln[common]:
  common += 1
print(f"--- {prompt!r}\n  llama.cpp: {llama!r}\n  kiln:      {kiln!r}\n  equal: {llama == kiln}"
      f" (first {common} characters agree)")
sys.exit(0 if llama == kiln else 1)
EOF
  done <bench/prompts/quant_types.txt
  echo "$name [$types]: greedy text equal to llama.cpp's for $same of $total prompts ($N tokens)" |
    tee -a "$OUT/summary.txt"
  if ((ROUNDS > 0)); then
    BENCH_SHAPES="1 8" bench/llama_cpp_reference.sh "$OUT/speed-$name" "$ROUNDS" "$f" >/dev/null
    sed 's/^/    /' "$OUT/speed-$name/table.txt" | grep -E 'decode|all|round' | tee -a "$OUT/summary.txt"
  fi
done
echo "texts: $OUT/*-text.txt; summary: $OUT/summary.txt"
