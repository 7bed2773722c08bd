# session 22's screens, prepared without a GPU (the session had none), for the next device call (one H200, under
# 10 minutes): the gate's column-walk variants and the kept L⁻¹ beside the library kernel, then CCQ's backward with
# and without the rows kernel's chunk terms (the kept L⁻¹ and the terms merged in session 22, not yet timed).
set -u
R=$OUT/r; mkdir -p $R
S=benchmarks/h200-2026-12-01/session22
PYTHONPATH=. timeout 400 python3 -u $S/screen_gate.py --out $R > $R/screen-gate.txt 2>&1
PYTHONPATH=. timeout 150 python3 -u $S/screen_ccq_terms.py --out $R > $R/screen-ccq-terms.txt 2>&1
grep -v Warn $R/screen-gate.txt | tail -25; grep -v Warn $R/screen-ccq-terms.txt | tail -16
tar czf $OUT/call1.tgz -C $R .
