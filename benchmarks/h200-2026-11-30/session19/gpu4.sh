# session 19, call 4 (the change with its one-pass rule). GPU 0: verify (whole matrix), then vla-speed.
# GPU 1: vla A/B (main, the change) and stages, then ops 8K-64K with fla.
set -u
R=$OUT/r; mkdir -p $R
V=$PWD/.variants/s19
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
( export CUDA_VISIBLE_DEVICES=0
  timeout 240 python3 -m linattn.bench verify --jobs 14 --json $R/verify.json > $R/verify.txt 2>&1
  timeout 310 python3 -m linattn.cli run vla-speed --device cuda --force > $R/vla-speed.txt 2>&1
  tar czf $R/vla-speed-results.tgz results/vla-speed/default-cuda ) &
( export CUDA_VISIBLE_DEVICES=1
  for t in main new; do
    ( cd $V/$t && PYTHONPATH=. KS=128 TS=16384,65536 timeout 50 python3 ../vla_ab.py $t $R/ab-$t.json >> $R/ab.txt 2>&1 )
  done
  timeout 60 python3 -m linattn.bench stages --lengths 16384,65536 --json $R/stages.json > $R/stages.txt 2>&1
  PYTHONPATH=/tmp/site timeout 400 python3 -m linattn.bench ops --only "triton GDN,two-key,fla DeltaNet" \
    --lengths 8192,16384,32768,65536 --no-batch-sweep --json $R/ops.json > $R/ops.txt 2>&1 ) &
wait
cat $R/ab.txt; grep -E "state_bwd|delta_rule" $R/stages.txt; tail -n 2 $R/verify.txt; tail -n 22 $R/ops.txt; tail -n 5 $R/vla-speed.txt
tar czf $OUT/s19d.tgz -C $R .
