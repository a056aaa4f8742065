#!/usr/bin/env bash
# Embedding throughput, texts per second on 2 threads, for one sentence-embedding folder
# (default: all-MiniLM-L6-v2 as `kiln pull all-minilm-l6-v2` installs it):
#   - kiln:      `kiln embed -t 2` (the whole process: load, tokenize, encode, write .npy), in
#                its default bf16 precision, and as `kiln-f32` with --precision f32;
#   - sentence-transformers: SentenceTransformer(folder, device="cpu").encode(texts,
#                batch_size=32) with torch.set_num_threads(2), encode only (the model loaded
#                and one warm-up batch run before the clock starts), in the oracle venv;
#   - llama.cpp: `llama-embedding -t 2` (the whole process) on an f32 GGUF that llama.cpp's own
#                convert_hf_to_gguf.py made from the same folder, mean pooling, L2 normalized.
# Texts: N sentences of 10-60 words cut from GSM8K questions (seeded, one per line). Rounds are
# interleaved (kiln, sentence-transformers, llama.cpp, kiln, ...) so load on the shared host
# hits all three alike; the script prints each round, then per tool the median texts/s and the
# spread (min-max), and the ratios of the medians.
#
# Usage: bench/embeddings_vs_peers.sh [MODEL_DIR] [N] [ROUNDS]    (defaults: the pulled
#        all-MiniLM-L6-v2, 1000, 5). Needs a release build, the oracle venv with
#        sentence-transformers (KILN_ORACLE_PY, default .venv-oracle/bin/python3) and builds
#        llama-embedding once (bench/llama_cpp_build.sh). KILN_EMBED_SKIP_LLAMA=1 leaves
#        llama.cpp out (a smoke test without its build).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-$(build/release/kiln pull all-minilm-l6-v2)}
N=${2:-1000}
ROUNDS=${3:-5}
PY=${KILN_ORACLE_PY:-.venv-oracle/bin/python3}
OUT=${KILN_BENCH_OUT:-build/release/embeddings-bench}
mkdir -p "$OUT"
echo "model: $MODEL, $N texts, $ROUNDS rounds, 2 threads; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

texts=$OUT/texts_$N.txt
.venv/bin/python3 - "$N" "$texts" <<'PY'
import json, random, sys
n, out = int(sys.argv[1]), sys.argv[2]
words = " ".join(json.loads(l)["question"] for l in open("data/gsm8k/train.jsonl")).split()
rng = random.Random(46)
lines = []
for _ in range(n):
    k = rng.randint(10, 60)
    start = rng.randrange(0, len(words) - k)
    lines.append(" ".join(words[start:start + k]))
# No newline after the last text: llama-embedding would read one more, empty, text.
open(out, "w").write("\n".join(lines))
PY

llama=""
if [[ ${KILN_EMBED_SKIP_LLAMA:-0} != 1 ]]; then
  source bench/llama_cpp_build.sh
  llama=$(llama_cpp_bin_dir "$OUT" llama-embedding)/llama-embedding
  gguf=$OUT/$(basename "$MODEL").f32.gguf
  if [[ ! -f $gguf ]]; then
    src=$(scripts/fetch_llama_cpp_src.sh)
    "$PY" "$src/convert_hf_to_gguf.py" --outtype f32 --outfile "$gguf" "$MODEL" \
      >"$OUT/convert.log" 2>&1
  fi
fi

st_script=$OUT/st_encode.py
cat >"$st_script" <<'PY'
import sys, time
import torch
torch.set_num_threads(2)
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
texts = open(sys.argv[2]).read().split("\n")
model.encode(texts[:32], batch_size=32)
t0 = time.perf_counter()
model.encode(texts, batch_size=32)
print(f"{time.perf_counter() - t0:.6f}")
PY

seconds() {  # the wall time of a command, in seconds
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>>"$OUT/errors.log"
  t1=$(date +%s%N)
  echo "scale=6; ($t1 - $t0) / 1000000000" | bc
}

results=$OUT/rounds.txt
: >"$results"
for ((r = 1; r <= ROUNDS; r++)); do
  k=$(seconds build/release/kiln embed -m "$MODEL" -f "$texts" -o "$OUT/kiln.npy" -t 2)
  s=$("$PY" "$st_script" "$MODEL" "$texts" 2>>"$OUT/errors.log")
  k32=$(seconds build/release/kiln embed -m "$MODEL" -f "$texts" -o "$OUT/kiln-f32.npy" -t 2 \
    --precision f32)
  line="round $r kiln $k st $s kiln-f32 $k32"
  if [[ -n $llama ]]; then
    l=$(seconds "$llama" -m "$gguf" -f "$texts" -t 2 --pooling mean --embd-normalize 2 \
      -c 8192 -b 8192 -ub 8192 --embd-output-format json)
    line="$line llama $l"
  fi
  echo "$line" | tee -a "$results"
done

.venv/bin/python3 - "$results" "$N" <<'PY'
import statistics, sys
n = int(sys.argv[2])
rates = {}
for line in open(sys.argv[1]):
    f = line.split()
    for tool, secs in zip(f[2::2], f[3::2]):
        rates.setdefault(tool, []).append(n / float(secs))
med = {t: statistics.median(v) for t, v in rates.items()}
for t, v in rates.items():
    print(f"{t:6s} median {med[t]:9.1f} texts/s   spread {min(v):9.1f} - {max(v):9.1f}")
for mine in ("kiln", "kiln-f32"):
    for t in med:
        if not t.startswith("kiln"):
            print(f"{mine} / {t}: {med[mine] / med[t]:.2f}x")
PY
