# Session 35's device calls, from the repository root, one mode a call; README.md here says what each gave.
#
#   bash benchmarks/h200-2026-12-02/session35/call.sh gdn K KERNEL...   (about a minute a kernel)
#     the delta-rule engine's kernels under 1 - 8 warps and 1 - 3 stages at head dim K (session34/screen_launch.py
#     --op gdn), one process a kernel: a setting that faults spoils its process's CUDA context (session34's `call.sh
#     gdn` lost every kernel after `state_fwd_kernel`'s 8-warp rows so)
set -u
case "${1:-}" in
  gdn)
    K=$2; shift 2
    for kernel in "$@"; do
      PYTHONPATH="$PWD" timeout 150 python3 benchmarks/h200-2026-12-02/session34/screen_launch.py --op gdn \
        --head-dims "$K" --warps 1,2,4,8 --kernels "$kernel" --tag="-$K-$kernel" --budget-s 120 \
        > /tmp/screen.txt 2>&1
      grep -v "Warning\|_warn_once" /tmp/screen.txt >> "$OUT/screen-gdn-launch-$K.txt"
    done
    cat "$OUT/screen-gdn-launch-$K.txt" ;;
  *) echo "usage: call.sh gdn K KERNEL..." >&2; exit 2 ;;
esac
