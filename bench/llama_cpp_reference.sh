#!/usr/bin/env bash
# kiln against llama.cpp on the same model file, shapes and threads, measured side by side in one
# run (this host's speed drifts 2-3x within an hour, so only ratios taken minutes apart mean much).
#
# llama.cpp is the reference the kernel targets are stated against. Shapes (BENCH_SHAPES, all by
# default):
#   1, 8, 32    decode at that batch size: 128-token prompts, 64 generated tokens per sequence
#   8x2k        decode at batch 8 with 2048-token prompts (attention over 2k-token contexts)
#   prefill512, prefill4096   prefill of one prompt of that many tokens
#   load        load the model and generate one token (kiln run / llama-simple): wall time
# Every run is timed by /usr/bin/time, so the table also gives each side's peak resident memory.
# The tools are built by bench/llama_cpp_build.sh (~8 minutes on 2 cores the first time).
#
# Each pair of measurements runs back to back, and the order flips between rounds so that a
# drifting host does not favour either side. Prints one table with each round's figures and
# ratio, the geometric mean of the ratios and, where issue 5 set one, the target ratio.
#
# Usage: bench/llama_cpp_reference.sh [OUTDIR] [ROUNDS] [MODEL]
#   OUTDIR  default build/release/llama-cpp-ref
#   ROUNDS  default 4
#   MODEL   a GGUF file, or SHAPE:QUANT (llama3.2-1b:Q4_K_M, llama3.1-8b:Q8_0, qwen3-4b:Q4_K_M,
#           ...; bench/make_shaped_model.py's shapes): written to build/shaped-models by that
#           script the first time (random weights, real shapes). Default: the default model.
# LLAMA_BENCH_REPS: repetitions llama-bench averages per prefill figure (default 5, its own;
# 1 keeps a 4096-token prefill of an 8B model to minutes: kiln runs one prefill per round).
# Needs a release build (scripts/build.sh release) and, for the default, scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/release/llama-cpp-ref}
ROUNDS=${2:-4}
MODEL=${3:-}
SHAPES=${BENCH_SHAPES:-1 8 32 8x2k prefill512 prefill4096 load}
THREADS=2
K=build/release/kiln
mkdir -p "$OUT"
source bench/llama_cpp_build.sh
bin=$(llama_cpp_bin_dir "$OUT" llama-batched-bench llama-bench llama-simple llama-quantize)
if [[ -z $MODEL ]]; then
  model=$(.venv/bin/python3 scripts/default_model.py)
elif [[ -f $MODEL ]]; then
  model=$MODEL
else
  shape=${MODEL%%:*}
  quant=${MODEL#*:}
  [[ $quant != "$MODEL" ]] || quant=Q4_K_M
  model=build/shaped-models/$shape-${quant,,}.gguf
  if [[ ! -f $model ]]; then
    .venv/bin/python3 bench/make_shaped_model.py --shape "$shape" --out build/shaped-models \
      --quant "$quant" --llama-quantize "$bin/llama-quantize"
  fi
fi
echo "model: $model" | tee "$OUT/model"

log() { echo "$* $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log"; }
timed() {  # $1 file for "peak_kib wall_s", then the command
  local out=$1
  shift
  /usr/bin/time -f "%M %e" -o "$out" "$@"
}
llama_decode() {  # $1 batch size, $2 prompt tokens, $3 output file
  timed "$3.time" "$bin/llama-batched-bench" -m "$model" -c $(($1 * ($2 + 64))) -b 2048 -ub 512 \
    -npp "$2" -ntg 64 -npl "$1" -t $THREADS -tb $THREADS --output-format jsonl >"$3" 2>"$3.log"
}
kiln_decode() {
  timed "$3.time" $K bench -m "$model" --threads $THREADS --batch-sizes "$1" --input-len "$2" \
    --output-len 64 --modes graph --json "$3" >"$3.log" 2>&1
}
llama_prefill() {  # $1 prompt tokens, $2 output file
  timed "$2.time" "$bin/llama-bench" -m "$model" -p "$1" -n 0 -r "${LLAMA_BENCH_REPS:-5}" \
    -t $THREADS -o json >"$2" 2>"$2.log"
}
kiln_prefill() {
  # No bandwidth probe: its 1 GiB buffer would be this run's peak resident memory on a 1B model.
  timed "$2.time" $K bench -m "$model" --threads $THREADS --batch-sizes 1 --input-len "$1" \
    --output-len 4 --modes graph --no-bandwidth-probe --json "$2" >"$2.log" 2>&1
}
llama_load() {  # $1 output file
  timed "$1.time" "$bin/llama-simple" -m "$model" -n 1 "Hello" >"$1" 2>"$1.log"
}
kiln_load() {
  timed "$1.time" $K run -m "$model" -t $THREADS -p "Hello" -n 1 >"$1" 2>"$1.log"
}

log "start"
for r in $(seq 1 "$ROUNDS"); do
  for shape in $SHAPES; do
    case $shape in
      1 | 8 | 32)
        pair=("llama_decode $shape 128 $OUT/r${r}_llama_bs$shape.jsonl"
          "kiln_decode $shape 128 $OUT/r${r}_kiln_bs$shape.json") ;;
      8x2k)
        pair=("llama_decode 8 2048 $OUT/r${r}_llama_bs8x2k.jsonl"
          "kiln_decode 8 2048 $OUT/r${r}_kiln_bs8x2k.json") ;;
      prefill512 | prefill4096)
        n=${shape#prefill}
        pair=("llama_prefill $n $OUT/r${r}_llama_$shape.json"
          "kiln_prefill $n $OUT/r${r}_kiln_$shape.json") ;;
      load)
        pair=("llama_load $OUT/r${r}_llama_load.txt" "kiln_load $OUT/r${r}_kiln_load.txt") ;;
      *)
        echo "unknown shape '$shape' in BENCH_SHAPES" >&2
        exit 2 ;;
    esac
    if ((r % 2)); then first=0; else first=1; fi
    ${pair[$first]}
    ${pair[$((1 - first))]}
    log "round $r $shape"
  done
done
# shellcheck disable=SC2086
.venv/bin/python3 bench/llama_cpp_reference_table.py "$OUT" "$ROUNDS" $SHAPES | tee "$OUT/table.txt"
