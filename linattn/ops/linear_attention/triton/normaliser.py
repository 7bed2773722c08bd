"""Linear attention's normaliser on its own kernels, `n_t = scale · q_tᵀ z_t` with `z_t = z_0 + Σ_{s ≤ t} k_s`.

As one more value column of ones through the chunked kernels, `V + 1` columns would take a whole extra value
block in every stage (at `V = 128`, three blocks of 64 where two do). The normaliser needs only the running key sum,
a scan, so it runs beside the unnormalised call:

    S_c = Σ_{t in chunk c} k_t                              per chunk, in parallel          [rows, H, K]
    P_c = z_0 + Σ_{c' < c in its sequence} S_c'            the chunk-start sums, in float64 (a few MB)
    n_t = scale · q_tᵀ (P_c + Σ_{s ≤ t in c} k_s)          per chunk, in parallel          [B, T, H]

Its backward, from `dn` and the final sum's gradient `dz_T`, with `w_t = scale · dn_t`:

    dq_t = w_t z_t
    dk_s = dz_T + Σ_{t ≥ s in its sequence} w_t q_t         the same scan, reversed
    dz_0 = dz_T + Σ_t w_t q_t

The chunk sums are float32 (64 terms); the chunk-start sums add them in float64, so that no sum over the sequence
is formed in float32 (the token loop's `z` is one: its error grows with the length, this one's does not), and
packed sequences (`cu_seqlens`) are cut apart there by differences of float64 totals.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.backward import delta_rule_bwd
from linattn.ops.delta_rule.triton.forward import delta_rule_fwd
from linattn.ops.delta_rule.triton.function import Options
from linattn.ops.linear_attention.api import NORMALIZER_EPS
from linattn.ops.linear_attention.triton.blocks import block
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.inputs import check_input_dtype
from linattn.ops.utils.layout import ChunkLayout


@triton.jit(do_not_specialize=["T"])
def chunk_sums_kernel(
    X,
    W,
    S,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    HAS_W: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head): `S[row, h] = Σ_t w_t x_t` over the chunk's tokens
    (`X: [B, T, H, K]`, `W: [B, T, H]` float32 or none, `S: [rows, H, K]` float32)."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_t = i_t * BT + tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m_t, m_k = o_t < T, o_k < K
    o_th = (bos + o_t) * H + i_h
    # [BT, BK]
    b_x = tl.load(X + o_th[:, None] * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
    if HAS_W:
        b_x *= tl.load(W + o_th, mask=m_t, other=0)[:, None]
    tl.store(S + (i_tg * H + i_h) * K + o_k, tl.sum(b_x, axis=0), mask=m_k)


@triton.jit(do_not_specialize=["T"])
def scan_kernel(
    X,
    W,
    P,
    Y,
    R,
    OUT,
    cu_seqlens,
    chunk_indices,
    T,
    BT_ALL,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    HAS_W: tl.constexpr,
    REVERSE: tl.constexpr,
    DOT: tl.constexpr,
    HAS_R: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head): the running sums `z_t = P[row] + Σ w_s x_s` over the
    chunk's tokens up to `t` (from `t` with `REVERSE`). `DOT`: `OUT[i_k, token] = Σ_k Y_t ⊙ z_t` over the block
    (`OUT: [NK, B·T·H]` float32, `BT_ALL = B·T·H`: the key blocks' partial dot products); else `OUT = r_t z_t`
    (`R: [B, T, H]` float32, or 1 without `HAS_R`) added into `OUT: [B, T, H, K]` float32."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_t = i_t * BT + tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m_t, m_k = o_t < T, o_k < K
    m = m_t[:, None] & m_k[None, :]
    o_th = (bos + o_t) * H + i_h
    o = o_th[:, None] * K + o_k[None, :]
    # [BT, BK]
    b_x = tl.load(X + o, mask=m, other=0).to(tl.float32)
    if HAS_W:
        b_x *= tl.load(W + o_th, mask=m_t, other=0)[:, None]
    b_z = tl.cumsum(b_x, axis=0, reverse=REVERSE) + tl.load(P + (i_tg * H + i_h) * K + o_k, mask=m_k, other=0)[None, :]
    if DOT:
        b_y = tl.load(Y + o, mask=m, other=0).to(tl.float32)
        tl.store(OUT + i_k * BT_ALL + o_th, tl.sum(b_y * b_z, axis=1), mask=m_t)
    else:
        if HAS_R:
            b_z *= tl.load(R + o_th, mask=m_t, other=0)[:, None]
        tl.store(OUT + o, tl.load(OUT + o, mask=m, other=0) + b_z, mask=m)


def _launch(kernel, x: torch.Tensor, layout: ChunkLayout, **kwargs) -> None:
    B, T, H, K = x.shape
    BK = block(K)
    grid = (cdiv(K, BK), layout.NT, B * H)
    kernel[grid](**kwargs, cu_seqlens=layout.cu_seqlens, chunk_indices=layout.chunk_indices, T=T, H=H, K=K,
                 BT=layout.BT, BK=BK, IS_VARLEN=layout.cu_seqlens is not None)  # fmt: skip


def chunk_sums(x: torch.Tensor, w: torch.Tensor | None, layout: ChunkLayout) -> torch.Tensor:
    """`x: [B, T, H, K]`, `w: [B, T, H]` float32 or None -> float32 `[rows, H, K]`: each chunk's `Σ w_t x_t`."""
    B, _, H, K = x.shape
    S = torch.empty(B * layout.NT, H, K, dtype=torch.float32, device=x.device)
    _launch(chunk_sums_kernel, x, layout, X=x, W=w, S=S, HAS_W=w is not None)
    return S


