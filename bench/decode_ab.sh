#!/usr/bin/env bash
# Decode throughput of two kiln binaries (say, before and after a change) in alternating rounds,
# the order swapped every round, on the default model: one line per run, "ROUND SIDE TOK/S" (graph
# mode's tokens per second at the batch size). Take the median of the per-round after/before
# ratios and its range; this host's bandwidth swings too much for a single pair.
#   bench/decode_ab.sh BEFORE_BIN AFTER_BIN ROUNDS BATCH OUTPUT_LEN
set -u
before=$1 after=$2 rounds=$3 bs=$4 out=$5
for r in $(seq 1 "$rounds"); do
  if ((r % 2 == 1)); then order="before after"; else order="after before"; fi
  for side in $order; do
    bin=$before
    [ "$side" = after ] && bin=$after
    tps=$("$bin" bench --batch-sizes "$bs" --input-len 32 --output-len "$out" --modes graph -t 2 \
      2>/dev/null | grep -E "^ +$bs \|" | head -1 | awk -F'|' '{print $3}' | awk '{print $2}')
    echo "$r $side $tps"
  done
done
