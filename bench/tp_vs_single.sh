#!/usr/bin/env bash
# Tensor parallelism on one machine: decode throughput of TP=2 x 1 thread (two MPI ranks)
# against TP=1 x 2 threads (one process), at batch 1 and batch 32, in alternating rounds, plus
# each rank's peak resident memory and the collectives' time per step and share of the step.
# See docs/tensor-parallel.md. Measures only; run it on a quiet machine.
#
#   bench/tp_vs_single.sh [out_dir]      (default build/release/tp-vs-single)
#
# Variables: KILN_BIN (build/release/kiln), KILN_TP_MODEL (the default model), KILN_TP_ROUNDS
# (3), KILN_TP_PROMPTS_BS1 (8), KILN_TP_PROMPTS_BS32 (96), KILN_TP_INPUT (128),
# KILN_TP_OUTPUT (128), KILN_TP_BATCHES ("1 32"), KILN_TP_OFFLINE (0; 1: also the offline
# benchmark, below), KILN_TP_SERVING (1; 0: skip the serving measurement).
#
# Offline (KILN_TP_OFFLINE=1): `mpirun -np 2 kiln bench --tp 2 -t 1` against `kiln bench -t 2`
# on the same batch sizes, rounds alternating which goes first; eager and graph decode tok/s
# per batch into summary_offline.tsv (no server, no HTTP, no scheduler: the model steps alone).
#
# Each measurement starts a fresh server (so its shutdown log line covers exactly that run's
# steps), sends `kiln bench serving` at max concurrency 1 or 32, then stops it with SIGTERM.
# Decode tok/s per sequence is 1000 / mean TPOT; the aggregate is that times the batch.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN_BIN:-$PWD/build/release/kiln}
OUT=${1:-build/release/tp-vs-single}
ROUNDS=${KILN_TP_ROUNDS:-3}
INPUT=${KILN_TP_INPUT:-128}
OUTPUT=${KILN_TP_OUTPUT:-128}
BATCHES=${KILN_TP_BATCHES:-1 32}
MODEL_ARGS=()
[[ -n "${KILN_TP_MODEL:-}" ]] && MODEL_ARGS=(-m "$KILN_TP_MODEL")
mkdir -p "$OUT"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$OUT/cache}

MPI=(mpirun -np 2 --oversubscribe)
[[ $(id -u) == 0 ]] && MPI+=(--allow-run-as-root)
# Shared memory between the ranks (the same machine); MPI's default transport choice.
SERVE_ARGS=(serve "${MODEL_ARGS[@]}" --host 127.0.0.1 --port 0 --log-level info
            --max-graph-bs 32 --max-running-requests 32)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# start_server <mode> <log>: sets SERVER_PID and URL.
start_server() {
  local mode=$1 log=$2
  if [[ $mode == tp2 ]]; then
    setsid "${MPI[@]}" "$KILN" "${SERVE_ARGS[@]}" -t 1 --tp 2 >"$log" 2>&1 &
  else
    setsid "$KILN" "${SERVE_ARGS[@]}" -t 2 >"$log" 2>&1 &
  fi
  SERVER_PID=$!
  URL=""
  for _ in $(seq 1 600); do
    URL=$(grep -o 'at http://127.0.0.1:[0-9]*' "$log" | head -1 | cut -d' ' -f2 || true)
    [[ -n "$URL" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited:"; cat "$log"; exit 1; }
    sleep 0.5
  done
  [[ -n "$URL" ]] || { echo "server not ready:"; cat "$log"; exit 1; }
}

# Peak resident memory (VmHWM) of every kiln process of the server: "pid:MiB ..." (rank 0 first).
peak_rss() {
  local pids
  # The server's session (setsid): the kiln ranks, not mpirun itself.
  pids=$(pgrep -s "$SERVER_PID" -x kiln || true)
  for p in $pids; do
    echo -n "$p:$(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$p/status")MiB "
  done
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

if [[ ${KILN_TP_OFFLINE:-0} == 1 ]]; then
  OFFLINE=$OUT/summary_offline.tsv
  echo -e "round\tmode\tbatch\teager_tok_s\tgraph_tok_s\tsame_tokens" >"$OFFLINE"
  BENCH_ARGS=(bench "${MODEL_ARGS[@]}" --batch-sizes "$(echo "$BATCHES" | tr ' ' ',')"
              --input-len "$INPUT" --output-len "$OUTPUT" --host-only-steps 0)
  for round in $(seq 1 "$ROUNDS"); do
    if ((round % 2)); then order="tp2 tp1"; else order="tp1 tp2"; fi
    for mode in $order; do
      tag="offline-r${round}-${mode}"
      if [[ $mode == tp2 ]]; then
        "${MPI[@]}" "$KILN" "${BENCH_ARGS[@]}" -t 1 --tp 2 --json "$OUT/$tag.json" \
          >"$OUT/$tag.txt" 2>&1
      else
        "$KILN" "${BENCH_ARGS[@]}" -t 2 --json "$OUT/$tag.json" >"$OUT/$tag.txt" 2>&1
      fi
      python3 - "$OUT/$tag.json" "$round" "$mode" <<'PY' | tee -a "$OFFLINE"
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["results"]:
    rate = lambda m: f"{r[m]['decode_tok_s']:.1f}" if r[m] else "-"
    print(f"{sys.argv[2]}\t{sys.argv[3]}\t{r['batch_size']}\t{rate('eager')}\t{rate('graph')}\t"
          f"{r['tokens_match']}")
PY
    done
  done
fi
[[ ${KILN_TP_SERVING:-1} == 1 ]] || { echo "summary: ${OFFLINE:-none}"; exit 0; }

SUMMARY=$OUT/summary.tsv
echo -e "round\tmode\tbatch\tdecode_tok_s_per_seq\tdecode_tok_s_total\toutput_throughput\tpeak_rss\tcollectives" >"$SUMMARY"
for round in $(seq 1 "$ROUNDS"); do
  # Alternate which mode goes first, so drift of the machine does not favour one.
  if ((round % 2)); then order="tp2 tp1"; else order="tp1 tp2"; fi
  for batch in $BATCHES; do
    prompts=${KILN_TP_PROMPTS_BS1:-8}
    ((batch > 1)) && prompts=${KILN_TP_PROMPTS_BS32:-96}
    for mode in $order; do
      tag="r${round}-${mode}-bs${batch}"
      start_server "$mode" "$OUT/$tag.log"
      "$KILN" bench serving --url "$URL" --max-concurrency "$batch" --num-prompts "$prompts" \
        --input-len "$INPUT" --output-len "$OUTPUT" --seed "$round" --json "$OUT/$tag.json" \
        >"$OUT/$tag.bench.txt" 2>&1
      rss=$(peak_rss)
      stop_server
      read -r tpot thr < <(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['tpot_ms']['mean'], j['output_throughput'])" "$OUT/$tag.json")
      per_seq=$(python3 -c "print(f'{1000/$tpot:.1f}')")
      total=$(python3 -c "print(f'{$batch*1000/$tpot:.1f}')")
      coll=$(grep -o 'tensor parallel rank 0: .*' "$OUT/$tag.log" | sed 's/tensor parallel rank 0: //' || true)
      echo -e "$round\t$mode\t$batch\t$per_seq\t$total\t$thr\t$rss\t${coll:--}" | tee -a "$SUMMARY"
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "summary: $SUMMARY (per-run logs, bench JSON and server logs beside it)"
