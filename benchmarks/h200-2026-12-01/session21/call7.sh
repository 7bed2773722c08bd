# session 21, call 7 (one H200): the group penalties' kernel: VLA's verify cases, then the side-by-side screen
set -u
R=$OUT/r; mkdir -p $R
timeout 120 python3 -m linattn.bench verify --ops vla --jobs 15 --json $R/verify.json > $R/verify.txt 2>&1
PYTHONPATH=. timeout 150 python3 .variants/s21/screen_pen.py $R/screen-pen.json > $R/screen-pen.txt 2>&1
tail -n 2 $R/verify.txt; grep -v Warn $R/screen-pen.txt | tail -12
tar czf $OUT/call7.tgz -C $R .
