# Session 24, second try (the first, fla_verify.sh, timed out): fla_rows.py, rows as they complete. Carry [".whl"].
set -u
R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timeout 400 python3 -u benchmarks/h200-2026-12-01/session24/fla_rows.py 8 > $R/fla-rows.txt 2>&1
echo "rc $?"; cat $R/fla-rows.txt | grep -v Warning | head -60
