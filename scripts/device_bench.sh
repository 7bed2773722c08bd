#!/usr/bin/env bash
# On the lent GPU machine: check the Triton backend against float64, then benchmark it beside SDPA and fla.
#   bash scripts/device_bench.sh ["STEP [options]" ...]      (default: "verify --jobs 12" "ops" "decode")
# A step is a `python -m linattn.bench` command with its options, quoted as one argument (`--only`, whose comma
# list may hold spaces, last: "ops --lengths 8192,65536 --only ours triton,fla GDN"), or `run NAME [options]`
# for a diagnostic (`linattn run NAME [options] --device cuda`; `--force` measures again over a committed result;
# its results folder is packed into $OUT/results-NAME.tgz). Steps are dealt over the machine's GPUs, one after
# another on each; step i writes $OUT/<i>-<command>.txt (and .json for bench commands). STEP_SECONDS caps each
# step (default 580).
# fla is a benchmark-only dependency and the machine is offline: its wheel travels in .whl/ (ignored by git):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 -d .whl fla-core==0.6.0        (then: run with carry [".whl"])
set -u
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
[ $# -gt 0 ] || set -- "verify --jobs 12" "ops" "decode"
steps=("$@")
# shellcheck source=scripts/gpu_deal.sh
source "$(dirname "$0")/gpu_deal.sh"
step() {  # index, spec
  local i=$1 spec=$2 name
  read -r -a words <<< "$spec"
  name=${words[0]}
  if [ "$name" = run ]; then
    timeout "${STEP_SECONDS:-580}" python3 -m linattn.cli run "${words[@]:1}" --device cuda > "$OUT/$i-${words[1]}.txt" 2>&1
    local rc=$?
    tar czf "$OUT/results-${words[1]}.tgz" "results/${words[1]}"
    return $rc
  fi
  # the spec's words are its options; "--only" takes one comma list, which may hold spaces: keep it whole
  local only=()
  if [[ "$spec" == *"--only "* ]]; then
    only=(--only "${spec#*--only }")
    read -r -a words <<< "${spec%%--only *}"
  fi
  timeout "${STEP_SECONDS:-580}" python3 -m linattn.bench "${words[@]}" "${only[@]}" --json "$OUT/$i-$name.json" \
    > "$OUT/$i-$name.txt" 2>&1
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
  tail -n 40 "$OUT/$i-"*.txt | cut -c1-240
done
exit "$status"
