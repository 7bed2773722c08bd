# session 19, call 3: the state backward's walk with its plain loads one step ahead. GPU 0: verify (whole matrix)
# on the change; GPU 1: stages and vla A/B, main then the change.
set -u
R=$OUT/r; mkdir -p $R
V=$PWD/.variants/s19
( cd $V/new && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=. timeout 560 python3 -m linattn.bench verify --jobs 14 \
    --json $R/verify-new.json > $R/verify-new.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1
  for t in main new; do
    ( cd $V/$t && PYTHONPATH=. timeout 100 python3 -m linattn.bench stages --lengths 16384,65536 \
        --json $R/stages-$t.json > $R/stages-$t.txt 2>&1 )
  done
  for t in main new; do
    ( cd $V/$t && PYTHONPATH=. KS=32,128 TS=16384,65536 timeout 100 python3 ../vla_ab.py $t $R/ab-$t.json >> $R/ab.txt 2>&1 )
  done ) &
wait
for t in main new; do echo "== $t"; grep -E "state_bwd|local_bwd|delta_rule" $R/stages-$t.txt; done
cat $R/ab.txt; tail -n 3 $R/verify-new.txt
tar czf $OUT/s19c.tgz -C $R .
