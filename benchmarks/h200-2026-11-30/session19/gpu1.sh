# session 19, call 1. GPU 0: ops 8K-64K (issue 4 goal 3 in one run), then a verify. GPU 1: gate screens, a verify.
set -u
R=$OUT/r; mkdir -p $R
T0=$SECONDS
left() { echo $(( 575 - (SECONDS - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpus.txt
V=$PWD/.variants/s19
vfy() {  # C XPREC GPU
  ( cd $V/x && VLA_GATE_C=$1 VLA_GATE_X_PREC=$2 CUDA_VISIBLE_DEVICES=$3 PYTHONPATH=. timeout $(left) \
    python3 -m linattn.bench verify --ops vla --jobs 7 --json $R/verify-c$1-$2.json > $R/verify-c$1-$2.txt 2>&1 )
}
( export CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site
  timeout 470 python3 -m linattn.bench ops --only "triton GDN,two-key,fla DeltaNet" --lengths 8192,16384,32768,65536 \
    --no-batch-sweep --json $R/ops.json > $R/ops.txt 2>&1
  vfy 16 both 0 ) &
( export CUDA_VISIBLE_DEVICES=1; cd $V/x; export PYTHONPATH=.
  timeout 120 python3 ../gate_cx.py $R/gate_cx.json > $R/gate_cx.txt 2>&1
  for cfg in "16:" "16:both" "32:" "32:both"; do
    c=${cfg%%:*}; x=${cfg#*:}
    VLA_GATE_C=$c VLA_GATE_X_PREC=$x KS=32,64,128 TS=4096,16384,65536 timeout 100 python3 ../vla_ab.py "c$c-$x" $R/ab-c$c-$x.json >> $R/ab.txt 2>&1
  done
  vfy 32 "" 1 ) &
wait
tail -n 3 $R/verify-*.txt; cat $R/gate_cx.txt $R/ab.txt; tail -n 30 $R/ops.txt
tar czf $OUT/s19a.tgz -C $R .
