#!/usr/bin/env bash
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=.
res=$(mktemp -d)
for rw_lw in 4,4 1,4 2,4 4,2 4,1 4,4; do
  rw=${rw_lw%,*}; lw=${rw_lw#*,}
  python3 .variants/s20/ccq_warps.py $rw $lw "$res/ccq-r$rw-l$lw.json" > "$res/ccq-r$rw-l$lw.txt" 2>&1
  echo "== rows $rw local $lw"; grep -E "Per call|ccq_rows|ccq_local" "$res/ccq-r$rw-l$lw.txt"
done
tar czf "$OUT/call3.tgz" -C "$res" .
