"""Inverses by Cholesky in Triton: `L⁻¹` of a tile (the gate kernel's `16 × 16` step) and a batch of SPD inverses.

`spd_inverse_kernel` is `chunk.spd_inverse` for the gate's `d × d` group starts `A_c = M_c⁻¹` (float32, d ≤ 32)
in one launch, one program (one warp) a matrix: the tile padded with the identity, `L⁻¹` by `inverse_cholesky`
(d steps of substitution), then `A = L⁻ᵀ L⁻¹` (float32 FMA products). `spd_inverse` (cuSOLVER's batched Cholesky,
a triangular solve against an identity, a product) is four launches whose batched calls pass arrays of matrix
pointers from the host. A scratch micro-benchmark on the H200 (H = 16, float32, 2026-11-30; `BENCHMARKS.md`), ms a
call with the host's time:

| d | matrices (tokens) | `spd_inverse` | this kernel | `cholesky_ex` + `cholesky_inverse` | `inv_ex` |
|---:|---:|---:|---:|---:|---:|
| 32 | 128 (4K) | 0.22 | 0.035 | 0.51 | 0.60 |
| 32 | 2,048 (64K) | 0.20 | 0.060 | 0.37 | 0.39 |
| 64 | 128 | 0.24 | 0.11 (8 warps) | 0.44 | 0.65 |
| 64 | 2,048 | 0.58 | 1.28 (8 warps) | 0.96 | 2.05 |

so wider heads (a program walks d sequential steps, each a reduction across its warps) and float64 factorisations
(`chunk.factor_dtype`) keep `spd_inverse`. Errors against float64: 1.9e-7 here, 1.5e-7 by cuSOLVER.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.vla.chunk import spd_inverse

MAX_HEAD_DIM = 32


@triton.jit
def inverse_cholesky(b_G, C: tl.constexpr, PRODUCT: tl.constexpr):
    """`L⁻¹` for `L Lᵀ = G`, `G: [C, C]` symmetric positive definite (its lower triangle is read). `PRODUCT`: the
    triangular inverse as a product of `log₂ C` factors (C a power of two) rather than by substitution."""
    o_c = tl.arange(0, C)
    # Cholesky by columns: L[:, j] = G'[:, j] / √G'[j, j], then G' −= L[:, j] L[:, j]ᵀ (rows ≥ j)
    b_L = tl.zeros([C, C], dtype=tl.float32)
    for j in range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)  # [C]
        b_col = tl.where(o_c >= j, b_col, 0) / tl.sqrt(tl.sum(tl.where(o_c == j, b_col, 0)))
        b_L = tl.where(o_c[None, :] == j, b_col[:, None], b_L)
        b_G -= b_col[:, None] * b_col[None, :]
    if PRODUCT:
        # L = diag(ℓ) (I + N), N strictly lower and nilpotent (N^C = 0), so that
        # L⁻¹ = (I + N)⁻¹ diag(ℓ)⁻¹ = (I − N)(I + N²)(I + N⁴) ⋯ (I + N^{C/2}) diag(ℓ)⁻¹: 2 (log₂ C − 1) products
        # (float32 FMA) where the substitution takes C steps, each a reduction across the warps
        tl.static_assert(C <= 128, "the factors below cover chunks of up to 128 tokens")
        eye = o_c[:, None] == o_c[None, :]
        b_I = tl.where(eye, 1.0, 0.0)  # [C, C]
        b_l = tl.sum(tl.where(eye, b_L, 0), 1)  # [C] the diagonal ℓ
        b_N = tl.where(o_c[:, None] > o_c[None, :], b_L / b_l[:, None], 0)
        b_Li = b_I - b_N
        for s in tl.static_range(1, 7):
            if (1 << s) < C:
                # [C, C] @ [C, C] -> [C, C]: N^(2^s), then the factor I + N^(2^s)
                b_N = tl.dot(b_N, b_N, input_precision="ieee")
                b_Li = tl.dot(b_Li, b_I + b_N, input_precision="ieee")
        return b_Li / b_l[None, :]
    # forward substitution by rows: L⁻¹[i, :] = (e_i − Σ_{k<i} L[i, k] L⁻¹[k, :]) / L[i, i]
    b_Li = tl.zeros([C, C], dtype=tl.float32)
    for i in range(C):
        b_row = tl.sum(tl.where(o_c[:, None] == i, b_L, 0), 0)  # [C]
        b_r = tl.where(o_c == i, 1.0, 0.0) - tl.sum(tl.where(o_c < i, b_row, 0)[:, None] * b_Li, 0)
        b_Li = tl.where(o_c[:, None] == i, (b_r / tl.sum(tl.where(o_c == i, b_row, 0)))[None, :], b_Li)
    return b_Li


@triton.jit
def spd_inverse_kernel(M, A, D: tl.constexpr, BD: tl.constexpr):
    """One program per matrix: `A = M⁻¹` for `M, A: [N, D, D]` float32, `M` symmetric positive definite (its lower
    triangle is read); `L⁻¹` by substitution."""
    i_n = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    m_dd = m_d[:, None] & m_d[None, :]
    o_M = i_n.to(tl.int64) * D * D + o_d[:, None] * D + o_d[None, :]
    # [BD, BD] M, with the identity on the padding (which keeps the tile positive definite and its inverse block
    # diagonal)
    b_M = tl.load(M + o_M, mask=m_dd, other=0)
    b_M += tl.where((o_d[:, None] == o_d[None, :]) & ~m_d[:, None], 1.0, 0.0)
    b_Li = inverse_cholesky(b_M, BD, False)
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
