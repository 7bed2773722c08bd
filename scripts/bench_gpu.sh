#!/usr/bin/env bash
# BENCHMARKS.md's GPU tables on a machine with one or more CUDA GPUs: check the Triton backend against float64,
# then time it beside SDPA and fla (fla-core comes with the `dev` extra), each step's table and JSON into OUTDIR.
#   bash scripts/bench_gpu.sh OUTDIR ["STEP [options]" ...]
# Default steps: "verify --jobs 8" "ops" "stages" "decode" "run vla-speed". A step is a `python -m linattn.bench`
# command with its options, quoted as one argument (`--only`, whose comma list may hold spaces, last:
# "ops --lengths 8192,65536 --only ours triton,fla GDN"), or `run NAME [options]` for a diagnostic
# (`linattn run NAME --device cuda --force`, its results under results/NAME), or `resume NAME [options]` for one that
# an earlier job cut short (the same without --force: its finished blocks, `results/NAME/default-cuda/work/`, must
# have come with the tree). Steps are dealt over the GPUs, one after another on each; step i writes
# OUTDIR/<i>-<command>.txt (and .json for bench commands; for a diagnostic <i>-NAME.tgz, its results with the
# finished parts of a run cut short). STEP_SECONDS caps each step (default 1800): set it below the job's own limit,
# so that a diagnostic cut short still packs its blocks.
set -u
out=${1:?usage: bench_gpu.sh OUTDIR [STEP ...]}
shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
[ $# -gt 0 ] || set -- "verify --jobs 8" "ops" "stages" "decode" "run vla-speed"
steps=("$@")
# shellcheck source=scripts/gpu_deal.sh
source "$(dirname "$0")/gpu_deal.sh"
step() {  # index, spec
  local i=$1 spec=$2 name
  read -r -a words <<< "$spec"
  name=${words[0]}
  if [ "$name" = run ] || [ "$name" = resume ]; then
    local force=() status
    [ "$name" = run ] && force=(--force)
    timeout "${STEP_SECONDS:-1800}" python3 -m linattn.cli run "${words[@]:1}" --device cuda "${force[@]}" \
      > "$out/$i-${words[1]}.txt" 2>&1
    status=$?
    tar czf "$out/$i-${words[1]}.tgz" "results/${words[1]}"
    return $status
  fi
  # the spec's words are its options; "--only" takes one comma list, which may hold spaces: keep it whole
  local only=()
  if [[ "$spec" == *"--only "* ]]; then
    only=(--only "${spec#*--only }")
    read -r -a words <<< "${spec%%--only *}"
  fi
  timeout "${STEP_SECONDS:-1800}" python3 -m linattn.bench "${words[@]}" "${only[@]}" --json "$out/$i-$name.json" \
    > "$out/$i-$name.txt" 2>&1
}
step_item() {
  step "$1" "${steps[$1]}"
  local s=$?
  echo "== step $1 (${steps[$1]}) on GPU $CUDA_VISIBLE_DEVICES: exit $s"
  return $s
}
status=0
deal_over_gpus "${#steps[@]}" step_item || status=1
for ((i = 0; i < ${#steps[@]}; i++)); do
  echo "== ${steps[$i]}"
  tail -n 40 "$out/$i-"*.txt | cut -c1-240
done
exit "$status"
