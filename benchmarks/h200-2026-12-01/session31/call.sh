# Prepared in session 30 for the next session's device calls, from the repository root, one mode a call; extract
# each call's results.tgz here (only the experiment it ran: `tar xzf results.tgz results/NAME`) and commit before the
# next, then `linattn report` and `linattn tables --write README.md`.
#
#   bash benchmarks/h200-2026-12-01/session31/call.sh rows       (at most 9 minutes; carry [".variants"])
#     `rows.patch` (session 30: half a chunk's rows a program in CCQ's output kernel and rows_bwd, the same bits in
#     the interpreter, not merged) in a copy of the package: `verify --ops ccq` with both halved up to K = 32, then
#     `screen_rows.py` (the library's whole chunks against four split settings, at K = 32, 64, 128). Here first:
#       rm -rf .variants/rows && mkdir -p .variants/rows && git archive HEAD linattn | tar -x -C .variants/rows
#       git apply --directory=.variants/rows --include='.variants/rows/linattn/*' \
#         benchmarks/h200-2026-12-01/session31/rows.patch
#   bash benchmarks/h200-2026-12-01/session31/call.sh ccq-seeds  (at most 9 minutes; twice)
#     ccq-mqar from three seeds (`--seeds 3` extends every mixer: 16 runs, 4 copied from kla-mqar, 12 new, about
#     two calls at 6 jobs). Why: kla-mqar's seeds ended KLA at 0.652, 0.999 and 0.989, so ccq-mqar's one-seed
#     CCQ-KLA 0.934 against the seed-0 KLA's 0.652 cannot tell CCQ's lift from the seed's. The second call resumes
#     the first's unfinished runs from the checkpoints the warm machine keeps (call it within the idle time, or
#     carry the returned `checkpoint-N.tgz.*` as `scripts/device_experiment.sh` says)
#   bash benchmarks/h200-2026-12-01/session31/call.sh sniah-seeds (at most 9 minutes; maybe twice)
#     kla-sniah from three seeds (6 new runs at T = 1024): KLA's 0.881 – 0.916 there rests on seed 0, the seed whose
#     MQAR run ended at 0.652 where the other two reached 0.99
#   bash benchmarks/h200-2026-12-01/session31/call.sh fla-gla    (at most 9 minutes; carry [".whl"])
#     ours beside fla's `chunk_gla` (`bench ops --only "triton GLA,fla GLA"`): fla's first call autotunes for more
#     than the 90 – 200 s that sessions 28 and 29 gave it, so this call gives it the whole call
#   bash benchmarks/h200-2026-12-01/session31/call.sh scan       (at most 9 minutes)
#     the chunk scan's step for CCQ's running sums (`screen_scan.py`: 16, 32, 64 chunks a step, 64 – 256 entries a
#     program) at K = 32, 128; issue 5's goal 3 misses at K = 32 by ~0.13 ms at 64K, and the two scans take 0.17
#   bash benchmarks/h200-2026-12-01/session31/call.sh fair       (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
set -u
case "${1:-}" in
  ccq-seeds) bash scripts/device_experiment.sh 540 6 "ccq-mqar --seeds 3" ;;
  sniah-seeds) bash scripts/device_experiment.sh 540 6 "kla-sniah --seeds 3" ;;
  fla-gla)
    export PYTHONPATH="$PWD"
    if ls .whl/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      export PYTHONPATH="$PWD:/tmp/site"
    fi
    timeout 540 python3 -m linattn.bench ops --only "triton GLA,fla GLA" --no-batch-sweep --lengths 4096,16384,65536 \
      --json "$OUT/ops-gla.json" > "$OUT/ops-gla.txt" 2>&1
    grep -v "^# measured" "$OUT/ops-gla.txt" | tail -n 20 ;;
  rows)
    # the variant's linattn first on the path (`python -m` puts the working directory first)
    (cd .variants/rows && PYTHONPATH=$PWD timeout 170 python3 -m linattn.bench verify --ops ccq --jobs 15 \
      > "$OUT/verify-ccq.txt" 2>&1)
    grep -v "✓" "$OUT/verify-ccq.txt" | tail -n 8
    PYTHONPATH="$PWD/.variants/rows:$PWD" timeout 360 python3 benchmarks/h200-2026-12-01/session31/screen_rows.py \
      > "$OUT/screen-rows.txt" 2>&1
    cat "$OUT/screen-rows.txt" ;;
  scan)
    PYTHONPATH="$PWD" timeout 540 python3 benchmarks/h200-2026-12-01/session31/screen_scan.py > "$OUT/screen-scan.txt" 2>&1
    cat "$OUT/screen-scan.txt" ;;
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  *) echo "usage: call.sh rows|ccq-seeds|sniah-seeds|fla-gla|scan|fair" >&2; exit 2 ;;
esac
