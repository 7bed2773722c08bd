"""Stage B2 of the chunked backward: the gradient of the state hand-over, sequential over chunks in reverse.

Forward, per chunk `c` with start state `h_c` (`W̃ = W ⊙ Γ_C/Γ`, `Γ_C` the decay at the chunk's last real token):

    U_c = Ũ_c − K̃_c h_c,    h_{c+1} = Γ_C h_c + W̃ᵀ U_c,    O_c = scale · (diag(Γ) Q h_c + tril(Q Wᵀ ⊙ D) U_c)

Backward, from `dh_{C_last+1}` = the final state's gradient (or 0) down to `dh_0`:

    dU_c = scale · tril(Q Wᵀ ⊙ D)ᵀ dO_c + W̃ dh_{c+1}
    dh_c = Γ_C dh_{c+1} + E_c − K̃_cᵀ dU_c,          E_c = scale · (diag(Γ) Q)ᵀ dO_c
    dṼ_c = Tᵀ dU_c                                                 (T = (I + A)⁻¹ of the chunk)

Three kernels: everything that does not depend on `dh` first, parallel over chunks (the local part of `dU`,
`E_c`, parked in `dh`'s row of the chunk, and with a decay `W̃` in float32); then the sequential walk, left with
two products per chunk step (`W̃ dh` and `K̃ᵀ dU`), both with an operand read straight from memory, which Triton's
pipeliner prefetches (scaling `W` by the decay inside the walk would keep it in registers: 2× the instructions a
step, spills); then `dṼ = Tᵀ dU`, parallel again. The walk reads `K̃ᵀ` chunk by chunk from a copy contiguous along the
tokens (`transpose.py`'s layout, written by B0, `recompute.py`): read from `K̃` itself, the tf32 product's operand
would come in 4 bytes at a time, which makes the state backward about a third slower at 64K (`python -m
linattn.bench stages`). Its other reads (`E_c`, the local part of `dU_c`, the decay) are plain loads, which the
pipeliner leaves in their step; one-pass launches issue them a step ahead (`reads_ahead`: about a fifth off the walk
at 64K).

`dṼ = Tᵀ dU` is all the chunk-local backward needs of `dU`: `Ũ = T β V` and `K̃ = T β Γ K` enter only through
`U = Ũ − K̃ h`, so `dŨ = dU`, `dK̃ = −dU hᵀ`, and both reach the inputs through `Tᵀ` (see `local_bwd.py`).
Stores `dh[c] = dh_{c+1}`, the gradient of each chunk's *end* state (what `local_bwd` pairs with `h[c]`, the
chunk's start state), `dṼ`, and `dh_0` when there is an initial state. Everything is float32, `tl.dot` in tf32x3
(one tf32 pass where `precision.grad_precision` allows it), except at the fast level, where `dh` and `E_c` in its
slots are bfloat16, as is the `K̃ᵀ` B0 stored (`precision.backward_precision`).

`E_c` is formed in the parallel pre-pass and read back, though the walk could form it from `Q_c` and `dO_c` and
spare the round trip: there the product's transposed query tile adds layout changes through shared memory to every
step, and the state backward took 3.79 ms against 3.25 at 16 × 4K (`python -m linattn.bench stages --batch 16
--lengths 4096`, either build).

Without the erase term (`ERASE` off: `T = I`, `K̃ = 0`) the middle line is `dṼ_c = dU_c` and the last loses its
`K̃ᵀ dU` term: neither `T` nor `K̃` is read.
"""

from __future__ import annotations

from functools import partial

import torch
import triton
import triton.language as tl

from linattn.ops.chunking import causal, decay_matrix
from linattn.ops.delta_rule.triton.precision import narrow_launch
from linattn.ops.delta_rule.triton.segments import segment_count, segmented_walk
from linattn.ops.delta_rule.triton.transpose import load_chunk_transposed
from linattn.ops.delta_rule.triton.value_block import BLOCK_V, value_block
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords, sequence_coords, state_tile
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma, raw_dot, raw_operands


