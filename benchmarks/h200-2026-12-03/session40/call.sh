# Session 40's device calls, from the repository root (README.md here says why):
#   bash benchmarks/h200-2026-12-03/session40/call.sh SECONDS
# Under CUDA MPS: zoology-mqar's last 9 runs (VLA at d 512, CCQ-GDN at d 256 and 512) and the output-gate ablation
# (GDN and KLA without their output gate, 24 runs), one experiment so that 12 run at a time throughout.
set -u
source scripts/cuda_mps.sh
start=$SECONDS
mps_start
bash scripts/device_experiment.sh $(($1 - (SECONDS - start))) 12 \
  "zoology-mqar --mixers vla,ccq-gated_deltanet,gated_deltanet-no_gate,kla-no_gate"
status=$?
mps_stop
exit $status
