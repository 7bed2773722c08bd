#!/usr/bin/env bash
# Run named experiments on a GPU machine in a job of limited time, one after another, and gather what the job must
# hand back under $OUT (default ./experiment_out): the results, and the checkpoints of unfinished runs, within a
# copy-back limit of 8 files and 64 MiB (the limit of the GPU jobs these experiments ran in).
#   bash scripts/device_experiment.sh SECONDS JOBS "NAME [options]" ["NAME [options]" ...]
# JOBS: training runs at a time per experiment (dealt over the GPUs); 0 for diagnostics, which take no --jobs.
# The package runs from the source tree (PYTHONPATH); its dependencies must be installed on the machine.
# lm-compare's corpus is made from installed packages the recipe pins; where the machine has other versions, carry
# the tokenised cache and tokenizer made elsewhere as ROOT/lm-compare-short/{cache,tokenizer.json} (no corpus/ beside
# them) and set LINATTN_DATA=ROOT.
# Finished runs already under results/ (their result.json) are kept, and a run another experiment finished is copied,
# not trained again (`runner.find_same_run`): hence one experiment after another, and because on one GPU nine runs at
# once each go at well under half of three's speed, so that with three experiments at once none may finish in a call
# where one alone would. The experiments share SECONDS in all, each getting what the ones before left; whatever finished
# is packed into $OUT/results.tgz (their experiments' folders only; checkpoints and best weights left out). The
# checkpoints of unfinished runs (with their `best.pt`, where kept) come back in one archive, $OUT/checkpoints.tgz.00,
# .01, … (15 MiB pieces: a returned file may have 16; a d-256 model with its AdamW state is about 46 MB), as many runs
# as fit beside results.tgz and the logs in the 8 files and 64 MiB that come back: `cat checkpoints.tgz.* | tar xzf -`
# puts them back here, and the next call carries their runs' folders (64 MiB a call in all) and resumes them.
# With TOGETHER=1 the experiments start at once (each with JOBS runs at a time) instead of one after another.
# With START_MARGIN=S in the environment no run begins in the call's last S seconds (`linattn run --start-by`): set it
# to about a run's length, so that the last call of a session ends with whole runs instead of runs whose checkpoints
# may not fit in what comes back (the command then exits 1, naming the runs not begun).
# Exit status: the first failure's.
set -u
seconds=$1 jobs=$2
shift 2
OUT=${OUT:-experiment_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv,noheader
# the JOBS runs' small kernels share the GPU's SMs side by side under MPS, instead of the GPU taking turns between the
# processes (one already running on a warm machine is kept)
if command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/linattn-mps}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/linattn-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ]; then echo "MPS daemon running"
  elif nvidia-cuda-mps-control -d; then echo "MPS daemon started"
  fi
fi
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
jobs_option=()
[ "$jobs" -gt 0 ] && jobs_option=(--jobs "$jobs")
deadline=$((SECONDS + seconds))
# one experiment's command, its log $OUT/log<i>.txt; TOGETHER=1 starts every experiment at once, each with JOBS runs
# at a time, where they are too few to fill the GPU alone (experiments that share runs, `runner.find_same_run`, must
# not run together: the second would not see the first's unfinished runs)
launch() {
  local i=$1 spec=$2 left=$((deadline - SECONDS)) start_option=() margin=${START_MARGIN:-0}
  [ "$left" -le 0 ] && return 124  # no time left: no log (each returned file counts)
  [ "$margin" -gt 0 ] && [ "$left" -gt "$margin" ] && start_option=(--start-by $((left - margin)))
  # shellcheck disable=SC2086  # the spec is a name followed by options
  timeout "$left" python3 -m linattn.cli run $spec --device cuda "${jobs_option[@]}" "${start_option[@]}" \
    > "$OUT/log$i.txt" 2>&1
}
report() {
  echo "== linattn run $2: exit $3"
  [ -f "$OUT/log$1.txt" ] && tr '\r' '\n' < "$OUT/log$1.txt" | grep -v '^train' | tail -n 25
  [ "$status" -eq 0 ] && status=$3
}
status=0 i=0 pids=() specs=("$@")
for spec in "${specs[@]}"; do
  i=$((i + 1))
  if [ "${TOGETHER:-0}" = 1 ]; then
    launch "$i" "$spec" &
    pids+=($!)
  else
    launch "$i" "$spec"
    report "$i" "$spec" $?
  fi
done
i=0
for pid in "${pids[@]}"; do
  i=$((i + 1))
  wait "$pid"
  report "$i" "${specs[i - 1]}" $?
done
# this call's experiments only: the others' folders are as the tree was sent, and unpacked after a newer call's
# results they would put older files back
roots=()
for spec in "$@"; do [ -d "results/${spec%% *}" ] && roots+=("results/${spec%% *}"); done
if [ ${#roots[@]} -gt 0 ]; then
  mapfile -t roots < <(printf '%s\n' "${roots[@]}" | sort -u)
  tar czf "$OUT/results.tgz" --exclude='checkpoint.pt' --exclude='best.pt' "${roots[@]}"
fi
# the unfinished runs of these experiments: a warm machine keeps an earlier call's checkpoints (ignored files) but not
# their result.json (untracked) unless the tree it was sent has them, so a run another call finished would look
# unfinished here
mapfile -t unfinished < <([ ${#roots[@]} -gt 0 ] && for c in $(find "${roots[@]}" -name checkpoint.pt | sort -u); do
  [ -e "$(dirname "$c")/result.json" ] || echo "$c"
done)
# the device returns at most 8 files and 64 MiB from $OUT: one archive of as many checkpoints as fit beside what is
# there already, the smallest first (the most runs), each other run named and left behind. Chosen by the files' own
# sizes (weights barely compress, so they bound the archive's) and packed once: trying each candidate's archive in
# turn took tens of seconds with many runs unfinished, past the job's end.
piece=$((15 * 1024 * 1024))
budget=$((63 * 1024 * 1024 - $(du -sb "$OUT" | cut -f1) - 1024 * 1024))  # 1 MiB for the archive's headers
slots=$((8 - $(find "$OUT" -type f | wc -l)))
kept=() total=0
mapfile -t unfinished < <([ ${#unfinished[@]} -gt 0 ] && du -b "${unfinished[@]}" | sort -n | cut -f2)
for c in "${unfinished[@]}"; do
  run_dir=$(dirname "$c")
  # the run's best weights too, where it keeps them (`RunSpec.select_on`)
  candidate=("$c")
  [ -e "$run_dir/best.pt" ] && candidate+=("$run_dir/best.pt")
  size=$(du -cb "${candidate[@]}" | tail -n 1 | cut -f1)
  if [ $((total + size)) -le "$budget" ] && [ $(((total + size + piece - 1) / piece)) -le "$slots" ]; then
    kept+=("${candidate[@]}")
    total=$((total + size))
  else
    echo "== unfinished, its checkpoint left on the machine (over the 8 files / 64 MiB that come back): $run_dir"
  fi
done
if [ ${#kept[@]} -gt 0 ]; then
  tar czf - "${kept[@]}" | split -b 15M -d - "$OUT/checkpoints.tgz."
  echo "== unfinished runs in checkpoints.tgz.*: $(printf "%s\n" "${kept[@]}" | grep -c checkpoint.pt)"
fi
exit "$status"
