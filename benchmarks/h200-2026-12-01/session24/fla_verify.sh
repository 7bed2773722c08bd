# Session 24, one H200: fla 0.6 held to DESIGN §4 — `chunk_gated_delta_rule` forward on the matrix's GDN cases and
# `chunk_delta_rule` (DeltaNet) forward + backward on their 16-bit copies without the decay (issue 4's goals quote
# both kernels' times). Carry [".whl"] (fla-core 0.6.0, `scripts/device_bench.sh` says how to fetch it).
set -u
R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timeout 540 python3 -m linattn.bench verify --backend fla --jobs 15 --json $R/fla-verify.json > $R/fla-verify.txt 2>&1
echo "rc $?"
tail -n 3 $R/fla-verify.txt
grep -c "✗" $R/fla-verify.txt
tar czf $OUT/fla-verify.tgz -C $R .
