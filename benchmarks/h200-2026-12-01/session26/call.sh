# Prepared in session 26 (no device time) for the next device calls, one H200 each, from the repository root.
#
#   bash benchmarks/h200-2026-12-01/session26/call.sh screen   (about 6 minutes)
#     the launch settings of VLA's gate-backward kernels (`screen_penalty.py`), then CCQ keeping its chunk-start
#     states at every head dim (`screen_ccq_keep.py`), both on this tree
#   bash benchmarks/h200-2026-12-01/session26/call.sh native   (about 5 minutes; carry [".variants"])
#     the whole verify matrix on session 25's `engine_native.patch` (timed there: GDN 0.98x, CCQ-GDN 0.97x; not merged
#     until this passes). Here first:
#       rm -rf .variants/native && mkdir -p .variants/native && git archive HEAD linattn | tar -x -C .variants/native
#       git apply --directory=.variants/native --include='.variants/native/linattn/*' \
#         benchmarks/h200-2026-12-01/session25/engine_native.patch
#   bash benchmarks/h200-2026-12-01/session26/call.sh speed    (about 6 minutes)
#     after merging what passed: the verify matrix's VLA and CCQ cases, then `linattn run vla-speed --force`.
#   bash benchmarks/h200-2026-12-01/session26/call.sh kla      (at most 9 minutes)
#     the KLA paper's experiments, built in session 26: `kla-speed` alone on the GPU (timings), then `kla-mqar`,
#     `kla-sniah` and `kla-ablation` side by side, three runs each (`scripts/device_experiment.sh`: unfinished runs
#     come back as checkpoints to carry into the next call)
#   bash benchmarks/h200-2026-12-01/session26/call.sh ccq      (at most 9 minutes)
#     `ccq-sniah`, `ccq-mqar` (GLA, GDN, KLA without and with CCQ: six runs each) and `ccq-lm-length` side by side
# Everything comes back in one archive ($OUT holds at most a few files).
set -u
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$R/gpus.txt"
case "${1:-}" in
  screen)
    timeout 390 python3 -u benchmarks/h200-2026-12-01/session26/screen_penalty.py --out "$R" > "$R/screen-penalty.txt" 2>&1
    timeout 180 python3 -u benchmarks/h200-2026-12-01/session26/screen_ccq_keep.py --out "$R" > "$R/screen-ccq-keep.txt" 2>&1
    cat "$R/screen-penalty.txt" "$R/screen-ccq-keep.txt" ;;
  native)
    # `python -m` puts the working directory first on the path: the variant's own linattn
    (cd .variants/native && PYTHONPATH=$PWD timeout 560 python3 -m linattn.bench verify --jobs 15 \
      --json "$R/verify-native.json" > "$R/verify-native.txt" 2>&1)
    grep -v "✓" "$R/verify-native.txt" | tail -n 20 ;;
  speed)
    timeout 150 python3 -m linattn.bench verify --ops ccq,vla --jobs 15 --json "$R/verify.json" > "$R/verify.txt" 2>&1
    timeout 420 python3 -m linattn.cli run vla-speed --device cuda --force > "$R/vla-speed.txt" 2>&1
    tar czf "$R/vla-speed-results.tgz" results/vla-speed/default-cuda
    tail -n 2 "$R/verify.txt"; tail -n 40 "$R/vla-speed.txt" ;;
  kla)
    timeout 100 python3 -m linattn.cli run kla-speed --device cuda > "$R/kla-speed.txt" 2>&1
    tar czf "$R/kla-speed-results.tgz" results/kla-speed
    tail -n 30 "$R/kla-speed.txt"
    bash scripts/device_experiment.sh 420 3 kla-mqar kla-sniah kla-ablation ;;
  ccq) bash scripts/device_experiment.sh 480 6 ccq-sniah ccq-mqar ccq-lm-length ;;
  *) echo "usage: call.sh screen|native|speed|kla|ccq" >&2; exit 2 ;;
esac
tar czf "$OUT/${1}.tgz" -C "$R" .
