# session 20, last call (two H200s): GPU 0 the whole verify matrix, then vla-speed; GPU 1 ops (8K - 64K, with fla's
# GDN forward for goal 1, DeltaNet and DPLR), then the stage profile. All on the merged code.
set -u
R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpus.txt
( export CUDA_VISIBLE_DEVICES=0
  timeout 250 python3 -m linattn.bench verify --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
  timeout 320 python3 -m linattn.cli run vla-speed --device cuda --force > $R/vla-speed.txt 2>&1
  tar czf $R/vla-speed-results.tgz results/vla-speed/default-cuda ) &
( export CUDA_VISIBLE_DEVICES=1
  PYTHONPATH=/tmp/site timeout 430 python3 -m linattn.bench ops --only "triton GDN,two-key,fla DeltaNet,fla GDN" \
    --lengths 8192,16384,32768,65536 --no-batch-sweep --json $R/ops.json > $R/ops.txt 2>&1
  timeout 120 python3 -m linattn.bench stages --lengths 8192,65536 --json $R/stages.json > $R/stages.txt 2>&1 ) &
wait
tail -n 3 $R/verify.txt; tail -n 40 $R/vla-speed.txt; tail -n 45 $R/ops.txt; grep -E "\| (8192|65536) \|" $R/stages.txt
tar czf $OUT/final.tgz -C $R .
