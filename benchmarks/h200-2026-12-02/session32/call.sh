# Prepared in session 31 for the next session's device calls, from the repository root, one mode a call; README.md
# here says what each is for and what to extract and commit after it.
#
#   bash benchmarks/h200-2026-12-02/session32/call.sh regs    (at most 9 minutes; carry [".variants"])
#     `regs.patch` in a copy of the package (`verify --ops ccq`, its 16-bit score tiles on), then `screen_regs.py`.
#     Here first:
#       rm -rf .variants/regs && mkdir -p .variants/regs && git archive HEAD linattn | tar -x -C .variants/regs
#       git apply --directory=.variants/regs benchmarks/h200-2026-12-02/session32/regs.patch
#   bash benchmarks/h200-2026-12-02/session32/call.sh zoology  (at most 9 minutes; several calls)
#     `zoology-mqar` (session 32): 9 mixers × 4 widths × 3 learning rates, 108 runs, 12 at a time; each call resumes
#     what the warm machine keeps
#   bash benchmarks/h200-2026-12-02/session32/call.sh kla-lm   (about 3 minutes)
#     `kla-lm` (session 32): KLA's byte-level LM beside GDN's (`ccq-lm-length`'s run, copied): one run to train
#   bash benchmarks/h200-2026-12-02/session32/call.sh sniah-seeds|fla-gla|fair
#     session 30's modes (`h200-2026-12-01/session31/call.sh`)
set -u
case "${1:-}" in
  regs)
    # the variant's linattn first on the path (`python -m` puts the working directory first)
    (cd .variants/regs && PYTHONPATH=$PWD timeout 170 python3 -m linattn.bench verify --ops ccq --jobs 15 \
      > "$OUT/verify-ccq.txt" 2>&1)
    grep -v "✓" "$OUT/verify-ccq.txt" | tail -n 8
    PYTHONPATH="$PWD:$PWD/benchmarks/h200-2026-12-01/session31" timeout 360 \
      python3 benchmarks/h200-2026-12-02/session32/screen_regs.py > "$OUT/screen-regs.txt" 2>&1
    cat "$OUT/screen-regs.txt" ;;
  zoology) bash scripts/device_experiment.sh 540 12 "zoology-mqar" ;;
  kla-lm) bash scripts/device_experiment.sh 400 1 "kla-lm" ;;
  *) exec bash benchmarks/h200-2026-12-01/session31/call.sh "$@" ;;
esac
