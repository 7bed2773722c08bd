# Session 24, one H200 (ran with fast_launch.patch applied to the working tree): `fast_launch` (linattn/ops/launch.py) — its GPU test, the host's cost per launch by path,
# `bench profile` wall times of GDN, CCQ-GDN and VLA at K = 32 (4K – 16K, where calls are host-bound) on the
# working tree beside `main` without it (.variants/main: `git archive HEAD linattn`), then the whole verify matrix.
# Carry [".variants"].
set -u
R=$OUT/r; mkdir -p $R
export PYTHONUNBUFFERED=1
timeout 90 python3 -m pytest -q tests/ops/triton/test_launch.py > $R/test-launch.txt 2>&1; tail -n 3 $R/test-launch.txt
PYTHONPATH=. timeout 60 python3 -u benchmarks/h200-2026-12-01/session24/fast_launch/launch_cost.py $R/launch-cost.json \
  > $R/launch-cost.txt 2>&1; cat $R/launch-cost.txt
for round in 1 2; do
  for dir in .variants/main .; do
    name=$( [ "$dir" = . ] && echo fast || echo main )
    (cd "$dir" && timeout 100 python3 -m linattn.bench profile --contenders "GDN (delta_rule),CCQ-GDN,VLA triton" \
      --K 32 --lengths 4096,8192,16384 > "$R/profile-$name-$round.txt" 2>&1)
    echo "== $name $round"; grep -E "^## |^Per call" "$R/profile-$name-$round.txt" | paste - - | sed 's/Per call: //; s/, the self.*//'
  done
done
timeout 280 python3 -m linattn.bench verify --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
tail -n 2 $R/verify.txt
tar czf $OUT/fast-launch.tgz -C $R .
