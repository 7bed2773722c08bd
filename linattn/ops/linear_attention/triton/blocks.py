"""What GLA's kernels share: block sizes, launch settings, the sub-chunks of the scores, a masked exponential."""

from __future__ import annotations

import triton
import triton.language as tl

from linattn.ops.utils.grid import next_power_of_2

BC = 16  # queries a sub-chunk


@triton.jit
def sub_chunk(i_t, i_i, bos, T, i_h, H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Sub-chunk `i_i` of chunk `i_t`: its rows' token indices within the sequence `[BC]`, their mask, and the
    offsets of their rows in a `[.., H, 1]` layout (multiply by a row's width)."""
    o_c = i_t * BT + i_i * BC + tl.arange(0, BC)
    m_c = o_c < T
    return o_c, m_c, (bos + o_c) * H + i_h


@triton.jit
def masked_exp(x, m):
    """`exp(x)` where `m`, else 0 (`x` never evaluated where masked)."""
    return tl.exp(tl.where(m, x, float("-inf")))


def block(dim: int, most: int = 64) -> int:
    """A tile's width along a head dim: the dim's next power of two, at least 16 (`tl.dot`'s minimum), at most
    `most` (wider dims are looped over in blocks)."""
    return min(most, max(16, next_power_of_2(dim)))


def wide_tile_launch(precision: str) -> dict[str, int]:
    """`num_warps`, `num_stages` of the output and `dq, dk` kernels, by the products' `precision`.

    One-pass (`tf32`, a bfloat16 training call's): 2 warps and 2 stages, which take about half the time of 8 warps
    and 3 stages in both kernels at K = V = 128, T = 64K (`python -m linattn.bench profile --contenders "ours triton
    GLA (per-channel decay)"`). Three-pass (`tf32x3`): 8 warps and 3 stages, which hold the tiles without spilling on
    Hopper, where with 2 warps the output kernel spills 21 KB a thread (`scripts/compile_kernels.py`)."""
    return {"num_warps": 2, "num_stages": 2} if precision == "tf32" else {"num_warps": 8, "num_stages": 3}
