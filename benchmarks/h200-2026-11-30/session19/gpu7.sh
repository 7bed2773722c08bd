# session 19, last call: VLA fwd+bwd, main vs the tf32x3 walk reading dU's local part ahead (WALK_DU_AHEAD=1)
R=$OUT; V=$PWD/.variants/s19
for t in main du main du; do
  ( cd $V/$t && WALK_DU_AHEAD=1 PYTHONPATH=. KS=128 TS=16384,65536 timeout 70 python3 ../vla_ab.py $t $R/ab-$t-$RANDOM.json >> $R/ab.txt 2>&1 )
done
cat $R/ab.txt
