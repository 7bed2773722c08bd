"""Integer sizes of Triton launches, computed on the host.

Triton's own `triton.cdiv` and `triton.next_power_of_2` are `ConstexprFunction`s (Triton 3.6 and 3.9): called from
Python each goes through that wrapper, 3.9 µs a call with Triton 3.6 and 2.5 – 3.4 µs with 3.9 against 0.1 µs for
`cdiv` here (2-core AMD EPYC, 2026-12-01, `benchmarks/h200-2026-12-01/session29/host_time.py`), and a CCQ forward +
backward sized its launches with 17 such calls.
Kernels keep `tl.cdiv`.
"""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """`⌈a / b⌉` for integers, `b > 0`."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two `≥ n` for `n ≥ 1` (0 for `n ≤ 0`), as `triton.next_power_of_2`."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()
