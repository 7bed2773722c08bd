"""Inverses by Cholesky in Triton: `L⁻¹` of a tile (the gate kernel's `16 × 16` step) and a batch of SPD inverses.

`inverse_cholesky` forms `L⁻¹` by symmetric elimination, one unrolled loop of `C` steps, where a Cholesky then a
substitution would take two loops of `C` steps, each step a few reductions across the program's warps: the gate's
call is markedly faster for it at every head dim (`python -m linattn.bench stages --op vla-gate` times the gate).

`spd_inverse_kernel` is `chunk.spd_inverse` for the gate's `d × d` group starts `A_c = M_c⁻¹` (float32, the
factorisation dtype of bfloat16 and float16 models; d ≤ 128) in one launch, one program a matrix, in `BB × BB`
blocks: a blocked Cholesky `M = L Lᵀ` by block columns (each diagonal block's `L_kk⁻¹` by `inverse_cholesky`, the
other blocks by products with it), then `X = L⁻¹` by block substitution, then `A = Xᵀ X`. The blocks pass between
the steps through a scratch copy in global memory (a program's own, read after a barrier); the products are float32
FMA (`ieee`). `spd_inverse` (cuSOLVER's batched Cholesky, a triangular solve against an identity, a product) is
four launches whose batched calls pass arrays of matrix pointers from the host: on penalty-like matrices
`0.1 I + Σ u uᵀ` this kernel takes a fraction of their GPU time and of their host time, as accurately against
float64. 16-blocks on one warp up to d = 64 (they compile without spills there), 32-blocks on two warps above, which
are faster for short sequences and a little slower at 64K, where the inverses are a smaller share of the call; with
one warp a 32-block spills at d = 128 (`scripts/compile_kernels.py`). The inverses are about a tenth of `vla`'s
forward at 4K tokens, K = 128 (`python -m linattn.bench profile --contenders "VLA triton"`). Float64 factorisations
(`chunk.factor_dtype`) keep `spd_inverse`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv
from linattn.ops.vla.chunk import spd_inverse

MAX_HEAD_DIM = 128


@triton.jit
def inverse_cholesky(b_G, C: tl.constexpr):
    """`L⁻¹` for `L Lᵀ = G`, `G: [C, C]` symmetric positive definite (its lower triangle and diagonal are what
    count), by symmetric Gaussian elimination: step `j` subtracts `m_i = G'[i, j] / G'[j, j]` times row `j` from
    each row `i > j`, of `G'` and of a copy of `I`. The copy ends as `L₁⁻¹` (`G = L₁ D L₁ᵀ`, `L₁` unit lower, `D` the
    pivots `G'[j, j]`), and `L⁻¹ = D^{-1/2} L₁⁻¹`. Row `j` of `G'` is read as its column `j` (the rows and columns
    still to come stay symmetric; what the other entries of row `j` put into the columns before `j` is never read).
    One unrolled loop of `C` steps, where a Cholesky and a substitution would take two loops of `C` steps each, and
    in the gate kernel each step is a few reductions across its warps (eight at d = 128)."""
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
def _offsets(i, j, D: tl.constexpr, BB: tl.constexpr):
    """Offsets and mask of block `(i, j)` (`BB × BB`) of a row-major `D × D` matrix."""
    o_r, o_c = i * BB + tl.arange(0, BB), j * BB + tl.arange(0, BB)
    return o_r[:, None] * D + o_c[None, :], (o_r < D)[:, None] & (o_c < D)[None, :]


@triton.jit
def _load(X, i, j, D: tl.constexpr, BB: tl.constexpr, PAD: tl.constexpr):
    """Block `(i, j)` of a `D × D` matrix; with `PAD`, the identity where it lies past `D` (a diagonal block's padding,
    which keeps it positive definite and its inverse block diagonal)."""
    o, m = _offsets(i, j, D, BB)
    b_x = tl.load(X + o, mask=m, other=0)
    if PAD:
        o_b = i * BB + tl.arange(0, BB)
        b_x += tl.where((o_b[:, None] == o_b[None, :]) & (o_b >= D)[:, None], 1.0, 0.0)
    return b_x


@triton.jit
def spd_inverse_kernel(M, A, W, D: tl.constexpr, BB: tl.constexpr, NB: tl.constexpr):
    """One program per matrix: `A = M⁻¹` for `M, A: [N, D, D]` float32, `M` symmetric positive definite, in blocks
    of `BB × BB` (`NB` a side). `W: [N, NB·BB, NB·BB]` float32 scratch: `L_ik` below the diagonal, `L_kk⁻¹` on it,
    and `X_ik` (`i > k`) of `X = L⁻¹` at block `(k, i)`. Blocks written to `W` are read by other threads only after
    a barrier."""
    i_n = tl.program_id(0)
    S: tl.constexpr = NB * BB
    M += i_n.to(tl.int64) * D * D
    A += i_n.to(tl.int64) * D * D
    W += i_n.to(tl.int64) * S * S
    # 1. M = L Lᵀ by block columns: S_kk = M_kk − Σ_j L_kj L_kjᵀ, L_kk⁻¹ by elimination,
    #    L_ik = (M_ik − Σ_j L_ij L_kjᵀ) L_kk⁻ᵀ                                    [BB, BB] blocks, j < k < i
    for k in range(NB):
        b_S = _load(M, k, k, D, BB, True)
        for j in range(k):
            b_L = _load(W, k, j, S, BB, False)
            b_S -= tl.dot(b_L, tl.trans(b_L), input_precision="ieee")
        b_Li = inverse_cholesky(b_S, BB)
        tl.store(W + _offsets(k, k, S, BB)[0], b_Li)
        for i in range(k + 1, NB):
            b_P = _load(M, i, k, D, BB, False)
            for j in range(k):
                b_P -= tl.dot(
                    _load(W, i, j, S, BB, False), tl.trans(_load(W, k, j, S, BB, False)), input_precision="ieee"
                )
            tl.store(W + _offsets(i, k, S, BB)[0], tl.dot(b_P, tl.trans(b_Li), input_precision="ieee"))
        tl.debug_barrier()
    # 2. X = L⁻¹ by block columns: X_kk = L_kk⁻¹, X_ik = −L_ii⁻¹ Σ_{k ≤ j < i} L_ij X_jk
    for k in range(NB):
        for i in range(k + 1, NB):
            b_P = tl.dot(_load(W, i, k, S, BB, False), _load(W, k, k, S, BB, False), input_precision="ieee")
            for j in range(k + 1, i):
                b_P += tl.dot(_load(W, i, j, S, BB, False), _load(W, k, j, S, BB, False), input_precision="ieee")
            b_X = -tl.dot(_load(W, i, i, S, BB, False), b_P, input_precision="ieee")
            tl.store(W + _offsets(k, i, S, BB)[0], b_X)
            tl.debug_barrier()
    # 3. A = Xᵀ X: A_ij = Σ_{k ≥ i} X_kiᵀ X_kj for i ≥ j, mirrored above the diagonal
    for i in range(NB):
        for j in range(i + 1):
            b_A = tl.zeros([BB, BB], dtype=tl.float32)
            for k in range(i, NB):
                # X_ki and X_kj lie at blocks (i, k) and (j, k)
                b_A += tl.dot(
                    tl.trans(_load(W, i, k, S, BB, False)), _load(W, j, k, S, BB, False), input_precision="ieee"
                )
            o, m = _offsets(i, j, D, BB)
            tl.store(A + o, b_A, mask=m)
            if i != j:
                o, m = _offsets(j, i, D, BB)
                tl.store(A + o, tl.trans(b_A), mask=m)


def spd_inverse_launch(D: int) -> tuple[int, int]:
    """`(BB, warps)`: the block side and warps a program at head dim `D` (the module docstring's table)."""
    return (16, 1) if D <= 64 else (32, 2)


def triton_spd_inverse(M: torch.Tensor) -> torch.Tensor:
    """`chunk.spd_inverse`'s contract: `M⁻¹` of symmetric positive definite `[..., d, d]`. One launch for float32 and
    d ≤ `MAX_HEAD_DIM`; other inputs go to `spd_inverse` (cuSOLVER)."""
    D = M.shape[-1]
    if M.dtype != torch.float32 or D > MAX_HEAD_DIM or M.numel() == 0:
        return spd_inverse(M)
    M = M.contiguous()
    A = torch.empty_like(M)
    BB, warps = spd_inverse_launch(D)
    NB = cdiv(D, BB)
    W = torch.empty(M.numel() // (D * D), NB * BB, NB * BB, dtype=M.dtype, device=M.device)  # scratch
    spd_inverse_kernel[(W.shape[0],)](M, A, W, D=D, BB=BB, NB=NB, num_warps=warps)
    return A
