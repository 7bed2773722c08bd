#!/usr/bin/env bash
# CUDA MPS (the Multi-Process Service) for many small training processes on one GPU: without it the GPU runs one
# process's kernels at a time (time slices), with it the kernels of several processes run side by side.
#   source scripts/cuda_mps.sh && mps_start   # returns 0 once a CUDA client works through the daemon, else 1
#   mps_stop
# The pipe and log folders are exported, so that the clients this shell starts find the daemon.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/linattn-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/linattn-mps/log

mps_start() {
  command -v nvidia-cuda-mps-control > /dev/null || { echo "mps: nvidia-cuda-mps-control not found"; return 1; }
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "mps: the daemon did not start"; return 1; }
  if timeout 120 python3 -c 'import torch; assert torch.ones(4, device="cuda").sum().item() == 4'; then
    echo "mps: on"
  else
    echo "mps: a CUDA client failed through the daemon; stopping it"
    mps_stop
    return 1
  fi
}

mps_stop() {
  echo quit | timeout 30 nvidia-cuda-mps-control > /dev/null 2>&1
  sleep 1
  tail -n 5 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2> /dev/null
  return 0
}
