# Session 43's device calls (H200, torch 2.11, Triton 3.6), from the repository root; outputs in call1/ … call4/.
# Call 1: where the host's time goes in CCQ-GDN (host.py: host ms a call, launch costs, cProfile);
PYTHONPATH=$PWD python3 benchmarks/h200-2026-12-04/session43/host.py "$OUT"
# call 2: CCQ's host time by part, run twice (host_parts.py);
PYTHONPATH=$PWD python3 benchmarks/h200-2026-12-04/session43/host_parts.py
PYTHONPATH=$PWD python3 benchmarks/h200-2026-12-04/session43/host_parts.py
# call 3 (the tree before the GPU busy times) and call 4 (with them; its results are results/vla-speed/default-cuda):
timeout 560 python3 -m linattn.cli run vla-speed --device cuda --force > "$OUT/vla-speed.txt" 2>&1
cp results/vla-speed/default-cuda/* "$OUT/"