def _scan(x, w, P, layout, *, reverse=False, y=None, r=None, out=None) -> torch.Tensor:
    """`scan_kernel` on `x: [B, T, H, K]`: with `y`, `Σ_k y_t ⊙ z_t`, `[B, T, H]` float32; else `r_t z_t` added
    into `out` (`[B, T, H, K]` float32, contiguous), which it returns."""
    B, T, H, K = x.shape
    dot = y is not None
    if dot:
        out = torch.empty(cdiv(K, block(K)), B, T, H, dtype=torch.float32, device=x.device)
    _launch(scan_kernel, x, layout, X=x, W=w, P=P, Y=y, R=r, OUT=out, BT_ALL=B * T * H, HAS_W=w is not None,
            REVERSE=reverse, DOT=dot, HAS_R=r is not None)  # fmt: skip
    return out.sum(0) if dot else out


def chunk_starts(
    S: torch.Tensor, layout: ChunkLayout, start: torch.Tensor | None, *, reverse: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunk sums `S: [rows, H, K]` -> (the sums before each chunk in its sequence, after it with `reverse`, plus
    `start: [N, H, K]` (or 0), float32 `[rows, H, K]`; each sequence's `start` plus its total, float64 `[N, H, K]`).
    Formed in float64 over the batch's rows: a sequence's sums are differences of running totals."""
    rows, H, K = S.shape
    S64 = S.double()
    # [rows + 1, H, K]: the running total before each row, and after the last
    before = torch.cat([S64.new_zeros(1, H, K), S64.cumsum(0)])
    if layout.cu_seqlens is None:
        offsets = torch.arange(layout.B + 1, device=S.device) * layout.NT
        sequence = torch.arange(rows, device=S.device) // layout.NT
    else:
        offsets, sequence = layout.chunk_offsets.long(), layout.chunk_indices[:, 0].long()
    first, last = before[offsets[:-1]], before[offsets[1:]]  # [N, H, K]
    total = last - first
    within = last[sequence] - before[1:] if reverse else before[:-1] - first[sequence]
    if start is not None:
        start = start.double()
        within, total = within + start[sequence], total + start
    return within.float(), total


class NormalizedLinearAttention(torch.autograd.Function):
    """`(q, k, v, S0, z0, options) -> (o, S_T, z_T)`: `o_t = o'_t / max(n_t, eps)` of the unnormalised chunked call
    `o'` (the delta-rule kernels without the erase term, float32 `o'`) and the normaliser `n`. Its backward adds
    the normaliser's share of `dq, dk` to the kernels' in float32 and rounds once: the two shares cancel (the
    gradient of a ratio), and each rounded apart would carry its rounding against the larger share."""

    @staticmethod
    def forward(ctx, q, k, v, S0, z0, options: Options):
        o_u, S_T, saved = delta_rule_fwd(
            q, k, v, None, None, None, options.scale, S0, options.output_final_state, options.cu_seqlens,
            erase=False, out_dtype=torch.float32, fast=options.fast,
        )  # fmt: skip
        layout = saved.layout
        P, z_T = chunk_starts(chunk_sums(k, None, layout), layout, z0)
        n = _scan(k, None, P, layout, y=q) * options.scale
        o = (o_u / n.clamp_min(NORMALIZER_EPS)[..., None]).to(v.dtype)
        ctx.save_for_backward(q, k, v, S0, P, o_u, n)
        ctx.saved, ctx.options, ctx.z0_dtype = saved, options, None if z0 is None else z0.dtype
        ctx.set_materialize_grads(False)
        return o, S_T, z_T.float() if options.output_final_state else None

    @staticmethod
    def backward(ctx, do, dS_T, dz_T):
        q, k, v, S0, P, o_u, n = ctx.saved_tensors
        options, layout = ctx.options, ctx.saved.layout
        held = n >= NORMALIZER_EPS  # the clamp passes no gradient to n where it holds
        n_c = n.clamp_min(NORMALIZER_EPS)
        do = torch.zeros_like(o_u) if do is None else do.float()
        do_u = (do / n_c[..., None]).contiguous()
        # [B, T, H]: w_t = scale · ∂L/∂n_t, with ∂L/∂n_t = −⟨do_t, o'_t⟩ / n_t²
        w = torch.where(held, -(do * o_u).sum(-1) / n_c**2, 0) * options.scale
        dq, dk, dv, _, _, _, dS0 = delta_rule_bwd(
            q, k, v, None, None, None, options.scale, S0, ctx.saved, do_u,
            None if dS_T is None else dS_T.contiguous(), False, options.fast, qk_dtype=torch.float32,
        )  # fmt: skip
        _scan(k, None, P, layout, r=w, out=dq)
        R, dz0 = chunk_starts(chunk_sums(q, w, layout), layout, dz_T, reverse=True)
        _scan(q, w, R, layout, reverse=True, out=dk)
        dz0 = None if ctx.z0_dtype is None else dz0.to(ctx.z0_dtype)
        return dq.to(q.dtype), dk.to(k.dtype), dv, dS0, dz0, None


def normalized_linear_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    S0: torch.Tensor | None,
    z0: torch.Tensor | None,
    scale: float,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    fast: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """`linear_attention(..., normalize=True)` on validated inputs: `(o, (S_T, z_T) or None)`, `o` in v's dtype,
    the final state float32; differentiable in `q, k, v, S0, z0`. Dtypes as `linear_attention_triton`."""
    check_input_dtype("linear_attention", "q, k, v", q.dtype)
    q, k, v, S0, z0 = (None if x is None else x.contiguous() for x in (q, k, v, S0, z0))
    options = Options(scale=scale, output_final_state=output_final_state, cu_seqlens=cu_seqlens, erase=False, fast=fast)
    o, S_T, z_T = NormalizedLinearAttention.apply(q, k, v, S0, z0, options)
    return o, None if S_T is None else (S_T, z_T)
