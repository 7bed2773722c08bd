# Session 34's device calls, from the repository root, one mode a call; README.md here says what each gave.
#
#   bash benchmarks/h200-2026-12-02/session34/call.sh gla   (about 7 minutes; carry [".whl"])
#     GLA's launch settings from session33/screen_gla_launch.py merged: `verify --ops gla`, then ours beside fla's
#     `chunk_gla` at 16K and 64K; then VLA's decode path against the float64 loop (session33/check_vla_decode.py)
#   bash benchmarks/h200-2026-12-02/session34/call.sh ccq   (about 8 minutes)
#     CCQ's read kernels under other warps and stages (`screen_launch.py --op ccq`; run as screen_ccq_launch.py, the
#     same code before `--op vla` came in), then `bench decode`
#   bash benchmarks/h200-2026-12-02/session34/call.sh gla-fla   (about 8 minutes; carry [".whl"])
#     the merged GLA settings at K = 32 and 64 against those they replaced (check_gla_small_k.py), then ours beside
#     fla's `chunk_gla` in one run (the `gla` call's ran out of time in fla's autotuning)
#   bash benchmarks/h200-2026-12-02/session34/call.sh vla   (about 5 minutes)
#     VLA's gate kernels under other warps and stages at K = 128 (`screen_launch.py --op vla`)
#   bash benchmarks/h200-2026-12-02/session34/call.sh gla-diag   (about 6 minutes; carry [".variants"]; for session 35)
#     GLA's scores and `dq, dk` kernels with their diagonal blocks in [16, 16] tiles (diag-blocks.patch), built here by
#       rm -rf .variants/diag && mkdir -p .variants/diag && git archive HEAD linattn | tar -x -C .variants/diag
#       git apply --directory=.variants/diag benchmarks/h200-2026-12-02/session34/diag-blocks.patch
#     `verify --ops gla` on it, then `bench ops` of GLA: the library, the variant, the library again
#   bash benchmarks/h200-2026-12-02/session34/call.sh gdn [K]   (at most 9 minutes; prepared for session 35)
#     the delta-rule engine's kernels (GDN's training call; VLA and KLA run on them too) under 1 - 8 warps and 1 - 3
#     stages at K = 128 (or K), the kernels in the order of their time
set -u
case "${1:-}" in
  gla)
    export PYTHONPATH="$PWD"
    if ls .whl/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      export PYTHONPATH="$PWD:/tmp/site"
    fi
    timeout 170 python3 -m linattn.bench verify --ops gla --jobs 15 > "$OUT/verify-gla.txt" 2>&1
    grep -v "✓" "$OUT/verify-gla.txt" | tail -n 8
    timeout 200 python3 -m linattn.bench ops --only "triton GLA,fla GLA" --no-batch-sweep --lengths 16384,65536 \
      --json "$OUT/ops-gla.json" > "$OUT/ops-gla.txt" 2>&1
    grep -v "^# measured" "$OUT/ops-gla.txt" | tail -n 12
    timeout 150 python3 benchmarks/h200-2026-12-02/session33/check_vla_decode.py > "$OUT/check-vla-decode.txt" 2>&1
    cat "$OUT/check-vla-decode.txt" ;;
  ccq)
    PYTHONPATH="$PWD" timeout 360 python3 benchmarks/h200-2026-12-02/session34/screen_launch.py --op ccq --budget-s 300 \
      > "$OUT/screen-ccq-launch.txt" 2>&1
    cat "$OUT/screen-ccq-launch.txt"
    PYTHONPATH="$PWD" timeout 120 python3 -m linattn.bench decode --json "$OUT/decode.json" > "$OUT/decode.txt" 2>&1
    grep -v "^# measured" "$OUT/decode.txt" | tail -n 15 ;;
  gla-fla)
    export PYTHONPATH="$PWD"
    timeout 150 python3 benchmarks/h200-2026-12-02/session34/check_gla_small_k.py > "$OUT/check-gla-small-k.txt" 2>&1
    cat "$OUT/check-gla-small-k.txt"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="$PWD:/tmp/site"
    timeout 330 python3 -m linattn.bench ops --only "triton GLA,fla GLA" --no-batch-sweep --lengths 16384,65536 \
      --json "$OUT/ops-gla-fla.json" > "$OUT/ops-gla-fla.txt" 2>&1
    grep -v "^# measured" "$OUT/ops-gla-fla.txt" | tail -n 12 ;;
  vla)
    PYTHONPATH="$PWD" timeout 330 python3 benchmarks/h200-2026-12-02/session34/screen_launch.py --op vla \
      --head-dims 128 --budget-s 270 > "$OUT/screen-vla-launch.txt" 2>&1
    cat "$OUT/screen-vla-launch.txt" ;;
  gla-diag)
    (cd .variants/diag && PYTHONPATH=$PWD timeout 170 python3 -m linattn.bench verify --ops gla --jobs 15 \
      > "$OUT/verify-gla-diag.txt" 2>&1)
    grep -v "✓" "$OUT/verify-gla-diag.txt" | tail -n 6
    for tree in . .variants/diag .; do
      (cd "$tree" && PYTHONPATH=$PWD timeout 100 python3 -m linattn.bench ops --only "triton GLA" --no-batch-sweep \
        --lengths 16384,65536) > /tmp/ops.txt 2>&1
      echo "## $tree" >> "$OUT/ops-gla-diag.txt"
      grep -v "^# measured" /tmp/ops.txt >> "$OUT/ops-gla-diag.txt"
    done
    cat "$OUT/ops-gla-diag.txt" ;;
  gdn)
    PYTHONPATH="$PWD" timeout 530 python3 benchmarks/h200-2026-12-02/session34/screen_launch.py --op gdn \
      --head-dims "${2:-128}" --warps 1,2,4,8 --budget-s 470 > "$OUT/screen-gdn-launch-${2:-128}.txt" 2>&1
    cat "$OUT/screen-gdn-launch-${2:-128}.txt" ;;
  *) echo "usage: call.sh gla|ccq|gla-fla|vla|gdn [K]" >&2; exit 2 ;;
esac
