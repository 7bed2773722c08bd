# Session 28's last call: CCQ on GLA again after `ccq_query` kept k's dtype when it normalises it (under autocast the
# quotient came out float32 beside a bfloat16 q, and the Triton path refused the pair), both experiments at once.
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
rm -rf results/ccq-mqar/paper/runs/ccq-gla-x256-lr0.001 results/ccq-lm-length/paper/runs/ccq-gla-x512-lr0.001
timeout 265 python3 -m linattn.cli run ccq-lm-length --device cuda --mixers ccq-gla > "$OUT/log2.txt" 2>&1 &
timeout 265 python3 -m linattn.cli run ccq-mqar --device cuda --mixers ccq-gla > "$OUT/log1.txt" 2>&1
wait
for f in "$OUT"/log*.txt; do tr '\r' '\n' < "$f" | grep -v '^train' | tail -n 8; done
tar czf "$OUT/results.tgz" --exclude='checkpoint.pt' results/ccq-mqar results/ccq-lm-length
