#!/usr/bin/env bash
# Compare kernel variants kept on git branches, side by side in one GPU call.
#   here:    bash scripts/device_variants.sh pack BRANCH [BRANCH ...]   (copies each branch's linattn/ to .variants/)
#   there:   bash scripts/device_variants.sh run [verify]                (run with carry [".variants"])
# `run` profiles every packed variant and the working tree (`current`) with `python -m linattn.bench stages`, and
# with `verify` also screens each against float64 (`verify --quick`, about a fifth of the matrix; a variant to be
# merged then gets the full `python -m linattn.bench verify`). Outputs: $OUT/<variant>-*.
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
status=0
for dir in "$PWD" .variants/*; do
  [ -d "$dir/linattn" ] || continue
  name=$( [ "$dir" = "$PWD" ] && echo current || basename "$dir" )
  echo "== $name"
  PYTHONPATH="$dir" python3 -m linattn.bench stages --json "$OUT/$name-stages.json" 2>&1 | tee "$OUT/$name-stages.txt" \
    | grep -E "stages, total|delta_rule|wy_fwd|state_|local_bwd"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if [ "${1:-}" = verify ]; then
    PYTHONPATH="$dir" python3 -m linattn.bench verify --quick --jobs 12 --json "$OUT/$name-verify.json" > "$OUT/$name-verify.txt" 2>&1
    [ $? -eq 0 ] || status=1
    tail -n 3 "$OUT/$name-verify.txt"
  fi
done
exit "$status"
