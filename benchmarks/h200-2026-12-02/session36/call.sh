# Prepared in session 36 for the next session's device calls, from the repository root; README.md here says why.
#
#   bash benchmarks/h200-2026-12-02/session36/call.sh probe    (at most 9 minutes)
#     concurrency_probe.py four times (GDN at d 128, `zoology-mqar`'s model): 12 runs at once with the loss of
#     session 36's calls (the head everywhere) and with today's (at the targets), then under CUDA MPS 12 and 16 at
#     once; then `zoology-mqar` for the rest of the call, under MPS with the faster job count if
#     MPS gave at least 1.2x the steps a second, else as before
#   bash benchmarks/h200-2026-12-02/session36/call.sh zoology [JOBS] [SECONDS]   (MPS on, 12 jobs, 540 s)
#     `zoology-mqar` under MPS (falls back to no MPS when the daemon does not work), for the later calls
set -u
source scripts/cuda_mps.sh
probe() { PYTHONPATH="$PWD" timeout 150 python3 benchmarks/h200-2026-12-02/session36/concurrency_probe.py "$@"; }
case "${1:-}" in
  probe)
    start=$SECONDS
    echo "| tag | model | loss | jobs | ms a step (each run) | steps/s (all runs) | wall s |"
    echo "|---|---|---|---:|---|---:|---:|"
    probe --jobs 12 --tag before --loss all
    probe --jobs 12 --tag no-mps
    jobs=12 use_mps=0
    if mps_start; then
      probe --jobs 12 --tag mps
      probe --jobs 16 --tag mps
      read -r use_mps jobs < <(python3 - "$OUT/concurrency-probe.jsonl" << 'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
base = next((r["steps_per_s_all"] for r in rows if r["tag"] == "no-mps"), None)
mps = [r for r in rows if r["tag"] == "mps"]
best = max(mps, key=lambda r: r["steps_per_s_all"], default=None)
ok = base is not None and best is not None and best["steps_per_s_all"] >= 1.2 * base
print(1 if ok else 0, best["jobs"] if ok else 12)
EOF
      )
      use_mps=${use_mps:-0} jobs=${jobs:-12}
      [ "$use_mps" = 1 ] || mps_stop
    fi
    echo "== zoology-mqar: mps $use_mps, $jobs jobs"
    bash scripts/device_experiment.sh $((550 - (SECONDS - start))) "$jobs" "zoology-mqar"
    if [ "$use_mps" = 1 ]; then mps_stop; fi ;;
  zoology)
    mps_start
    bash scripts/device_experiment.sh "${3:-540}" "${2:-12}" "zoology-mqar"
    mps_stop ;;
  *) echo "usage: call.sh probe | zoology [JOBS] [SECONDS]" >&2; exit 2 ;;
esac
