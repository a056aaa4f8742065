#!/usr/bin/env bash
# The half of tests/e2e/test_shaped_models.py that needs llama.cpp (CI does not build it):
# bench/make_shaped_model.py writes a small shape, llama-quantize turns it into Q4_K_M and
# Q8_0, and each of the three files must load and generate in both llama.cpp (llama-bench, a
# short prompt and a few tokens) and kiln (`kiln run`; `kiln logits`, every logit finite).
#
# Usage: bench/shaped_models_check.sh [SHAPE] [OUTDIR]   (default tiny-llama3, build/shaped-check)
# Needs a release build; builds llama.cpp's tools with bench/llama_cpp_build.sh if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPE=${1:-tiny-llama3}
OUT=${2:-build/shaped-check}
K=build/release/kiln
PY=.venv/bin/python3
mkdir -p "$OUT"
source bench/llama_cpp_build.sh
bin=$(llama_cpp_bin_dir "$OUT" llama-quantize llama-bench)

$PY bench/make_shaped_model.py --shape "$SHAPE" --out "$OUT" --quant Q4_K_M,Q8_0 --keep-f16 \
  --llama-quantize "$bin/llama-quantize" \
  --tokenizer-from build/release/testdata/models/tiny-llama.gguf
seq 1 32 | tr '\n' ' ' >"$OUT/ids.txt"
for q in f16 q4_k_m q8_0; do
  model=$OUT/$SHAPE-$q.gguf
  "$bin/llama-bench" -m "$model" -p 32 -n 8 -r 1 -t 2 -o json >"$OUT/llama-$q.json" \
    2>"$OUT/llama-$q.log" || { echo "llama.cpp failed on $model (see $OUT/llama-$q.log)"; exit 1; }
  $K run -m "$model" -p "Hello world" -n 8 --ignore-eos -t 2 --graph-mode off >"$OUT/kiln-$q.log" 2>&1 ||
    { echo "kiln run failed on $model (see $OUT/kiln-$q.log)"; exit 1; }
  $K logits -m "$model" --ids "$OUT/ids.txt" -o "$OUT/logits-$q.bin" -t 2 >/dev/null
  $PY - "$OUT/logits-$q.bin" "$OUT/llama-$q.json" "$model" <<'EOF'
import json, sys
import numpy as np
logits = np.fromfile(sys.argv[1], dtype=np.float32)
assert logits.size and np.isfinite(logits).all(), f"{sys.argv[3]}: kiln's logits are not all finite"
runs = json.load(open(sys.argv[2]))
tg = [r["avg_ts"] for r in runs if r["n_gen"] > 0]
assert tg and all(t > 0 for t in tg), f"{sys.argv[3]}: llama.cpp generated nothing"
print(f"{sys.argv[3]}: loads in llama.cpp ({tg[0]:.1f} tok/s) and kiln (logits finite, "
      f"std {logits.std():.2f})")
EOF
done
