# Prepared in session 33 for the next session's device calls, from the repository root, one mode a call; README.md
# here says what each is for.
#
#   bash benchmarks/h200-2026-12-02/session33/call.sh gla      (about 8 minutes; carry [".whl"])
#     where our GLA's time goes beside fla's `chunk_gla` (2.5x ours from 16K on, session 33): `bench profile` of both
#     at 16K and 64K, then `screen_gla_launch.py` (our GLA kernels' warps and stages, the state walk's tile)
#   bash benchmarks/h200-2026-12-02/session33/call.sh decode   (about 4 minutes)
#     VLA's decode path (session 33: the gate's step kernel, then the delta rule's) against the float64 token loop
#     (`check_vla_decode.py`), then `bench decode`: GDN's and VLA's steps beside SDPA's KV cache, at 4K - 64K
#   bash benchmarks/h200-2026-12-02/session33/call.sh zoology  (at most 9 minutes; several calls)
#     session 32's `zoology-mqar` (`session32/call.sh zoology`)
set -u
case "${1:-}" in
  gla)
    export PYTHONPATH="$PWD"
    if ls .whl/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      export PYTHONPATH="$PWD:/tmp/site"
    fi
    timeout 240 python3 -m linattn.bench profile --contenders "ours triton GLA (per-channel decay),fla GLA" \
      --lengths 16384,65536 --json "$OUT/profile-gla.json" > "$OUT/profile-gla.txt" 2>&1
    head -n 150 "$OUT/profile-gla.txt"
    timeout 300 python3 benchmarks/h200-2026-12-02/session33/screen_gla_launch.py > "$OUT/screen-gla-launch.txt" 2>&1
    cat "$OUT/screen-gla-launch.txt" ;;
  decode)
    PYTHONPATH="$PWD" timeout 200 python3 benchmarks/h200-2026-12-02/session33/check_vla_decode.py \
      > "$OUT/check-vla-decode.txt" 2>&1
    cat "$OUT/check-vla-decode.txt"
    PYTHONPATH="$PWD" timeout 300 python3 -m linattn.bench decode --json "$OUT/decode.json" > "$OUT/decode.txt" 2>&1
    grep -v "^# measured" "$OUT/decode.txt" | tail -n 15 ;;
  zoology) exec bash benchmarks/h200-2026-12-02/session32/call.sh zoology ;;
  *) echo "usage: call.sh gla|decode|zoology" >&2; exit 2 ;;
esac
