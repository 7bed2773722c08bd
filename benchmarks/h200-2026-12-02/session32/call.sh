# Prepared in session 31 for the next session's device calls, from the repository root, one mode a call; extract
# each call's results.tgz here (only the experiment it ran: `tar xzf results.tgz results/NAME`) and commit before the
# next, then `linattn report` and `linattn tables --write README.md`.
#
#   bash benchmarks/h200-2026-12-02/session32/call.sh sniah-seeds  (at most 9 minutes; twice, the second warm)
#     the rest of `kla-sniah --seeds 3`: session 31's call (470 s) finished Mamba-2's seeds 1 and 2 (committed) and
#     left GDN's and KLA's at step ~4,600 of 10,000. One of them, GDN's seed 1, came back as a checkpoint at step
#     4,500; it lies (ignored) at results/kla-sniah/paper/runs/gated_deltanet-x1024-lr0.001-s1/checkpoint.pt in
#     this working tree, so the first call carries it (carry that path) and resumes it; the other three start over
#     (about 9 minutes each at 6 a GPU). The second call, within the idle time, resumes what the first left on the
#     warm machine. Why: kla-sniah's KLA row (0.881 – 0.916) rests on seed 0, KLA's worst MQAR seed (0.652 against
#     0.999, 0.989)
#   bash benchmarks/h200-2026-12-02/session32/call.sh fla-gla      (at most 9 minutes; carry [".whl"])
#     ours beside fla's `chunk_gla` (`bench ops --only "triton GLA,fla GLA"`): fla's first call autotunes for more
#     than the 90 – 200 s that sessions 28 and 29 gave it, so this call gives it the whole call
#   bash benchmarks/h200-2026-12-02/session32/call.sh fair         (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
set -u
case "${1:-}" in
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
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  *) echo "usage: call.sh sniah-seeds|fla-gla|fair" >&2; exit 2 ;;
esac
