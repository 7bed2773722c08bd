#!/usr/bin/env bash
set -u
export PYTHONUNBUFFERED=1
res=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$res/gpu.txt"
python3 .variants/s20/screen2.py "$res/screen2.json" 2>&1 | tee "$res/screen2.txt" | grep -v "^{"
tar czf "$OUT/call2.tgz" -C "$res" .
