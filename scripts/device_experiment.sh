#!/usr/bin/env bash
# Run named experiments on the lent GPU machine, side by side, and bring their results back under $OUT.
#   bash scripts/device_experiment.sh SECONDS JOBS "NAME [options]" ["NAME [options]" ...]
# JOBS: training runs at a time per experiment (dealt over the GPUs); 0 for diagnostics, which take no --jobs.
# The machine is bare and offline: the package runs from the source tree (its dependencies are in the image).
# Finished runs already under results/ (their result.json) are kept; carry a results folder holding checkpoints
# and its interrupted runs resume. The experiments run at the same time, each for at most SECONDS; whatever
# finished is packed into $OUT/results.tgz (checkpoints left out), and the checkpoints of unfinished runs into
# $OUT/checkpoints-N.tgz (four per file, under the 16 MiB a returned file may have), so that the next call
# can carry them and resume. Exit status: the first failure's.
set -u
seconds=$1 jobs=$2
shift 2
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
jobs_option=()
[ "$jobs" -gt 0 ] && jobs_option=(--jobs "$jobs")
pids=()
i=0
for spec in "$@"; do
  i=$((i + 1))
  # shellcheck disable=SC2086  # the spec is a name followed by options
  timeout "$seconds" python3 -m linattn.cli run $spec --device cuda "${jobs_option[@]}" > "$OUT/log$i.txt" 2>&1 &
  pids+=($!)
done
status=0 i=0
for spec in "$@"; do
  wait "${pids[$i]}"
  rc=$?
  i=$((i + 1))
  echo "== linattn run $spec: exit $rc"
  tr '\r' '\n' < "$OUT/log$i.txt" | grep -v '^train' | tail -n 25
  [ "$status" -eq 0 ] && status=$rc
done
tar czf "$OUT/results.tgz" --exclude='checkpoint.pt' results
mapfile -t unfinished < <(for c in $(find results -name checkpoint.pt | sort); do
  [ -e "$(dirname "$c")/result.json" ] || echo "$c"
done)
for ((j = 0; j < ${#unfinished[@]}; j += 4)); do
  tar czf "$OUT/checkpoints-$((j / 4)).tgz" "${unfinished[@]:j:4}"
done
exit "$status"
