#!/usr/bin/env bash
# session 20, call 1: CCQ K=32 screens on GPU 0, the output stage's one-pass screens on GPU 1
set -u
export PYTHONUNBUFFERED=1
root=$PWD
res=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$res/gpu.txt"
ccq() {
  export CUDA_VISIBLE_DEVICES=0
  for v in current screen_ccq-keep-states screen_ccq-rows-k32-warps screen_ccq-both; do
    d=$root; [ $v = current ] || d=$root/.variants/$v
    (cd "$d" && timeout 200 python3 -m linattn.bench profile --contenders CCQ-GDN --K 32 --lengths 16384,65536 --passes fwdbwd --json "$res/ccq-$v.json" > "$res/ccq-$v.txt" 2>&1)
  done
  # second round, reverse order, for the spread
  for v in screen_ccq-both screen_ccq-keep-states current; do
    d=$root; [ $v = current ] || d=$root/.variants/$v
    (cd "$d" && timeout 200 python3 -m linattn.bench profile --contenders CCQ-GDN --K 32 --lengths 65536 --passes fwdbwd > "$res/ccq2-$v.txt" 2>&1)
  done
  (cd "$root/.variants/screen_ccq-both" && timeout 200 python3 -m linattn.bench verify --ops ccq --jobs 8 > "$res/verify-ccq-both.txt" 2>&1)
}
outs() {
  export CUDA_VISIBLE_DEVICES=1
  for v in current screen_output-one-pass screen_output-one-pass-64 current; do
    d=$root; [ $v = current ] || d=$root/.variants/$v
    (cd "$d" && timeout 150 python3 -m linattn.bench stages --lengths 8192,65536 >> "$res/stages-$v.txt" 2>&1)
  done
  for v in screen_output-one-pass screen_output-one-pass-64; do
    d=$root/.variants/$v
    (cd "$d" && timeout 150 python3 -m linattn.bench verify --quick --jobs 8 > "$res/verify-quick-$v.txt" 2>&1)
    (cd "$d" && timeout 150 python3 -m linattn.bench verify --ops vla --jobs 8 > "$res/verify-vla-$v.txt" 2>&1)
  done
}
ccq & outs & wait
for f in "$res"/ccq*.txt; do echo "== $f"; grep -E "ccq_|total|busy|CCQ|ms" "$f" | head -40; done
for f in "$res"/stages*.txt; do echo "== $f"; grep -E "output_fwd|delta_rule|total" "$f"; done
for f in "$res"/verify*.txt; do echo "== $f"; tail -n 4 "$f"; done
tar czf "$OUT/call1.tgz" -C "$res" .
