#!/usr/bin/env bash
# Run a named experiment on the lent GPU machine and bring its results back under $OUT.
#   bash scripts/device_experiment.sh SECONDS JOBS NAME [linattn run options...]
# The machine is bare and offline: the package runs from the source tree (its dependencies are in the image).
# Finished runs already under results/ (their result.json) are kept; the run stops after SECONDS and whatever
# finished is packed into $OUT/results.tgz (checkpoints left out: they stay on the machine).
set -u
seconds=$1 jobs=$2 name=$3
shift 3
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
timeout "$seconds" python3 -m linattn.cli run "$name" --device cuda --jobs "$jobs" "$@" 2>&1 | tr '\r' '\n' \
  | grep -v '^train' | tail -n 60 | tee "$OUT/log.txt"
tar czf "$OUT/results.tgz" --exclude='checkpoint.pt' results
ls -la "$OUT"
