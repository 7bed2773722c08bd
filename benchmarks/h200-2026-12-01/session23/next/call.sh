# Prepared in session 23 for the next device call (one H200, about 7 minutes): the gate's elimination on one copy of
# `G` a warp (`per_warp.patch`: offline 94 → 21 barriers a chunk step at d = 128, 97 → 24 at d = 64; interpreter
# tests pass with it) beside `main`: the verify matrix's VLA cases on the variant, then `bench profile` of VLA at
# K = 64 and 128 (K = 32 runs one warp, unchanged), 4K and 64K, forward and forward + backward, on both trees.
# Here first, from the repository root:
#   rm -rf .variants/per_warp && mkdir -p .variants/per_warp && git archive HEAD linattn | tar -x -C .variants/per_warp
#   git apply --directory=.variants/per_warp --include='.variants/per_warp/linattn/*' \
#     benchmarks/h200-2026-12-01/session23/next/per_warp.patch
# (to merge it instead: `git apply benchmarks/h200-2026-12-01/session23/next/per_warp.patch`, which adds its test)
# then the call with carry [".variants"]: bash benchmarks/h200-2026-12-01/session23/next/call.sh
set -u
R=$OUT/r; mkdir -p $R
(cd .variants/per_warp && timeout 120 python3 -m linattn.bench verify --ops vla --jobs 15 --json $R/verify-per-warp.json \
  > $R/verify-per-warp.txt 2>&1)
for dir in . .variants/per_warp; do
  name=$( [ "$dir" = . ] && echo main || echo per-warp )
  # `python -m` puts the working directory first on the path: each folder's own linattn
  (cd "$dir" && timeout 150 python3 -m linattn.bench profile --contenders "VLA triton" --K 64,128 \
    --lengths 4096,65536 > "$R/profile-$name.txt" 2>&1)
done
tail -n 2 $R/verify-per-warp.txt
for name in main per-warp; do echo "== $name"; grep -E "^## |^Per call|gate_apply" $R/profile-$name.txt; done
tar czf $OUT/per-warp.tgz -C $R .
