# Session 37's device calls, from the repository root (README.md here says why):
#   bash benchmarks/h200-2026-12-02/session37/call.sh SECONDS [probe]
# Under CUDA MPS (without it when the daemon does not work): with `probe`, session 36's concurrency probe once
# (GDN d 128, 12 runs at once, today's loss: the head at the targets, a mixture's rows one length at a time), then
# `zoology-mqar`, 12 runs at a time, for the rest of SECONDS.
set -u
source scripts/cuda_mps.sh
start=$SECONDS
mps_start
if [ "${2:-}" = probe ]; then
  echo "| tag | model | loss | jobs | ms a step (each run) | steps/s (all runs) | wall s |"
  echo "|---|---|---|---:|---|---:|---:|"
  PYTHONPATH="$PWD" timeout 150 python3 benchmarks/h200-2026-12-02/session36/concurrency_probe.py --jobs 12 --tag mps-by-length
fi
bash scripts/device_experiment.sh $(($1 - (SECONDS - start))) 12 "zoology-mqar"
status=$?
mps_stop
exit $status
