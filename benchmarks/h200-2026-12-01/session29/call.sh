# Prepared in session 29 for the next session's device calls, from the repository root, one mode a call; extract
# each call's results.tgz here (`tar xzf`) and commit before the next, then `linattn report` and
# `linattn tables --write README.md`. A warm machine keeps the runs' ignored checkpoints between calls (not their
# untracked logs, which the checkpoints now carry): an unfinished experiment resumes where it stopped if the next call
# comes within the machine's idle time; otherwise carry the returned checkpoint (`scripts/device_experiment.sh`).
#
#   bash benchmarks/h200-2026-12-01/session29/call.sh sniah-ccq  (at most 9 minutes)
#     profile_step.py first (at most 2 minutes: how much of a kla-mqar training step is the host's, and so whether
#     CUDA graphs or batches made on the GPU would fit more runs in a call), then ccq-sniah's three runs not yet
#     committed: CCQ-GDN, and GLA and CCQ-GLA with a short convolution (`gla-conv`, `ccq-gla-conv`), at T = 1024
#   bash benchmarks/h200-2026-12-01/session29/call.sh mqar-ccq   (at most 9 minutes)
#     ccq-mqar's two new runs: GLA and CCQ-GLA with a short convolution (plain GLA fails MQAR at our scale: 0.015)
#   bash benchmarks/h200-2026-12-01/session29/call.sh seeds      (at most 9 minutes)
#     kla-mqar from two more seeds (`--seeds 3`: six new runs at once; KLA's rows rest on one seed)
#   bash benchmarks/h200-2026-12-01/session29/call.sh fair       (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
#   bash benchmarks/h200-2026-12-01/session29/call.sh speed      (at most 9 minutes)
#     issue 5's table again (`vla-speed --force`) after session 29's host-time cuts (`linattn/ops/grid.py`), then
#     where CCQ-GDN's and GDN's host time goes at 8K, K = 32 (`bench profile --host`: goal 3 there is the host's)
set -u
case "${1:-}" in
  sniah-ccq)
    start=$SECONDS
    PYTHONPATH="$PWD" timeout 120 python3 benchmarks/h200-2026-12-01/session29/profile_step.py > "$OUT/profile-step.txt" 2>&1
    grep "^[|#]" "$OUT/profile-step.txt"
    bash scripts/device_experiment.sh $((540 - (SECONDS - start))) 3 "ccq-sniah" ;;
  mqar-ccq) bash scripts/device_experiment.sh 540 2 "ccq-mqar" ;;
  seeds) bash scripts/device_experiment.sh 540 6 "kla-mqar --seeds 3" ;;
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  speed)
    export PYTHONPATH="$PWD"
    timeout 420 python3 -m linattn.cli run vla-speed --device cuda --force > "$OUT/vla-speed.txt" 2>&1
    tar czf "$OUT/vla-speed-results.tgz" results/vla-speed/default-cuda
    tail -n 40 "$OUT/vla-speed.txt"
    timeout 100 python3 -m linattn.bench profile --contenders "CCQ-GDN,GDN (delta_rule)" --K 32 --lengths 8192 \
      --host > "$OUT/profile-host-8k.txt" 2>&1
    tail -n 60 "$OUT/profile-host-8k.txt" ;;
  *) echo "usage: call.sh sniah-ccq|mqar-ccq|seeds|fair|speed" >&2; exit 2 ;;
esac
