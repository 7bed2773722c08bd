# session 22's screens, prepared without a GPU (the session had none), for the next device call (one H200):
# the gate's column-walk variants beside the library kernel, then CCQ's backward with and without the rows kernel's
# chunk terms (merged in 3d68276, not yet timed), then the verify matrix's CCQ cases on that code.
set -u
R=$OUT/r; mkdir -p $R
S=benchmarks/h200-2026-12-01/session22
PYTHONPATH=. timeout 240 python3 -u $S/screen_gate.py --out $R > $R/screen-gate.txt 2>&1
PYTHONPATH=. timeout 120 python3 -u $S/screen_ccq_terms.py --out $R > $R/screen-ccq-terms.txt 2>&1
timeout 150 python3 -m linattn.bench verify --ops ccq --jobs 15 --json $R/verify-ccq.json > $R/verify-ccq.txt 2>&1
grep -v Warn $R/screen-gate.txt | tail -25; grep -v Warn $R/screen-ccq-terms.txt | tail -16; tail -n 2 $R/verify-ccq.txt
tar czf $OUT/call1.tgz -C $R .
