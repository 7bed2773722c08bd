"""VLA's gate on the GPU: the rows `x_t -> A_t x_t` inside each group of chunks as one Triton kernel.

`../chunk.py` holds the math. Per group of `R` chunks of 16 tokens, one program keeps `A` (`d × d`, float32) in
registers from the group's start (`group_inverses`: a `d × d` inverse per group, `cholesky.py`'s blocked kernel in
float32, cuSOLVER for float64 factorisations, of the penalties `group_penalties.py` forms for bfloat16 `u`) and walks
its chunks:

    Z   = U A                                    [16, d]   rows A_c u_t (A symmetric)
    L Lᵀ = I + U Zᵀ                              [16, 16]  Cholesky, then L⁻¹
    W   = L⁻¹ Z                                  [16, d]
    Y   = X A − tril(X Wᵀ) W                     [16, d]   rows A_t x_t
    A  ← A − Wᵀ W                                          the next chunk's start

(the chunk path's algebra at 16 tokens a chunk). Only `L⁻¹` is sequential: 16 unrolled steps of symmetric
elimination in exact float32 multiply-adds (`cholesky.inverse_cholesky`), each step a few reductions across the
program's warps. At `d ≤ 32` a program is one warp, whose reductions need no barrier: a group's walk then runs on
a quarter of the threads, and eight programs share an SM. The other products are `tl.dot` with `tf32x3` (three
tf32 passes, about 22 bits; see `linattn/ops/utils/precision.py`).
The same kernel maps `k̂` in the forward and `∂L/∂α` in the backward (`a_t = A_t g_t`), so only the groups' first
`A` and every chunk's `L⁻¹` (16 floats a token and head, which depend on `U` and `A` alone) are kept between the
passes: the backward's call reads `L⁻¹` in place of its elimination (at 64K, d = 128, it then takes about half the
time, for 4% more in the forward's call; `python -m linattn.bench stages --op vla-gate --K 128` times both). In the
forward its rows are normalised (`α̂_t = α_t / ‖α_t‖`, the norms kept) inside the kernel up to d = 64 (three PyTorch
launches fewer, at no cost to the kernel at d = 32 and 5% off `vla`'s forward at d = 64, 64K), above by one pass over
the rows after it (`unit_rows_in_place`), which at d = 128 costs less than the normalisation inside the kernel
(`python -m linattn.bench profile --contenders "VLA triton" --K 32,64,128`, with `UNIT_MAX_HEAD_DIM` changed).

The backward's other products, `∂L/∂u` and `∂L/∂M_0`, are `penalty_grads.py`'s kernels (in slices of the
sequence above d = 64, to bound their per-chunk sums). Head dims up to `MAX_HEAD_DIM` (a `128 × 128` float32 `A`
is 64 KB of registers across the program); larger ones take the PyTorch path. Float64 inputs are refused, as by
the other Triton backends.
"""

from __future__ import annotations

from functools import partial

import torch
import triton
import triton.language as tl

from linattn.ops.unit_rows import unit_rows
from linattn.ops.unit_rows.pytorch import EPS
from linattn.ops.unit_rows.triton import unit_rows_in_place
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.precision import grad_precision
from linattn.ops.vla.chunk import GateKernels, Grouping, chunk_vla_gate, gate, group_penalties
from linattn.ops.vla.triton.cholesky import inverse_cholesky, triton_spd_inverse
from linattn.ops.vla.triton.group_penalties import triton_group_penalties
from linattn.ops.vla.triton.penalty_grads import triton_penalty_grads

MAX_HEAD_DIM = 128
UNIT_MAX_HEAD_DIM = 64  # α̂'s normalisation inside the kernel up to this head dim (module docstring)
GROUP_TOKENS = 512  # tokens per group: one d × d factorisation per 512 tokens, downdates between


CHUNK = 16  # tokens per chunk: the sequential part, a 16 × 16 Cholesky and inverse, stays small


