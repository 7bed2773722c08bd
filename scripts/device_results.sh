#!/usr/bin/env bash
# Put the runs a device call finished into this tree: from the call's results.tgz (`scripts/device_experiment.sh`
# writes it), each run folder with a result.json that the tree lacks, copied whole; unfinished runs and runs already
# here are left alone. Run from the repository root before the next call on a warm machine: that machine keeps its
# checkpoints (ignored files) but not the runs' result.json (untracked), so without them it would train those again.
#   bash scripts/device_results.sh FILES_AT     (the folder the call's files came back to)
set -eu
archive=$1/results.tgz
[ -f "$archive" ] || { echo "device_results: no $archive" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tar xzf "$archive" -C "$scratch"
for run in "$scratch"/results/*/*/runs/*/; do
  [ -e "$run/result.json" ] || continue
  here=${run#"$scratch"/}
  [ -e "$here/result.json" ] && continue
  mkdir -p "$here" && cp -r "$run". "$here" && chmod -R u+w "$here" && echo "new: ${here%/}"
done
