# Session 42's device calls, from the repository root:  bash benchmarks/h200-2026-12-03/session42/call.sh
# Call 1 (call1/) ran an earlier form of the patch (a chunked `rows_kept`) with a bug in this script: `python -m` run
# from the repository root put the root ahead of PYTHONPATH, so its "old" profiles (here profile-v1-b, -d) ran the new
# tree too; its profile-keep128.txt set KEEP_STATES_MAX_K = 128. Call 2 (call2/) is this script as it stands.
# 1. `verify --ops ccq`: CCQ's cases on the H200 against float64 (its training cases take the kept read);
# 2. `bench profile` of CCQ-GDN and GDN at K = 32, 64, 128, T = 8K and 64K, forward and forward + backward, on this
#    tree and on a copy without keep-read.patch (run from inside the copy: `python -m` puts the working directory
#    first on the path, ahead of PYTHONPATH), alternating, twice;
# 3. `linattn run vla-speed --device cuda --force` (issue 5's table), unless the first argument is `nospeed`.
set -u
export PYTHONUNBUFFERED=1
D=benchmarks/h200-2026-12-03/session42
root=$PWD
rm -rf /tmp/old && mkdir -p /tmp/old && cp -r linattn /tmp/old/ && (cd /tmp/old && patch -s -p1 -R < "$root/$D/keep-read.patch") || exit 1
timeout 150 python3 -m linattn.bench verify --ops ccq --jobs 15 > "$OUT/verify-ccq.txt" 2>&1
tail -n 3 "$OUT/verify-ccq.txt"
for round in 1 2; do
  for tree in new old; do
    dir=$root; [ $tree = old ] && dir=/tmp/old
    (cd "$dir" && timeout 90 python3 -m linattn.bench profile --contenders "CCQ-GDN,GDN (delta_rule)" \
      --K 32,64,128 --lengths 8192,65536 > "$OUT/profile-$tree-$round.txt" 2>&1)
    echo "== $tree $round $(grep -c rows_kept "$OUT/profile-$tree-$round.txt") rows_kept"
    grep -E "^## |^Per call" "$OUT/profile-$tree-$round.txt" | paste - - | sed -E 's/, torch.bfloat16.*busy/ busy/; s/ms, the self.*/ms/'
  done
done
[ "${1:-}" = nospeed ] && exit 0
timeout 330 python3 -m linattn.cli run vla-speed --device cuda --force > "$OUT/vla-speed.txt" 2>&1
tar czf "$OUT/vla-speed-results.tgz" results/vla-speed/default-cuda
tail -n 45 "$OUT/vla-speed.txt"
