"""Benchmarks (`python -m linattn.bench …`). Speed is measured here, side by side in one run, never in tests."""
