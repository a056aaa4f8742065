#!/usr/bin/env bash
# The matrix engine against the vector units and a peer, on one GGUF, 2 threads, in one run:
#   - kiln-amx:    `kiln bench` as it runs by default on a host with usable AMX (the AMX tiles
#                  for matmuls above 8 rows, matmul_amx.cc);
#   - kiln-avx512: the same binary with KILN_ISA=avx512 (the AVX-512 VNNI tiles everywhere);
#   - kiln-bf16:   the same binary with KILN_MATMUL_CONTRACT=bf16 (the opt-in bf16 contract on
#                  AMX-BF16 tiles at every row count; its own bits, so its tokens may differ);
#   - openvino:    OpenVINO GenAI's LLMPipeline on the same GGUF (bench/openvino_llm.py; its
#                  venv, build/openvino-venv, is made here on first use, never by setup).
# Figures per round: prompt tok/s of a prefill of 512 and of 4096 tokens (kiln: one sequence,
# chunks of 512; OpenVINO: 512 / time to first token), decode tok/s at batch 1 (kiln: graph
# mode, 32 steps after a 512-token prompt; OpenVINO: 1 / time per output token over 64), and
# kiln's decode tok/s at batch 32 (128-token prompts, 64 steps), and 32 prompts of 128 tokens +
# 64 new tokens each as one offline batch, output tok/s over the whole run (prefills included:
# kiln bench's prefill and decode seconds of that batch; OpenVINO's ContinuousBatchingPipeline,
# one generate call of the 32 prompts). Rounds alternate the order of
# the three so that the shared host's drift hits all alike; the summary gives each figure's
# median and spread (min-max) and the ratios of the medians. The two kiln tiers must decode the
# same tokens (the AMX tiles keep the contract's bits): a mismatch fails the script.
# Before the rounds, the machine's limits: contract_ceiling_bench's int8 peaks with operands in
# tiles and registers (AMX TDPBSUD, AVX-512 VPDPBUSD) and the bf16 tile peak.
#
# Usage: bench/matrix_engine_vs_peers.sh [MODEL.gguf] [ROUNDS]   (defaults: the pulled
#        qwen2.5-coder-1.5b, 3). KILN_PEERS_SKIP_OPENVINO=1 leaves OpenVINO out.
set -euo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
MODEL=${1:-$($K pull qwen2.5-coder-1.5b)}
ROUNDS=${2:-3}
OUT=${KILN_BENCH_OUT:-build/release/matrix-engine-bench}
VENV=${KILN_OPENVINO_VENV:-build/openvino-venv}
mkdir -p "$OUT"
skip_ov=${KILN_PEERS_SKIP_OPENVINO:-0}
if [ "$skip_ov" != 1 ] && [ ! -x "$VENV/bin/python3" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "openvino-genai==2026.4.1.0" numpy
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); amx flags:" \
  "$(grep -o -w 'amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "model: $MODEL, $ROUNDS rounds, 2 threads; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine limits (contract_ceiling_bench, operands in tiles / registers, 2 threads):"
build/release/bench/contract_ceiling_bench --benchmark_min_time=0.5 \
  --benchmark_filter='BM_(amx_dots_only|dots_only|bf16_tiles_only)/real_time/threads:2' 2>/dev/null |
  grep -E '^BM_' | sed 's/^/  /'

kiln_round() {  # $1: tag, then the environment to run kiln in
  local tag=$1 r=$2
  shift 2
  local common=(-m "$MODEL" -t 2 --modes graph --no-bandwidth-probe --log-level error)
  env "$@" $K bench "${common[@]}" --batch-sizes 1 --input-len 512 --output-len 32 \
    --json "$OUT/$tag-$r-512.json" >/dev/null
  env "$@" $K bench "${common[@]}" --batch-sizes 1 --input-len 4096 --output-len 1 \
    --json "$OUT/$tag-$r-4096.json" >/dev/null
  env "$@" $K bench "${common[@]}" --batch-sizes 32 --input-len 128 --output-len 64 \
    --json "$OUT/$tag-$r-bs32.json" >/dev/null
}
ov_round() {
  "$VENV/bin/python3" bench/openvino_llm.py "$MODEL" --prompt-lens 512,4096 \
    --decode-tokens 64 >"$OUT/openvino-$1.json"
  "$VENV/bin/python3" bench/openvino_llm.py "$MODEL" --batch 32 --batch-input 128 \
    --batch-output 64 >"$OUT/openvino-batch-$1.json"
}

for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in
    1) order="amx avx512 bf16 ov" ;;
    2) order="avx512 ov amx bf16" ;;
    *) order="bf16 ov amx avx512" ;;
  esac
  for who in $order; do
    case $who in
      amx) kiln_round kiln-amx "$r" KILN_ISA=amx ;;
      avx512) kiln_round kiln-avx512 "$r" KILN_ISA=avx512 ;;
      bf16) kiln_round kiln-bf16 "$r" KILN_ISA=amx KILN_MATMUL_CONTRACT=bf16 ;;
      ov) [ "$skip_ov" = 1 ] || ov_round "$r" ;;
    esac
  done
  echo "round $r done ($order); load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 - "$OUT" "$ROUNDS" "$skip_ov" <<'PY'
