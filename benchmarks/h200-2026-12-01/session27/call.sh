# Prepared in session 27 for the next device calls: the KLA and CCQ training experiments, one experiment after
# another (`scripts/device_experiment.sh`), so that each finishes inside a call and the later ones copy the GDN and
# KLA runs the earlier ones trained (`runner.find_same_run`). From the repository root, one mode a call:
#
#   bash benchmarks/h200-2026-12-01/session27/call.sh gla    (about 5 minutes; first: GLA and CCQ-GLA run on them)
#     GLA's per-channel kernels (built in session 27, interpreter-tested only): `verify --ops gla` (38 cases), then
#     `bench ops --only GLA` (ours triton, ours chunk, fla's chunk_gla, beside SDPA); if a case fails, set
#     `backend="chunk"` for GLA before the ccq calls. fla comes from a carried wheel (`pip download --no-deps
#     fla-core -d .whl` here, then the call with carry [".whl"]); without one its row says fla is missing
#   bash benchmarks/h200-2026-12-01/session27/call.sh kla    (at most 9 minutes)
#     kla-mqar (KLA, GDN, Mamba-2: 320 – 400 thousand tokens a second a run when three share the GPU, so about
#     270 s for 10,000 steps), then kla-ablation (copies KLA and GDN; GDN with raw keys already finished: committed)
#   bash benchmarks/h200-2026-12-01/session27/call.sh sniah  (at most 9 minutes)
#     kla-sniah (Mamba-2 already finished: committed), then ccq-sniah (copies GDN and KLA)
#   bash benchmarks/h200-2026-12-01/session27/call.sh ccq    (at most 9 minutes)
#     ccq-mqar (copies GDN and KLA from kla-mqar), then ccq-lm-length
#
# Between calls: extract the call's results.tgz here (`tar xzf results.tgz`), so that the next call's tree carries
# them; commit them with `linattn report` and `linattn tables --write README.md`.
set -u
case "${1:-}" in
  gla)
    export PYTHONPATH="$PWD"
    if ls .whl/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      export PYTHONPATH="$PWD:/tmp/site"
    fi
    timeout 300 python3 -m linattn.bench verify --ops gla --jobs 15 --json "$OUT/verify-gla.json" > "$OUT/verify-gla.txt" 2>&1
    grep -v "✓" "$OUT/verify-gla.txt" | tail -n 12
    timeout 240 python3 -m linattn.bench ops --only GLA --no-batch-sweep --json "$OUT/ops-gla.json" > "$OUT/ops-gla.txt" 2>&1
    tail -n 30 "$OUT/ops-gla.txt" ;;
  kla) bash scripts/device_experiment.sh 540 3 kla-mqar kla-ablation ;;
  sniah) bash scripts/device_experiment.sh 540 4 kla-sniah ccq-sniah ;;
  ccq) bash scripts/device_experiment.sh 540 4 ccq-mqar ccq-lm-length ;;
  *) echo "usage: call.sh gla|kla|sniah|ccq" >&2; exit 2 ;;
esac
