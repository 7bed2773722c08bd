# session 23, last call (one H200), on the merged code (the kept L⁻¹ and the in-kernel ∂L/∂α of session 22; CCQ's
# chunk terms back in their own launch): the verify matrix's CCQ and VLA cases, then vla-speed.
set -u
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpus.txt
timeout 150 python3 -m linattn.bench verify --ops ccq,vla --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
timeout 380 python3 -m linattn.cli run vla-speed --device cuda --force > $R/vla-speed.txt 2>&1
tar czf $R/vla-speed-results.tgz results/vla-speed/default-cuda
tail -n 2 $R/verify.txt; tail -n 40 $R/vla-speed.txt
tar czf $OUT/final.tgz -C $R .