import json, statistics, sys
out, rounds, skip_ov = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def kiln(tag, r):
    j = {n: json.load(open(f"{out}/{tag}-{r}-{n}.json")) for n in ("512", "4096", "bs32")}
    isa = j["512"]["config"]["isa"]
    res = lambda n: j[n]["results"][0]
    return isa, {
        "prefill 512 tok/s": res("512")["prefill"]["tok_s"],
        "prefill 4096 tok/s": res("4096")["prefill"]["tok_s"],
        "decode bs1 tok/s": res("512")["graph"]["decode_tok_s"],
        "decode bs32 tok/s": res("bs32")["graph"]["decode_tok_s"],
        "32 x (128+64) out tok/s": 32 * 64 / (res("bs32")["prefill"]["seconds"] +
                                             res("bs32")["graph"]["decode_seconds"]),
    }, (res("512")["graph"]["tokens"], res("bs32")["graph"]["tokens"])
rows = {"kiln-amx": [], "kiln-avx512": [], "kiln-bf16": [], "openvino": []}
isas = {}
for r in range(1, rounds + 1):
    toks = {}
    for tag in ("kiln-amx", "kiln-avx512"):
        isas[tag], fig, toks[tag] = kiln(tag, r)
        rows[tag].append(fig)
    if toks["kiln-amx"] != toks["kiln-avx512"]:
        sys.exit(f"round {r}: the AMX and AVX-512 tiers decoded different tokens")
    isas["kiln-bf16"], fig, _ = kiln("kiln-bf16", r)
    rows["kiln-bf16"].append(fig)
    if not skip_ov:
        o = json.load(open(f"{out}/openvino-{r}.json"))
        rows["openvino"].append({"prefill 512 tok/s": o["prefill_512_tok_s"],
                                 "prefill 4096 tok/s": o["prefill_4096_tok_s"],
                                 "decode bs1 tok/s": o["decode_bs1_tok_s"]})
        ob = json.load(open(f"{out}/openvino-batch-{r}.json"))
        rows["openvino"][-1]["32 x (128+64) out tok/s"] = ob["batch_32_output_tok_s"]
print(f"tiers: kiln-amx = {isas['kiln-amx']}, kiln-avx512 = {isas['kiln-avx512']}, "
      f"kiln-bf16 = {isas['kiln-bf16']}; the first two decoded the same tokens in every round")
med = {}
for who, figs in rows.items():
    for fig in figs:
        for k, v in fig.items():
            med.setdefault((who, k), []).append(v)
keys = ["prefill 512 tok/s", "prefill 4096 tok/s", "decode bs1 tok/s", "decode bs32 tok/s",
        "32 x (128+64) out tok/s"]
print(f"{'figure':22s} {'kiln-amx':>22s} {'kiln-avx512':>22s} {'kiln-bf16':>22s} {'openvino':>22s}"
      "  amx/avx512  bf16/avx512  bf16/openvino")
for k in keys:
    cells, m = [], {}
    for who in rows:
        v = med.get((who, k))
        if not v:
            cells.append(f"{'-':>22s}")
            continue
        m[who] = statistics.median(v)
        cells.append(f"{m[who]:9.1f} ({min(v):.1f}-{max(v):.1f})".rjust(22))
    ratio = lambda a, b: f"{m[a] / m[b]:.2f}x" if a in m and b in m else "-"
    print(f"{k:22s} {' '.join(cells)}  {ratio('kiln-amx', 'kiln-avx512'):>10s}"
          f"  {ratio('kiln-bf16', 'kiln-avx512'):>11s}  {ratio('kiln-bf16', 'openvino'):>13s}")
PY
