# session 22's second call, prepared without a GPU (one H200, under 6 minutes): the verify matrix's CCQ and VLA
# cases on the code of session 22 (their kernels changed), then `bench profile` of VLA and CCQ-GDN at 64K, forward +
# backward, on this code and on the code before session 22 side by side (the three merged changes' effect, and where
# VLA's time goes: the engine on float32 keys against the gate).
# Here first: `bash scripts/device_variants.sh pack c2c6df9`; the call with carry [".variants"].
set -u
R=$OUT/r; mkdir -p $R
timeout 200 python3 -m linattn.bench verify --ops ccq,vla --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
for dir in . .variants/c2c6df9; do
  name=$( [ "$dir" = . ] && echo current || echo before )
  # `python -m` puts the working directory first on the path: each folder's own linattn
  (cd "$dir" && timeout 100 python3 -m linattn.bench profile --contenders "VLA triton,CCQ-GDN" --K 32,128 \
    --lengths 65536 --passes fwdbwd > "$R/profile-$name.txt" 2>&1)
done
tail -n 2 $R/verify.txt
for name in current before; do echo "== $name"; grep -E "^## |^Per call|_kernel" $R/profile-$name.txt | head -40; done
tar czf $OUT/call2.tgz -C $R .
