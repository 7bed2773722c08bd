#!/usr/bin/env bash
# On the lent GPU machine: check the Triton backend against float64, then benchmark it beside SDPA and fla.
#   bash scripts/device_bench.sh [verify] [ops] [decode] [stages]   (the first three by default; carry .whl for fla)
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
status=0
for step in ${@:-verify ops decode}; do
  extra=()
  [ "$step" = verify ] && extra=(--jobs 12)  # compiling each head size's kernels is CPU work: spread it
  python3 -m linattn.bench "$step" "${extra[@]}" --json "$OUT/$step.json" 2>&1 | tee "$OUT/$step.txt" | tail -n 90
  rc=${PIPESTATUS[0]}
  echo "== bench $step: exit $rc"
  [ "$status" -eq 0 ] && status=$rc
done
exit "$status"