def state_bwd_ref(
    q: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    T_inv: torch.Tensor | None,
    k_tilde: torch.Tensor | None,
    do: torch.Tensor,
    dht: torch.Tensor | None,
    scale: float,
    layout: ChunkLayout,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(dh, dṼ, dh_0)` as `state_bwd` returns them (`[B, NT, H, K, V]`, `[B, T, H, V]`, `[N, H, K, V]`),
    in float64. `T_inv`, `k_tilde` None: no erase term (`T = I`, `K̃ = 0`)."""
    B, _, H, K = q.shape
    V = do.shape[-1]
    erase = k_tilde is not None
    q, w, do = (x.double() for x in (q, w, do))
    k_tilde = k_tilde.double() if erase else None
    f64 = {"dtype": torch.float64, "device": q.device}
    dh = torch.zeros(B, layout.NT, H, K, V, **f64)
    dv_tilde = torch.zeros_like(do)
    dh0 = torch.zeros(layout.N, H, K, V, **f64)
    for n, b, bos, eos, first in layout.sequences():
        dS = torch.zeros(H, K, V, **f64) if dht is None else dht[n].double()
        starts = list(range(bos, eos, layout.BT))
        for i in reversed(range(len(starts))):
            c = slice(starts[i], min(starts[i] + layout.BT, eos))
            L = c.stop - c.start
            dh[b, first + i] = dS
            q_c, w_c, do_c = (x[b, c].transpose(0, 1) for x in (q, w, do))  # [H, L, K|V]
            G_c = None if G is None else G[b, c].T.double()  # [H, L]
            A_o = causal(q_c @ w_c.transpose(-1, -2), None if G_c is None else decay_matrix(G_c))
            if G_c is not None:
                w_c = w_c * (G_c[:, -1:] - G_c).exp()[..., None]
                q_c = q_c * G_c.exp()[..., None]
            dU = scale * A_o.transpose(-1, -2) @ do_c + w_c @ dS  # [H, L, V]
            if G_c is not None:
                dS = G_c[:, -1, None, None].exp() * dS
            dS = dS + scale * q_c.transpose(-1, -2) @ do_c
            if erase:
                T_c = T_inv[b, c, :, :L].transpose(0, 1).double()  # [H, L, L]
                kt_c = k_tilde[b, c].transpose(0, 1)
                dS = dS - kt_c.transpose(-1, -2) @ dU
                dU = T_c.transpose(-1, -2) @ dU
            dv_tilde[b, c] = dU.transpose(0, 1)
        dh0[n] = dS
    return dh, dv_tilde, dh0


@triton.jit(do_not_specialize=["T"])
def state_bwd_local_kernel(
    q,
    w,
    G,
    do,
    du,
    dh,
    w_tilde,
    cu_seqlens,
    chunk_indices,
    scale,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """The chunk-local parts of the backward pass: `scale · tril(Q Wᵀ ⊙ D)ᵀ dO` into `du`, and
    `E_c = scale · (diag(Γ) Q)ᵀ dO` into the chunk's row of `dh` (where the sequential kernel reads it before
    overwriting it). One program per (value block, chunk, batch row · head)."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # this head at the chunk's first token; a token step is H·(K | V | 1) elements
    t0 = bos + i_t * BT
    q += (t0 * H + i_h) * K
    w += (t0 * H + i_h) * K
    do += (t0 * H + i_h) * V
    du += (t0 * H + i_h) * V
    o_i = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_t = o_i < T - i_t * BT

    if USE_G:
        # [BT] cumulative log-decay, 0 on padding, and the decay from each token to the chunk's last real one
        b_g = tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0)
        b_g_last = tl.load(G + (t0 + tl.minimum(BT, T - i_t * BT) - 1) * H + i_h)
        b_to_last = tl.exp(b_g_last - b_g)
    # Q Wᵀ, accumulated over key blocks; with a decay the first value block's program also stores
    # W̃ = diag(Γ_C/Γ) W (float32; without one W̃ = W, which the sequential kernel reads as it is)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        # [BT, BK], [BT, BK]
        b_q = tl.load(q + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        b_w = tl.load(w + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        # [BT, BK] @ [BK, BT] -> [BT, BT]
        b_A += raw_dot(b_q, tl.trans(b_w), RAW)
        b_w = b_w.to(tl.float32)
        if USE_G:
            if i_v == 0:
                o_tk = (t0 * H + i_h) * K + o_i[:, None] * (H * K) + o_k[None, :]
                tl.store(w_tilde + o_tk, b_w * b_to_last[:, None], mask=m_tk)
    # s ≤ t on real rows, masked before exp (a padding row has G = 0, and its exp(0 − G_s) could overflow)
    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None]
    if USE_G:
        b_A *= tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], float("-inf")))
    b_A = tl.where(m_A, b_A * scale, 0.0)

    m_tv = m_t[:, None] & (o_v < V)[None, :]
    o_tv = o_i[:, None] * (H * V) + o_v[None, :]
    # [BT, BV]
    b_do = tl.load(do + o_tv, mask=m_tv, other=0).to(tl.float32)
    # [BT, BT]ᵀ @ [BT, BV] -> [BT, BV]
    tl.store(du + o_tv, mma(tl.trans(b_A), b_do, PRECISION), mask=m_tv)

    # E_c, key block by key block: [BK, BT] @ [BT, BV] -> [BK, BV]
    dh += (i_tg * H + i_h) * K * V
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        # [BT, BK]
        b_q = tl.load(q + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0).to(tl.float32)
        if USE_G:
            b_q *= tl.exp(b_g)[:, None]
        b_E = scale * mma(tl.trans(b_q), b_do, PRECISION)
        tl.store(dh + o_k[:, None] * V + o_v[None, :], b_E.to(dh.dtype.element_ty),
                 mask=(o_k < K)[:, None] & (o_v < V)[None, :])  # fmt: skip


@triton.jit
def _walk_loads(
    dh, du, G, bos, T, boh, i_t, i_h, o_h, m_h, o_i, o_v, m_v, H, K, V, BT, BK: tl.constexpr, BV: tl.constexpr,
    USE_G: tl.constexpr, LOCAL: tl.constexpr,
):  # fmt: skip
    """What step `i_t` of the state backward's walk reads besides its products' operands: `E_c` from `dh[c]`
    (`[BK, BV]`), the local part of `dU_c` (`[BT, BV]`) and, with a decay, `G` at the chunk's last real token (0
    without). `i_t = −1` (the step after the last) reads chunk 0's again, which nobody uses. Without `LOCAL` (the
    walk of a segment's transition, `segments.py`) the first two are zeros."""
    c = tl.maximum(i_t, 0)
    t0 = bos + c * BT
    if LOCAL:
        b_E = tl.load(dh + ((boh + c) * H + i_h) * K * V + o_h, mask=m_h, other=0).to(tl.float32)
        m_tv = (o_i < T - c * BT)[:, None] & m_v[None, :]
        b_du = tl.load(du + (t0 * H + i_h) * V + o_i[:, None] * (H * V) + o_v[None, :], mask=m_tv, other=0)
    else:
        b_E = tl.zeros([BK, BV], dtype=tl.float32)
        b_du = tl.zeros([BT, BV], dtype=tl.float32)
    b_g_last = (c * 0).to(tl.float32)  # a scalar tensor: the walk's loop carries it
    if USE_G:
        b_g_last = tl.load(G + (t0 + tl.minimum(BT, T - c * BT) - 1) * H + i_h)
    return b_E, b_du, b_g_last


@triton.jit(do_not_specialize=["T"])
def state_bwd_kernel(
    w_tilde,
    G,
    k_tilde_t,
    du,
    dh,
    dht,
    dh0,
    cu_seqlens,
    chunk_offsets,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    ERASE: tl.constexpr,
    USE_G: tl.constexpr,
    USE_DHT: tl.constexpr,
    STORE_DH0: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
    AHEAD: tl.constexpr,
    TRANSITION: tl.constexpr,
    STORE_CHUNKS: tl.constexpr,
):
    """One program per (value block, sequence · head) walks the sequence's chunks from the last to the first:
    `dh_c = Γ_C dh_{c+1} + E_c − K̃_cᵀ dU_c`, with `E_c` read from `dh[c]` before `dh_{c+1}` is stored there, and
    `dU_c` (the local part in `du`, plus `W̃ dh_{c+1}`) written back to `du`. Without `ERASE`, `k_tilde_t` is unused.
    `AHEAD`: each step's plain loads are issued in the step before (`reads_ahead`). `TRANSITION`: the gradient's
    `V = K` columns start as the identity's and `E_c`, the local `dU_c` are 0, so the walk ends at the product of
    the chunks' transposed transitions (`segments.py`). `STORE_CHUNKS`: store `dh` and `dU` (off for
    `segments.py`'s first walks, which leave `E_c` and the local `dU_c` for the last)."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)

    o_i = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_h, o_h = state_tile(0, i_v, K, V, BK, BV)

    # [BK, BV] gradient of the state at the end of the current chunk, float32
    b_dh = tl.zeros([BK, BV], dtype=tl.float32)
    if TRANSITION:
        # [BK, BV] columns o_v of the K × K identity
        b_dh += tl.where(o_k[:, None] == o_v[None, :], 1.0, 0.0)
    if USE_DHT:
        b_dh += tl.load(dht + i_nh.to(tl.int64) * K * V + o_h, mask=m_h, other=0).to(tl.float32)

    # `AHEAD`: the chunk's local term `E_c`, the local part of `dU_c` and the decay are read one step ahead
    # (`_walk_loads`). Read in the step that uses them, the two tiles go to memory and back on the step's critical
    # path (plain loads: the pipeliner prefetches only the products' operands): half of the walk's stalls under
    # Nsight Compute; with them ahead the walk at 64K takes 3.58 ms against 4.56 (`python -m linattn.bench stages`).
    # Only for one-pass launches: the tf32x3 ones have no registers to spare (ahead, their spills grow from 384 to
    # 524 B a thread; `scripts/compile_kernels.py`).
    if AHEAD:
        b_E, b_du_loc, b_g_last = _walk_loads(
            dh, du, G, bos, T, boh, NT - 1, i_h, o_h, m_h, o_i, o_v, m_v, H, K, V, BT, BK, BV, USE_G, not TRANSITION
        )
    for i_t in range(NT - 1, -1, -1):
        # this step's loads, or with `AHEAD` the next step's (chunk i_t − 1), issued before this step's products
        b_E_read, b_du_read, b_g_read = _walk_loads(
            dh, du, G, bos, T, boh, i_t - 1 if AHEAD else i_t, i_h, o_h, m_h, o_i, o_v, m_v, H, K, V, BT, BK, BV,
            USE_G, not TRANSITION,
        )  # fmt: skip
        if not AHEAD:
            b_E, b_du_loc, b_g_last = b_E_read, b_du_read, b_g_read
        # the slot of E_c takes the gradient of the chunk's end state
        if STORE_CHUNKS:
            tl.store(dh + ((boh + i_t) * H + i_h) * K * V + o_h, b_dh.to(dh.dtype.element_ty), mask=m_h)

        # this head at the chunk's first token; a token step is H·(K | V | 1) elements
        t0 = bos + i_t * BT
        m_t = o_i < T - i_t * BT
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        o_tk = (t0 * H + i_h) * K + o_i[:, None] * (H * K) + o_k[None, :]
        o_tv = (t0 * H + i_h) * V + o_i[:, None] * (H * V) + o_v[None, :]
        # [BT, BK] decayed write directions W̃ of the chunk (float32, stored by the local kernel; W itself without a
        # decay): read straight into the product, so Triton's pipeliner prefetches them as it does the state pass's K̃
        b_w = tl.load(w_tilde + o_tk, mask=m_tk, other=0).to(tl.float32)

        # [BT, BV] + [BT, BK] @ [BK, BV] -> [BT, BV]
        b_du = b_du_loc + mma(b_w, b_dh, PRECISION)
        if STORE_CHUNKS:
            tl.store(du + o_tv, b_du, mask=m_tv)

        if USE_G:
            b_dh *= tl.exp(b_g_last)
        b_dh += b_E
        if ERASE:
            # [BK, BT] the chunk's K̃ᵀ, contiguous along the tokens (`transpose.py`)
            b_ktt = load_chunk_transposed(k_tilde_t, (boh + i_t) * H + i_h, o_k, m_k, o_i, K, BT)
            # [BK, BT] @ [BT, BV] -> [BK, BV]
            b_dh -= mma(b_ktt, b_du, PRECISION)
        if AHEAD:
            b_E, b_du_loc, b_g_last = b_E_read, b_du_read, b_g_read

    if STORE_DH0:
        tl.store(dh0 + i_nh.to(tl.int64) * K * V + o_h, b_dh, mask=m_h)


@triton.jit(do_not_specialize=["T"])
def state_bwd_dv_kernel(
    T_inv,
    du,
    dv_tilde,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BV: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """`dṼ_c = Tᵀ dU_c`: one program per (value block, chunk, batch row · head)."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_i = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_t = o_i < T - i_t * BT
    m_tv = m_t[:, None] & (o_v < V)[None, :]
    o_tv = (t0 * H + i_h) * V + o_i[:, None] * (H * V) + o_v[None, :]
    # [BT, BT] rows of the chunk's inverse (0 past its end), [BT, BV]
    o_T = (t0 * H + i_h) * BT + o_i[:, None] * (H * BT) + o_i[None, :]
    b_T = tl.load(T_inv + o_T, mask=m_t[:, None], other=0)
    b_du = tl.load(du + o_tv, mask=m_tv, other=0)
    # [BT, BT]ᵀ @ [BT, BV] -> [BT, BV]
    tl.store(dv_tilde + o_tv, mma(tl.trans(b_T), b_du, PRECISION), mask=m_tv)


def reads_ahead(precision: str) -> bool:
    """Whether the walk reads each step's plain loads one step ahead (`state_bwd_kernel`'s `AHEAD`): in one-pass
    launches; `tf32x3` ones have no registers to spare."""
    return precision != "tf32x3"


def state_bwd(
    q: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    T_inv: torch.Tensor | None,
    k_tilde_t: torch.Tensor | None,
    do: torch.Tensor,
    dht: torch.Tensor | None,
    scale: float,
    want_dh0: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
    segments: int | None = None,
    store: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`q, w: [B, T, H, K]`, `G: [B, T, H]` or None, the forward's `T: [B, T, H, BT]`, each chunk's `K̃ᵀ`
    (`[B, NT, H, K, BT]`, float32 or the fast level's bfloat16, `transpose.chunk_transpose` of the recomputed `K̃`;
    both None without the erase term), `do: [B, T, H, V]`, `dht: [N, H, K, V]` or None (no gradient for the final
    state). `precision`: of the products that involve an intermediate (`precision.backward_precision`). `segments`:
    each sequence's segments walked at once (`segments.py`; 1 the one pass; None: `segment_count`'s for the forward's
    grid, whose counts suit this walk too). `store`: the dtype of `dh` (and of `E_c` parked in it; the walk's own
    gradient stays float32).

    Returns `dh: [B, NT, H, K, V]` in `store` (row `c`: gradient of chunk `c`'s end state), float32
    `dṼ: [B, T, H, V]` and `dh_0: [N, H, K, V]` (None unless `want_dh0`).
    """
    B, T, H, K = q.shape
    V = do.shape[-1]
    device = q.device
    BK = min(64, max(16, next_power_of_2(K)))
    BV = min(64, max(16, next_power_of_2(V)))
    du = torch.empty(B, T, H, V, dtype=torch.float32, device=device)
    dh = torch.empty(B, layout.NT, H, K, V, dtype=store, device=device)
    # W̃ = diag(Γ_C/Γ) W for the sequential kernel, written by the local one; W itself without a decay
    w_tilde = None if G is None else torch.empty(B, T, H, K, dtype=torch.float32, device=device)
    grid = (cdiv(V, BV), layout.NT, B * H)
    state_bwd_local_kernel[grid](
        q, w, G, do, du, dh, w_tilde, layout.cu_seqlens, layout.chunk_indices, scale, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV, USE_G=G is not None, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(q.device, q.dtype, w.dtype), PRECISION=precision,
        num_warps=2 if narrow_launch(q.dtype, w.dtype) else 4, num_stages=3,  # `narrow_launch` says why
    )  # fmt: skip

    erase = k_tilde_t is not None
    walk = partial(
        _walk, w if w_tilde is None else w_tilde, G, k_tilde_t, du, dh, T, H=H, K=K, BT=layout.BT, precision=precision
    )
    if segments is None:
        segments = segment_count(layout, layout.N * H * cdiv(V, BLOCK_V), device)
    if segments <= 1:
        dh0 = torch.empty(layout.N, H, K, V, dtype=torch.float32, device=device) if want_dh0 else None
        walk(layout.cu_seqlens, layout.chunk_offsets, layout.N, V, dht, dh0, store_chunks=True)
    else:  # from each sequence's end: the gradient at its start comes out
        first = segmented_walk(walk, layout, segments, dht, H=H, K=K, V=V, device=device, reverse=True)
        dh0 = first if want_dh0 else None
    if not erase:  # T = I: dṼ = dU
        return dh, du, dh0
    # in place: each program reads its whole [BT, BV] tile of dU before it writes that tile of dṼ
    state_bwd_dv_kernel[grid](
        T_inv, du, du, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, V=V, BT=layout.BT, BV=BV, IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
    )  # fmt: skip
    dv_tilde = du
    return dh, dv_tilde, dh0


def _walk(
    w_tilde, G, k_tilde_t, du, dh, T, cu_seqlens, chunk_offsets, N, V, dht, dh0, *, H, K, BT, precision, store_chunks,
    transition=False,
) -> None:  # fmt: skip
    """One launch of `state_bwd_kernel` over `N` sequences (packed by `cu_seqlens` / `chunk_offsets`, or rows of
    `T`) whose gradients have `V` columns (`K` with `transition`), from `dht` at their ends (or 0), the gradients at
    their starts into `dh0` (if any)."""
    # the whole key dim in one tile; two pipeline stages up to K = 128 (at 256 they would take more than Hopper's
    # 227 KB of shared memory a block)
    BK = max(16, next_power_of_2(K))
    stages = 2 if BK <= 128 else 1
    # the pipeliner prefetches the products' operands, W̃ and K̃ᵀ (not the plain loads of `dU`, `E_c`)
    row = BK * (w_tilde.element_size() + (0 if k_tilde_t is None else k_tilde_t.element_size()))
    BV = value_block(N * H, K, V, du.device, lambda bv: stages * BT * row, wide=reads_ahead(precision), backward=True)
    state_bwd_kernel[(cdiv(V, BV), N * H)](
        w_tilde, G, k_tilde_t, du, dh, dht, dh0, cu_seqlens, chunk_offsets, T,
        H=H, K=K, V=V, BT=BT, BK=BK, BV=BV, ERASE=k_tilde_t is not None,
        USE_G=G is not None, USE_DHT=dht is not None, STORE_DH0=dh0 is not None, IS_VARLEN=cu_seqlens is not None,
        PRECISION=precision, AHEAD=reads_ahead(precision), TRANSITION=transition, STORE_CHUNKS=store_chunks,
        num_warps=4, num_stages=stages,
    )  # fmt: skip
