# session 21, last call (one H200; no two-GPU host was lent), on the merged code: the verify matrix's VLA cases (the
# change is VLA's alone), then vla-speed, then VLA's forward profile at 4K (kernels and host).
set -u
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpus.txt
timeout 150 python3 -m linattn.bench verify --ops vla --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
timeout 330 python3 -m linattn.cli run vla-speed --device cuda --force > $R/vla-speed.txt 2>&1
tar czf $R/vla-speed-results.tgz results/vla-speed/default-cuda
timeout 60 python3 -m linattn.bench profile --contenders "VLA triton" --K 128 --lengths 4096 --passes fwd --host \
  > $R/profile-vla-4k.txt 2>&1
tail -n 3 $R/verify.txt; tail -n 30 $R/vla-speed.txt; grep -E "^Per call|gate_apply|spd_inverse|unit_rows|^## " $R/profile-vla-4k.txt
tar czf $OUT/final.tgz -C $R .
