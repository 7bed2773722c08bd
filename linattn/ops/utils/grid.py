"""Integer sizes of Triton launches, computed on the host.

Triton's own `triton.cdiv` and `triton.next_power_of_2` are `ConstexprFunction`s (Triton 3.6 and 3.9): called from
Python each goes through that wrapper, some thirty times as long as `cdiv` here, and a CCQ forward + backward sizes
its launches with 17 such calls (`python -m linattn.bench profile --host` shows where the host's time goes).
Kernels keep `tl.cdiv`.
"""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """`⌈a / b⌉` for integers, `b > 0`."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two `≥ n` for `n ≥ 1` (0 for `n ≤ 0`), as `triton.next_power_of_2`."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()
