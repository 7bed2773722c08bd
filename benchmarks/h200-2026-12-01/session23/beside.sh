# session 23, call 7 (one H200): the backward's B1 beside B2 on a second stream, screened against the two in turn,
# then the whole verify matrix on that code (every engine case runs B1 beside B2 there: B = 1, few heads).
set -u
R=$OUT/r; mkdir -p $R
PYTHONPATH=. timeout 110 python3 -u benchmarks/h200-2026-12-01/session23/screen_beside.py --out $R > $R/screen-beside.txt 2>&1
timeout 290 python3 -m linattn.bench verify --jobs 15 --json $R/verify-beside.json > $R/verify-beside.txt 2>&1
grep -v -i warn $R/screen-beside.txt | tail -30; tail -n 2 $R/verify-beside.txt; grep "✗" $R/verify-beside.txt | head
