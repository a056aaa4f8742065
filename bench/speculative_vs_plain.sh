#!/usr/bin/env bash
# Speculative decoding against plain decoding at batch 1: `kiln run --chat` on each prompt of
# bench/prompts/speculative, greedy, with --speculative-algorithm none and then ALGO (the order
# alternates every round, so a drift of the host's speed does not favour one side). Prints, per
# prompt, each side's median tok/s with its range, the ratio of the medians with the range of the
# per-round ratios, the acceptance and whether the texts are identical (they must be).
# Usage: bench/speculative_vs_plain.sh [OUTDIR]   (default build/release/speculative-vs-plain)
# Environment: ROUNDS (3), MODEL (qwen2.5-coder-1.5b), THREADS (2), TOKENS (160), DRAFT (8:
# --speculative-num-draft-tokens), GRAPH_MODE (optimize; off: both sides eager), PROMPTS (the
# prompt names to run, default all), ALGO (ngram, or standalone with DRAFT_MODEL, default
# qwen2.5-coder-0.5b).
set -euo pipefail
cd "$(dirname "$0")/.."
K=build/release/kiln
O=${1:-build/release/speculative-vs-plain}
rounds=${ROUNDS:-3} model=${MODEL:-qwen2.5-coder-1.5b} threads=${THREADS:-2}
tokens=${TOKENS:-160} draft=${DRAFT:-8} graph_mode=${GRAPH_MODE:-optimize} algo_b=${ALGO:-ngram}
draft_args=()
[[ $algo_b == standalone ]] && draft_args=(--speculative-draft-model-path "${DRAFT_MODEL:-qwen2.5-coder-0.5b}")
prompts=${PROMPTS:-$(basename -s .txt bench/prompts/speculative/*.txt | tr '\n' ' ')}
mkdir -p "$O"
isa=$(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx2|avx512f|avx512_vnni|amx_tile' | tr '\n' ' ')
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | xargs); $isa), $(nproc) cores;" \
  "model $model, $threads threads, $tokens tokens, $algo_b ${DRAFT_MODEL:-} up to $draft," \
  "graph mode $graph_mode"
for round in $(seq 1 "$rounds"); do
  order="none $algo_b"
  ((round % 2 == 0)) && order="$algo_b none"
  for p in $prompts; do
    for algo in $order; do
      extra=()
      [[ $algo == standalone ]] && extra=("${draft_args[@]}")
      $K run -m "$model" --chat -p "$(cat "bench/prompts/speculative/$p.txt")" -n "$tokens" \
        -t "$threads" --graph-mode "$graph_mode" --speculative-algorithm "$algo" \
        --speculative-num-draft-tokens "$draft" "${extra[@]}" >"$O/${p}_${algo}_$round.txt" \
        2>"$O/${p}_${algo}_$round.log"
    done
  done
  echo "round $round done $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
.venv/bin/python3 - "$O" "$rounds" "$algo_b" $prompts <<'EOF'
import re, statistics, sys
out, rounds, algo, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def rate(path):
    text = open(path).read()
    m = re.search(r"generated: (\d+) tokens, ([\d.]+) tok/s", text)
    s = re.search(r"speculative: (\d+) decode steps, ([\d.]+) tokens per step \| proposed (\d+), accepted (\d+)", text)
    return float(m.group(2)), int(m.group(1)), s
print(f"{'prompt':22} {'plain tok/s':>18} {algo + ' tok/s':>18} {'ratio (range)':>20} {'tok/step':>9} {'accepted':>14} text")
for p in prompts:
    plain, spec, ratios, same = [], [], [], True
    ref = open(f"{out}/{p}_none_1.txt").read()
    for r in range(1, rounds + 1):
        a, n_tokens, _ = rate(f"{out}/{p}_none_{r}.log")
        b, _, s = rate(f"{out}/{p}_{algo}_{r}.log")
        plain.append(a); spec.append(b); ratios.append(b / a)
        same &= open(f"{out}/{p}_{algo}_{r}.txt").read() == ref == open(f"{out}/{p}_none_{r}.txt").read()
    steps, per_step, proposed, accepted = int(s.group(1)), float(s.group(2)), int(s.group(3)), int(s.group(4))
    fmt = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
    ratio = statistics.median(spec) / statistics.median(plain)
    print(f"{p:22} {fmt(plain):>18} {fmt(spec):>18} {ratio:>7.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
          f"{per_step:>9.2f} {accepted:>5}/{proposed:<5} {'identical' if same else 'DIFFERENT'} ({n_tokens} tokens)")
EOF