def triton_grouping(T: int) -> Grouping:
    """Chunks of 16 tokens, 512 tokens a group (fewer when the sequence is shorter)."""
    return Grouping(CHUNK, max(1, min(GROUP_TOKENS // CHUNK, cdiv(T, CHUNK))))


@triton.jit(do_not_specialize=["T", "SG"])
def gate_apply_kernel(
    X,
    U,
    A0,
    Y,
    N,
    LI,
    YA,
    NA,
    T,
    SG,
    H: tl.constexpr,
    D: tl.constexpr,
    BD: tl.constexpr,
    C: tl.constexpr,
    R: tl.constexpr,
    UNIT: tl.constexpr,
    EPS_: tl.constexpr,
    KEEP_LI: tl.constexpr,
    READ_LI: tl.constexpr,
    UNIT_GRAD: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (group, batch · head). `X, Y: [B, T, H, D]` float32, `U: [B, T, H, D]` any float dtype,
    `A0`: float32 `D × D` matrices, a head's groups `SG` matrices apart (`[B, H, SG, D, D]`, `SG ≥ ⌈T / (C R)⌉`).
    `UNIT`: rows `y / max(‖y‖, EPS)` into `Y` and the norms `‖y‖` into `N: [B, T, H]` float32 (`EPS_`: the
    clamp). `LI: [B·H, NG·R, C, C]` float32 (`NG` the grid's groups): every chunk's `L⁻¹`, written with `KEEP_LI`,
    read in place of the elimination with `READ_LI`. `UNIT_GRAD`: `X` holds `∂L/∂α̂` of the forward's rows
    `α̂ = α / max(‖α‖, EPS)` (`YA: [B, T, H, D]`, their norms `NA: [B, T, H]`), and the rows mapped are `∂L/∂α`
    (`unit_rows_grad` on each loaded row). `PRECISION`: every product's `input_precision`."""
    i_g, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_c = tl.arange(0, C)
    o_d = tl.arange(0, BD)
    m_d = o_d < D

    # [BD, BD] inverse penalty at the group's start (padding rows and columns 0)
    o_A = (i_bh.to(tl.int64) * SG + i_g) * D * D + o_d[:, None] * D + o_d[None, :]
    b_A = tl.load(A0 + o_A, mask=m_d[:, None] & m_d[None, :], other=0)

    for j in range(R):
        t0 = (i_g * R + j) * C
        # tokens past T load as 0: identity steps (u = 0 gives w = 0)
        m_t = (t0 + o_c) < T
        m_td = m_t[:, None] & m_d[None, :]
        # [C] the chunk's tokens of this head in `[B, T, H]` tensors, [C, BD] in `[B, T, H, D]` ones
        o_tn = (i_b.to(tl.int64) * T + t0 + o_c) * H + i_h
        o_td = o_tn[:, None] * D + o_d[None, :]
        # [C, BD]
        b_u = tl.load(U + o_td, mask=m_td, other=0).to(tl.float32)
        b_x = tl.load(X + o_td, mask=m_td, other=0)
        if UNIT_GRAD:
            # ∂L/∂α = (g − α̂ (α̂ᵀg)) / ‖α‖, or g / EPS where the clamp held
            b_ah = tl.load(YA + o_td, mask=m_td, other=0).to(tl.float32)
            b_na = tl.load(NA + o_tn, mask=m_t, other=1).to(tl.float32)
            b_dot = tl.where(b_na >= EPS_, tl.sum(b_ah * b_x, axis=1), 0)
            b_x = (b_x - b_ah * b_dot[:, None]) / tl.maximum(b_na, EPS_)[:, None]
        # [C, BD] @ [BD, BD] -> [C, BD]: rows A_c u_t
        b_z = tl.dot(b_u, b_A, input_precision=PRECISION)
        # [C, C]: L⁻¹ for L Lᵀ = I + U A_c Uᵀ (or as an earlier call formed it), then W = L⁻¹ Z
        o_li = ((i_bh.to(tl.int64) * tl.num_programs(0) + i_g) * R + j) * C * C + o_c[:, None] * C + o_c[None, :]
        if READ_LI:
            b_Li = tl.load(LI + o_li)
        else:
            b_G = tl.dot(b_u, tl.trans(b_z), input_precision=PRECISION)
            b_Li = inverse_cholesky(b_G + tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0), C)
            if KEEP_LI:
                tl.store(LI + o_li, b_Li)
        b_w = tl.dot(b_Li, b_z, input_precision=PRECISION)
        # [C, BD] @ [BD, C] -> [C, C], kept on s ≤ t
        b_xw = tl.dot(b_x, tl.trans(b_w), input_precision=PRECISION)
        b_xw = tl.where(o_c[:, None] >= o_c[None, :], b_xw, 0)
        # [C, BD]: rows A_t x_t = A_c x_t − Σ_{s≤t} w_s (w_sᵀ x_t)
        b_y = tl.dot(b_x, b_A, input_precision=PRECISION) - tl.dot(b_xw, b_w, input_precision=PRECISION)
        if UNIT:
            # [C] norms of the rows (padding columns are 0)
            b_n = tl.sqrt(tl.sum(b_y * b_y, axis=1))
            b_y = b_y / tl.maximum(b_n, EPS_)[:, None]
            tl.store(N + o_tn, b_n, mask=m_t)
        tl.store(Y + o_td, b_y, mask=m_td)
        # [BD, C] @ [C, BD] -> [BD, BD]
        b_A -= tl.dot(tl.trans(b_w), b_w, input_precision=PRECISION)


def triton_apply(
    X: torch.Tensor,
    U: torch.Tensor,
    A_starts: torch.Tensor,
    grouping: Grouping,
    unit: bool = False,
    *,
    keep: bool = False,
    factors: torch.Tensor | None = None,
    unit_grad: tuple[torch.Tensor, torch.Tensor] | None = None,
    precision: str = "tf32x3",
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """`chunk.Apply`'s contract on the kernel: `X: [B, T, H, d]` float32 and `U: [B, T, H, d]` float32,
    bfloat16 or float16, contiguous, `A_starts: [B, H, ⌈T / L⌉, d, d]` float32 (a head's groups may lie further
    apart, as `group_inverses` leaves them); returns rows `A_t x_t`, `[B, T, H, d]` float32, with `unit` those
    rows normalised and their norms (inside the kernel up to d = 64, by one more launch above), and with `keep`
    every chunk's `L⁻¹` (`[B·H, ⌈T / L⌉·R, C, C]` float32, 16 floats a token and head), which a call with them as
    `factors` reads in place of its 16-step elimination (the backward's call: `L⁻¹` depends on `U` and `A` only).
    `unit_grad = (α̂, norms)`: as `chunk.Apply`, inside the kernel. `precision`: the products' `input_precision`."""
    B, T, H, D = X.shape
    if X.dtype != torch.float32 or A_starts.dtype != torch.float32 or U.dtype == torch.float64:
        raise TypeError(f"vla gate kernel: float32 X and A_starts, a float32, bfloat16 or float16 U expected, got "
                        f"{X.dtype}, {A_starts.dtype}, {U.dtype}")  # fmt: skip
    if D > MAX_HEAD_DIM:
        raise ValueError(f"vla gate kernel: head dims up to {MAX_HEAD_DIM}, got {D}")
    Y = torch.empty_like(X)
    in_kernel = unit and D <= UNIT_MAX_HEAD_DIM
    norms = torch.empty(X.shape[:-1], dtype=torch.float32, device=X.device) if in_kernel else None
    SG = A_starts.stride(1) // (D * D)  # matrices from one of a head's groups to the next
    if A_starts.stride() != (H * SG * D * D, SG * D * D, D * D, D, 1):
        A_starts, SG = A_starts.contiguous(), A_starts.shape[2]
    BD = max(16, next_power_of_2(D))
    # Warps a program. The gate alone, one call, H = 16, ms at T = 4K / 64K (`python -m linattn.bench stages --op
    # vla-gate --K 32 --lengths 4096,65536`, and K = 64, 128, with the counts changed):
    # - d = 32: one warp 0.23 / 0.52, two 0.20 / 0.92, four 0.20 / 1.86
    # - d = 64: two warps 0.38 / 2.39, four 0.27 / 2.39, eight 0.28 / 4.43
    # - d = 128: eight warps 0.48 / 7.43, sixteen 2.08 / 32.6 (four would hold `A` in 128 registers a thread)
    warps = 1 if BD <= 32 else 4 if BD <= 64 else 8
    grid = (A_starts.shape[2], B * H)
    shape = (B * H, grid[0] * grouping.R, grouping.C, grouping.C)
    if factors is not None and (factors.shape != shape or factors.dtype != torch.float32):
        raise ValueError(f"vla gate kernel: factors of shape {shape}, float32 expected, got {tuple(factors.shape)}, "
                         f"{factors.dtype}")  # fmt: skip
    kept = torch.empty(shape, dtype=torch.float32, device=X.device) if keep and factors is None else None
    alpha_hat, alpha_norms = (None, None) if unit_grad is None else (x.contiguous() for x in unit_grad)
    gate_apply_kernel[grid](
        X, U, A_starts, Y, norms, factors if factors is not None else kept, alpha_hat, alpha_norms, T, SG,
        H=H, D=D, BD=BD, C=grouping.C, R=grouping.R, UNIT=in_kernel, EPS_=EPS,
        KEEP_LI=kept is not None, READ_LI=factors is not None, UNIT_GRAD=unit_grad is not None, PRECISION=precision,
        num_warps=warps,
    )  # fmt: skip
    if unit and not in_kernel:
        return *unit_rows_in_place(Y), kept
    return Y, norms, kept


def penalty_precision(u: torch.Tensor, initial_state: torch.Tensor | None) -> str:
    """`input_precision` of the backward's `∂L/∂u` products (`penalty_grads.py`): one tf32 pass where the engine's
    backward takes one (`grad_precision`: bfloat16 `u`, enough tokens) and no initial `A` is given, whose float32
    gradient would carry that pass's error; else three."""
    return grad_precision((u,), False) if initial_state is None else "tf32x3"


def triton_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    unit_keys: bool = False,
    fast: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_vla_gate`, float32 inside; head dims over `MAX_HEAD_DIM` take the PyTorch chunk
    path. The backward's `∂L/∂u`, `∂L/∂M_0` come from `penalty_grads.py`'s kernels. `unit_keys`: `k` is already
    `unit_rows(k)`. `fast`: the gate kernel's products (forward and backward) in one tf32 pass, not three: the
    `precision="fast"` level of bfloat16 tokens, where their error (~2⁻¹¹ a product, over at most one group's 32
    downdates of `A`, each group restarted from its own inverse) sits under the bfloat16 rounding of the tokens and
    of `o` (`vla`'s state keeps float32 `k̂`, `α̂`)."""
    if k.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"backend 'triton': k, u must be float32, bfloat16 or float16, got {k.dtype}")
    T, d = k.shape[1], k.shape[-1]
    if d > MAX_HEAD_DIM:
        return chunk_vla_gate(k, u, initial_state, lam0=lam0, unit_keys=unit_keys)
    grads = partial(triton_penalty_grads, precision=penalty_precision(u, initial_state))
    # the groups' penalties on the tensor cores for bfloat16 u only (`group_penalties.py` says why)
    sums = triton_group_penalties if u.dtype == torch.bfloat16 else group_penalties
    apply = partial(triton_apply, precision="tf32" if fast else "tf32x3")
    kernels = GateKernels(apply, grads, triton_spd_inverse, sums)
    return gate(k if unit_keys else unit_rows(k), u, initial_state, lam0, triton_grouping(T), kernels)
