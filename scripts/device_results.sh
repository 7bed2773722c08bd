#!/usr/bin/env bash
# Put what a device call finished into this tree: each experiment's report and its archive of finished runs
# (`runs.jsonl.gz`, a superset of the one the call was sent), from the call's results.tgz
# (`scripts/device_experiment.sh` writes it). The working folders of unfinished runs are left out: their
# checkpoints come back apart, as checkpoints.tgz.* pieces.
#   bash scripts/device_results.sh FILES_AT     (the folder the call's files came back to)
set -eu
archive=$1/results.tgz
[ -f "$archive" ] || { echo "device_results: no $archive" >&2; exit 2; }
tar xzvf "$archive" --exclude='results/*/*/runs' | grep -v '/$' | sed 's/^/new: /'
