#!/usr/bin/env bash
# Compare kernel variants kept on git branches, side by side in one GPU call.
#   here:    bash scripts/device_variants.sh pack BRANCH [BRANCH ...]   (copies each branch's linattn/ to .variants/)
#   there:   bash scripts/device_variants.sh run [verify]                (run with carry [".variants"])
#            STAGES="--op vla-gate --K 128" bash scripts/device_variants.sh run    (other `stages` options)
#            PROFILE="--contenders CCQ-GDN --K 32 --lengths 65536 --passes fwdbwd" bash scripts/device_variants.sh run
#                     (`bench profile` of a `vla-speed` contender in place of `stages`: VLA, CCQ, KLA variants)
# `run` profiles every packed variant and the working tree (`current`) with `python -m linattn.bench stages`, and
# with `verify` also screens each against float64 (`verify --quick`, about a fifth of the matrix, the delta rule
# only; VERIFY="--ops ccq" (or vla, kla) screens an op's cases instead; a variant to be merged then gets the full
# `python -m linattn.bench verify`). The variants are dealt over the machine's GPUs.
# Outputs: $OUT/variants.tgz, holding <variant>-stages.{txt,json} and <variant>-verify.{txt,json}.
set -u
mode=${1:?pack or run}
shift
if [ "$mode" = pack ]; then
  grep -qx '/.variants/' .git/info/exclude 2>/dev/null || echo '/.variants/' >> .git/info/exclude
  for branch in "$@"; do
    dir=.variants/${branch//\//_}
    rm -rf "$dir" && mkdir -p "$dir"
    git archive "$branch" linattn | tar -x -C "$dir" && echo "packed $branch -> $dir"
  done
  exit 0
fi
export PYTHONUNBUFFERED=1
work=$(mktemp -d)
dirs=()
for dir in "$PWD" "$PWD"/.variants/*; do
  [ -d "$dir/linattn" ] && dirs+=("$dir")
done
# shellcheck source=scripts/gpu_deal.sh
source "$(dirname "$0")/gpu_deal.sh"
profile() {  # variant folder: its stage profile, and with `verify` its quick screen, into $work
  local dir=$1 name rc=0
  name=$( [ "$dir" = "$PWD" ] && echo current || basename "$dir" )
  cd "$dir" || return 1  # `python -m` puts the working directory first on the path, ahead of PYTHONPATH
  if [ -n "${PROFILE:-}" ]; then
    # shellcheck disable=SC2086  # PROFILE is a list of options
    python3 -m linattn.bench profile $PROFILE --json "$work/$name-stages.json" > "$work/$name-stages.txt" 2>&1 || rc=1
  else
    # shellcheck disable=SC2086  # STAGES is a list of options
    python3 -m linattn.bench stages ${STAGES:-} --json "$work/$name-stages.json" > "$work/$name-stages.txt" 2>&1 || rc=1
  fi
  if [ "$screen" = verify ]; then
    # shellcheck disable=SC2086  # VERIFY is a list of options
    python3 -m linattn.bench verify ${VERIFY:---quick} --jobs 6 --json "$work/$name-verify.json" \
      > "$work/$name-verify.txt" 2>&1 || rc=1
  fi
  return $rc
}
screen=${1:-}  # "verify": also the quick correctness screen
profile_item() { (profile "${dirs[$1]}"); }  # in a subshell: profile changes directory
status=0
deal_over_gpus "${#dirs[@]}" profile_item || status=1
for txt in "$work"/*-stages.txt; do
  echo "== $(basename "$txt" -stages.txt)"
  grep -E "stages, total|delta_rule|wy_fwd|state_|local_bwd|vla gate|^## |Per call|ccq_|gate_|Error|error" "$txt"
  verify=${txt%-stages.txt}-verify.txt
  [ -e "$verify" ] && tail -n 3 "$verify"
done
tar czf "$OUT/variants.tgz" -C "$work" .
exit "$status"
