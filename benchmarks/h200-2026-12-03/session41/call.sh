# Session 41's device calls, from the repository root (README.md here says why):
#   bash benchmarks/h200-2026-12-03/session41/call.sh SECONDS
# Under CUDA MPS: zoology-mqar, all of its mixers, so that the runs at lr 1e-4 of the cells whose best lr was the
# grid's lowest (`Experiment.lr_below`) are trained; every other run is read back from results/.
set -u
source scripts/cuda_mps.sh
start=$SECONDS
mps_start
bash scripts/device_experiment.sh $(($1 - (SECONDS - start))) 12 "zoology-mqar"
status=$?
mps_stop
exit $status
