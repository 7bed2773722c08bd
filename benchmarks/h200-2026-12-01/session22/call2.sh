# session 22's second call, prepared without a GPU (one H200, under 5 minutes): the verify matrix's CCQ and VLA
# cases on the code of session 22 (their kernels changed), then VLA's forward + backward profile at 64K (where its
# time goes: the engine on float32 keys against the gate).
set -u
R=$OUT/r; mkdir -p $R
timeout 200 python3 -m linattn.bench verify --ops ccq,vla --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
timeout 90 python3 -m linattn.bench profile --contenders "VLA triton" --K 32,128 --lengths 65536 --passes fwdbwd \
  > $R/profile-vla-64k.txt 2>&1
tail -n 2 $R/verify.txt; grep -E "^## |^Per call|_kernel" $R/profile-vla-64k.txt | head -40
tar czf $OUT/call2.tgz -C $R .
