"""Inverses by Cholesky in Triton: `L⁻¹` of a tile (the gate kernel's `16 × 16` step) and a batch of SPD inverses.

`inverse_cholesky` forms `L⁻¹` by symmetric elimination, one unrolled loop of `C` steps (a Cholesky then a
substitution took two loops of `C` steps, each step a few reductions across the program's warps). On the H200
(bf16 `u`, B = 1, H = 16, 2026-11-30, night; scratch `gate_warps.py`, `BENCHMARKS.md`) one gate call at 64K fell
0.93 → 0.52 ms at d = 32 (one warp), 2.96 → 2.39 at d = 64 (four warps, against the product form of `L⁻¹` used
there before) and 10.0 → 7.4 at d = 128 (eight warps).

`spd_inverse_kernel` is `chunk.spd_inverse` for the gate's `d × d` group starts `A_c = M_c⁻¹` (float32, d ≤ 32)
in one launch, one program (one warp) a matrix: the tile padded with the identity, `L⁻¹` by `inverse_cholesky`,
then `A = L⁻ᵀ L⁻¹` (float32 FMA products). `spd_inverse` (cuSOLVER's batched Cholesky, a triangular solve against
an identity, a product) is four launches whose batched calls pass arrays of matrix pointers from the host. On the
H200 (H = 16, float32; `gate_warps.py`, 2026-11-30, night), ms a call with the host's time:

| d | matrices (tokens) | `spd_inverse` | this kernel (substitution before) |
|---:|---:|---:|---:|
| 32 | 128 (4K) | 0.15 – 0.21 | 0.024 (0.025) |
| 32 | 2,048 (64K) | 0.16 – 0.24 | 0.043 (0.063) |

Earlier (2026-11-30, substitution), `cholesky_ex` + `cholesky_inverse` took 0.37 – 0.51 ms and `inv_ex`
0.39 – 0.60; at d = 64 the kernel (eight warps) took 1.28 ms for 2,048 matrices against cuSOLVER's 0.58, so wider
heads (a program walks d sequential steps, each a reduction across its warps) and float64 factorisations
(`chunk.factor_dtype`) keep `spd_inverse`. Errors against float64: 2.0e-7 here, 1.8e-7 by cuSOLVER.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.vla.chunk import spd_inverse

MAX_HEAD_DIM = 32


@triton.jit
def inverse_cholesky(b_G, C: tl.constexpr):
    """`L⁻¹` for `L Lᵀ = G`, `G: [C, C]` symmetric positive definite (its lower triangle and diagonal are what
    count), by symmetric Gaussian elimination: step `j` subtracts `m_i = G'[i, j] / G'[j, j]` times row `j` from
    each row `i > j`, of `G'` and of a copy of `I`. The copy ends as `L₁⁻¹` (`G = L₁ D L₁ᵀ`, `L₁` unit lower, `D` the
    pivots `G'[j, j]`), and `L⁻¹ = D^{-1/2} L₁⁻¹`. Row `j` of `G'` is read as its column `j` (the rows and columns
    still to come stay symmetric; what the other entries of row `j` put into the columns before `j` is never read).
    One unrolled loop of `C` steps, where a Cholesky and a substitution took two loops of `C` steps each: in the gate
    kernel at d = 128 (eight warps, each step reductions across them) the gate's call at 64K took 7.4 ms against 10.0
    (`BENCHMARKS.md`, 2026-11-30, night)."""
    o_c = tl.arange(0, C)
    b_Li = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)  # [C, C]
    b_p = tl.zeros([C], dtype=tl.float32)  # [C] the pivots
    for j in tl.static_range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)  # [C] G'[:, j]
        p = tl.sum(tl.where(o_c == j, b_col, 0))
        b_m = tl.where(o_c > j, b_col / p, 0)  # [C] the multipliers, 0 on rows ≤ j
        b_row = tl.sum(tl.where(o_c[:, None] == j, b_Li, 0), 0)  # [C] row j of the copy, final from here on
        b_G -= b_m[:, None] * b_col[None, :]
        b_Li -= b_m[:, None] * b_row[None, :]
        b_p = tl.where(o_c == j, p, b_p)
    return b_Li / tl.sqrt(b_p)[:, None]


@triton.jit
def spd_inverse_kernel(M, A, D: tl.constexpr, BD: tl.constexpr):
    """One program per matrix: `A = M⁻¹` for `M, A: [N, D, D]` float32, `M` symmetric positive definite."""
    i_n = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    m_dd = m_d[:, None] & m_d[None, :]
    o_M = i_n.to(tl.int64) * D * D + o_d[:, None] * D + o_d[None, :]
    # [BD, BD] M, with the identity on the padding (which keeps the tile positive definite and its inverse block
    # diagonal)
    b_M = tl.load(M + o_M, mask=m_dd, other=0)
    b_M += tl.where((o_d[:, None] == o_d[None, :]) & ~m_d[:, None], 1.0, 0.0)
    b_Li = inverse_cholesky(b_M, BD)
    # [BD, BD]ᵀ @ [BD, BD] -> [BD, BD]: M⁻¹ = L⁻ᵀ L⁻¹
    b_A = tl.dot(tl.trans(b_Li), b_Li, input_precision="ieee")
    tl.store(A + o_M, b_A, mask=m_dd)


def triton_spd_inverse(M: torch.Tensor) -> torch.Tensor:
    """`chunk.spd_inverse`'s contract: `M⁻¹` of symmetric positive definite `[..., d, d]`. One launch for float32 and
    d ≤ `MAX_HEAD_DIM`; other inputs go to `spd_inverse` (cuSOLVER)."""
    D = M.shape[-1]
    if M.dtype != torch.float32 or D > MAX_HEAD_DIM or M.numel() == 0:
        return spd_inverse(M)
    M = M.contiguous()
    A = torch.empty_like(M)
    BD = max(16, triton.next_power_of_2(D))
    # one warp: its reductions need no barrier (sm_90, Triton 3.6: 197 registers, no spills)
    spd_inverse_kernel[(M.numel() // (D * D),)](M, A, D=D, BD=BD, num_warps=1)
    return A
