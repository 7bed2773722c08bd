# Prepared in session 29 for the next session's device calls, from the repository root, one mode a call; extract
# each call's results.tgz here (`tar xzf`) and commit before the next, then `linattn report` and
# `linattn tables --write README.md`. A warm machine keeps the runs' ignored checkpoints between calls (not their
# untracked logs, which the checkpoints now carry): an unfinished experiment resumes where it stopped if the next call
# comes within the machine's idle time; otherwise carry the returned checkpoint (`scripts/device_experiment.sh`).
#
#   bash benchmarks/h200-2026-12-01/session29/call.sh sniah-ccq  (at most 9 minutes)
#     ccq-sniah's last run, CCQ-GDN at T = 1024 (alone; the other five are committed)
#   bash benchmarks/h200-2026-12-01/session29/call.sh seeds      (at most 9 minutes)
#     kla-mqar from two more seeds (`--seeds 3`: six new runs at once; KLA's rows rest on one seed)
#   bash benchmarks/h200-2026-12-01/session29/call.sh fair       (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
set -u
case "${1:-}" in
  sniah-ccq) bash scripts/device_experiment.sh 540 1 "ccq-sniah" ;;
  seeds) bash scripts/device_experiment.sh 540 6 "kla-mqar --seeds 3" ;;
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  *) echo "usage: call.sh sniah-ccq|seeds|fair" >&2; exit 2 ;;
esac
