# Session 28's device calls, from the repository root, one mode a call (session 27's call.sh says why the
# experiments run one after another). Run this session:
#
#   bash benchmarks/h200-2026-12-01/session28/call.sh gla-kla   (at most 9.5 minutes)
#     GLA's decay gradient from the chunk-end states (`linear_attention/triton/cumsum.py`; session 27's call failed
#     4 float32 cases on `dg` alone): `verify --ops gla` (38 cases), ours beside fla's `chunk_gla` (fla from a
#     carried wheel, `.whl/`), then kla-mqar and kla-ablation in what is left of 540 s
#   bash benchmarks/h200-2026-12-01/session28/call.sh ccq       (at most 9 minutes)
#     ccq-mqar (copies GDN and KLA from kla-mqar: extract the first call's results.tgz here before), then
#     ccq-lm-length
#   (then ccq-gla.sh: CCQ on GLA again after its dtype fix)
#
# Prepared for the next session (extract each call's results.tgz here before the next; an unfinished run's
# checkpoint comes back in pieces, `scripts/device_experiment.sh` says how to carry it):
#
#   bash benchmarks/h200-2026-12-01/session28/call.sh sniah-kla (at most 9 minutes)
#     kla-sniah: GDN and KLA (Mamba-2 is committed), trained at T = 1024
#   bash benchmarks/h200-2026-12-01/session28/call.sh sniah-ccq (at most 9 minutes)
#     ccq-sniah: GLA, CCQ-GLA, CCQ-GDN, CCQ-KLA (GDN and KLA copied from kla-sniah)
#   bash benchmarks/h200-2026-12-01/session28/call.sh seeds     (at most 9 minutes)
#     kla-mqar from two more seeds (`--seeds 3`: six new runs at once; KLA's rows rest on one seed, and KLA learned
#     late there: 0.02 at step 4,000 against GDN's 0.71)
#   bash benchmarks/h200-2026-12-01/session28/call.sh fair      (at most 9 minutes)
#     kla-mqar with the learning rate chosen per mixer (`--protocol fair`: 3e-4 and 3e-3 trained, 1e-3 copied)
#   bash benchmarks/h200-2026-12-01/session28/call.sh gla       (at most 9 minutes)
#     `verify --ops gla` on GLA's one-pass rule (merged untimed, accuracy from the emulated H200), screen_gla.py
#     (the rule against three passes, fla's chunk_gla beside), then ccq-mqar's CCQ-GLA run (unfinished this
#     session: 0.023 at step 9,000 of 10,000 when the call ended) and ccq-lm-length again (now testing the weights
#     with the lowest validation loss; this session's run, on the last weights, had overfit and was not kept)
set -u
with_fla() {
  export PYTHONPATH="$PWD"
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="$PWD:/tmp/site"
  fi
}
case "${1:-}" in
  gla-kla)
    with_fla
    start=$SECONDS
    timeout 150 python3 -m linattn.bench verify --ops gla --jobs 15 > "$OUT/verify-gla.txt" 2>&1
    grep -v "✓" "$OUT/verify-gla.txt" | tail -n 8
    timeout 90 python3 -m linattn.bench ops --only "triton GLA,fla GLA" --no-batch-sweep --lengths 4096,16384,65536 \
      --json "$OUT/ops-gla.json" > "$OUT/ops-gla.txt" 2>&1
    grep -v "^# measured" "$OUT/ops-gla.txt" | tail -n 20
    PYTHONPATH="$PWD" bash scripts/device_experiment.sh $((540 - (SECONDS - start))) 3 kla-mqar kla-ablation ;;
  ccq) bash scripts/device_experiment.sh 530 4 ccq-mqar ccq-lm-length ;;
  sniah-kla) bash scripts/device_experiment.sh 540 2 kla-sniah ;;
  sniah-ccq) bash scripts/device_experiment.sh 540 4 ccq-sniah ;;
  seeds) bash scripts/device_experiment.sh 540 6 "kla-mqar --seeds 3" ;;
  fair) bash scripts/device_experiment.sh 540 6 "kla-mqar --protocol fair" ;;
  gla)
    with_fla
    start=$SECONDS
    timeout 100 python3 -m linattn.bench verify --ops gla --jobs 15 > "$OUT/verify-gla.txt" 2>&1
    grep -v "✓" "$OUT/verify-gla.txt" | tail -n 8
    timeout 200 python3 benchmarks/h200-2026-12-01/session28/screen_gla.py > "$OUT/screen-gla.txt" 2>&1
    tail -n 12 "$OUT/screen-gla.txt"
    PYTHONPATH="$PWD" bash scripts/device_experiment.sh $((540 - (SECONDS - start))) 4 "ccq-mqar --mixers ccq-gla" \
      ccq-lm-length ;;
  *) echo "usage: call.sh gla-kla|ccq|sniah-kla|sniah-ccq|seeds|fair|gla" >&2; exit 2 ;;
esac
