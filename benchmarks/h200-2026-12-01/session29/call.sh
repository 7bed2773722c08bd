# Prepared in session 29 for the next session's device calls, from the repository root, one mode a call; extract
# each call's results.tgz here (`tar xzf`) and commit before the next, then `linattn report` and
# `linattn tables --write README.md`. A warm machine keeps the runs' ignored checkpoints between calls (not their
# untracked logs, which the checkpoints now carry): an unfinished experiment resumes where it stopped if the next call
# comes within the machine's idle time; otherwise carry the returned checkpoint (`scripts/device_experiment.sh`).
#
#   bash benchmarks/h200-2026-12-01/session29/call.sh sniah-ccq  (at most 9 minutes)
#     profile_step.py first (at most 2 minutes: how much of a kla-mqar training step is the host's, and so whether
#     CUDA graphs or batches made on the GPU would fit more runs in a call), then ccq-sniah's last run, CCQ-GDN at
#     T = 1024 (alone; the other five are committed)
#   bash benchmarks/h200-2026-12-01/session29/call.sh seeds      (at most 9 minutes)
#     kla-mqar from two more seeds (`--seeds 3`: six new runs at once; KLA's rows rest on one seed)
#   bash benchmarks/h200-2026-12-01/session29/call.sh fair       (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
set -u
case "${1:-}" in
  sniah-ccq)
    start=$SECONDS
    PYTHONPATH="$PWD" timeout 120 python3 benchmarks/h200-2026-12-01/session29/profile_step.py > "$OUT/profile-step.txt" 2>&1
    grep "^[|#]" "$OUT/profile-step.txt"
    bash scripts/device_experiment.sh $((540 - (SECONDS - start))) 1 "ccq-sniah" ;;
  seeds) bash scripts/device_experiment.sh 540 6 "kla-mqar --seeds 3" ;;
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  *) echo "usage: call.sh sniah-ccq|seeds|fair" >&2; exit 2 ;;
esac
