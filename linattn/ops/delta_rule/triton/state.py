"""Stage 3 of the chunked forward: the sequential hand-over of the state from chunk to chunk.

For the chunks `c = 0, 1, …` of one sequence, from `h_0` = the initial state (or 0):

    U_c     = Ũ_c − K̃_c h_c                                  pseudo-values   [BT, V]
    h_{c+1} = Γ_C h_c + (W_c ⊙ Γ_C / Γ)ᵀ U_c                  state           [K, V]

with `Γ_C / Γ_t = exp(G_last − G_t)` (`G_last` the chunk's last real token). Each chunk-start state `h_c` and
every `U_c` is stored for stage 4; the last `h` is the final state. This is the only sequential part of the
forward: the programs run in parallel over (sequence, head, value block), each owning a `[K, BV]` tile of the
state in float32 registers (`BK = next_pow2(K) ≤ 256`, `BV` 16 – 64 as `value_block.py` chooses from the grid,
`BK · BV ≤ 8192` floats) for its whole walk.
`tl.dot` asks for `input_precision="tf32x3"` (true float32; see `wy.py`). Float32 write directions without a decay
(VLA's `α̂`) are read from a copy laid out along the tokens (`transpose.py`), so that `W_cᵀ U_c` gets its operand in
16-byte pieces (VLA's pass at 64K, K = 128, in about a third of the time; `python -m linattn.bench profile
--contenders "VLA triton"`).

Without the erase term (`ERASE` off: linear attention and scalar-decay GLA, `T = I`, `K̃ = 0`) the pseudo-values
are the values themselves, `U_c = V_c`: the kernel reads `V` where it would read `Ũ`, skips `K̃ h`, and stores no
`U` (stage 4 reads `V`).

Where the grid leaves most SMs idle (few sequence-heads: `segments.segment_count`), or asked for (`segments=`), the
pass runs in segments of each sequence at once (`segments.py`): the same kernel walks them as packed sequences,
first from zero (and, `TRANSITION`, on identity columns with `Ũ = 0`: each segment's `K × K` transition), then,
after their start states are combined, again.
"""

from __future__ import annotations

from functools import partial

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.segments import segment_count, segmented_walk
from linattn.ops.delta_rule.triton.transpose import chunk_transpose, load_chunk_transposed
from linattn.ops.delta_rule.triton.value_block import BLOCK_V, value_block
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import sequence_coords, state_tile
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma


def state_ref(
    k_tilde: torch.Tensor | None,
    u_tilde: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    layout: ChunkLayout,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(h, U, final_state)` as `state_fwd` returns them (`[B, NT, H, K, V]`, `[B, T, H, V]`, `[N, H, K, V]`),
    in float64. `k_tilde` None: no erase term, `u_tilde` is `V` and `U = V`."""
    B, _, H, K = w.shape
    V = u_tilde.shape[-1]
    u_tilde, w = u_tilde.double(), w.double()
    k_tilde = None if k_tilde is None else k_tilde.double()
    f64 = {"dtype": torch.float64, "device": w.device}
    h = torch.zeros(B, layout.NT, H, K, V, **f64)
    U = torch.zeros_like(u_tilde)
    final = torch.zeros(layout.N, H, K, V, **f64)
    for n, b, bos, eos, first in layout.sequences():
        S = torch.zeros(H, K, V, **f64) if initial_state is None else initial_state[n].double()
        for i, start in enumerate(range(bos, eos, layout.BT)):
            c = slice(start, min(start + layout.BT, eos))
            h[b, first + i] = S
            U_c = u_tilde[b, c].transpose(0, 1)  # [H, L, V]
            if k_tilde is not None:
                U_c = U_c - k_tilde[b, c].transpose(0, 1) @ S
            U[b, c] = U_c.transpose(0, 1)
            w_c = w[b, c].transpose(0, 1)  # [H, L, K]
            if G is not None:
                G_c = G[b, c].T.double()  # [H, L]
                S = G_c[:, -1, None, None].exp() * S
                w_c = w_c * (G_c[:, -1:] - G_c).exp()[..., None]
            S = S + w_c.transpose(-1, -2) @ U_c  # [H, K, L] @ [H, L, V]
        final[n] = S
    return h, U, final


@triton.jit(do_not_specialize=["T"])
def state_fwd_kernel(
    k_tilde,
    u_tilde,
    w,
    G,
    h,
    U,
    h0,
    ht,
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
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
    W_T: tl.constexpr,
    TRANSITION: tl.constexpr,
    STORE_CHUNKS: tl.constexpr,
):
    """One program per (value block, sequence · head) walks the sequence's chunks in order. Without `ERASE`,
    `u_tilde` points at the values `V` (any float dtype) and `k_tilde`, `U` are unused. `PRECISION`: of the
    products, `"tf32x3"` or (a bfloat16 training call, `precision.py`) `"tf32"`. `W_T`: `w` holds each chunk's
    rows transposed (`[B, NT, H, K, BT]` float32, `transpose.py`; only without a decay). `TRANSITION`: the state's
    `V = K` columns start as the identity's and `Ũ = 0` (`u_tilde` unused), so the walk ends at the product of the
    chunks' transitions (`segments.py`). `STORE_CHUNKS`: store `h` and `U` (off for `segments.py`'s first walk)."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)

    o_i = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_h, o_h = state_tile(0, i_v, K, V, BK, BV)

    # [BK, BV] state tile, float32
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if TRANSITION:
        # [BK, BV] columns o_v of the K × K identity
        b_h += tl.where(o_k[:, None] == o_v[None, :], 1.0, 0.0)
    if USE_H0:
        b_h += tl.load(h0 + i_nh.to(tl.int64) * K * V + o_h, mask=m_h, other=0).to(tl.float32)

    for i_t in range(0, NT):
        if STORE_CHUNKS:
            tl.store(h + ((boh + i_t) * H + i_h) * K * V + o_h, b_h, mask=m_h)

        # this head at the chunk's first token; a token step is H·(K | V | 1) elements
        t0 = bos + i_t * BT
        m_t = o_i < T - i_t * BT
        m_tk = m_t[:, None] & m_k[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        o_tk = (t0 * H + i_h) * K + o_i[:, None] * (H * K) + o_k[None, :]
        o_tv = (t0 * H + i_h) * V + o_i[:, None] * (H * V) + o_v[None, :]
        # [BT, BV]
        if TRANSITION:
            b_U = tl.zeros([BT, BV], dtype=tl.float32)
        else:
            b_U = tl.load(u_tilde + o_tv, mask=m_tv, other=0).to(tl.float32)
        if ERASE:
            # [BT, BK]
            b_kt = tl.load(k_tilde + o_tk, mask=m_tk, other=0)
            # [BT, BV] − [BT, BK] @ [BK, BV] -> [BT, BV]
            b_U -= mma(b_kt, b_h, PRECISION)
            if STORE_CHUNKS:
                tl.store(U + o_tv, b_U, mask=m_tv)

        if W_T:
            # [BK, BT] the chunk's write directions transposed, contiguous along the tokens (`transpose.py`)
            b_wt = load_chunk_transposed(w, (boh + i_t) * H + i_h, o_k, m_k, o_i, K, BT)
        else:
            # [BT, BK] write directions of the chunk
            b_w = tl.load(w + o_tk, mask=m_tk, other=0).to(tl.float32)
            if USE_G:
                # [BT] and the scalar at the chunk's last real token
                b_g = tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0)
                b_g_last = tl.load(G + (t0 + tl.minimum(BT, T - i_t * BT) - 1) * H + i_h)
                b_h *= tl.exp(b_g_last)
                b_w *= tl.exp(b_g_last - b_g)[:, None]
            b_wt = tl.trans(b_w)
        # [BK, BT] @ [BT, BV] -> [BK, BV]
        b_h += mma(b_wt, b_U, PRECISION)

    if STORE_HT:
        tl.store(ht + i_nh.to(tl.int64) * K * V + o_h, b_h, mask=m_h)


def state_fwd(
    k_tilde: torch.Tensor | None,
    u_tilde: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
    store: torch.dtype = torch.float32,
    segments: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """`K̃: [B, T, H, K]`, `Ũ: [B, T, H, V]` (stage 2's), `w: [B, T, H, K]`, `G: [B, T, H]` or None,
    `initial_state: [N, H, K, V]` (any float dtype) or None. Without the erase term pass `k_tilde=None` and the
    values `v: [B, T, H, V]` (any float dtype) as `u_tilde`: then `U = V` and is not stored. `precision`: of the
    products (`precision.state_precision` in the forward, `grad_precision` in the backward's recompute). `store`: the
    dtype `h` and `U` are stored in (the fast level's bfloat16, `precision.py`; the final state stays float32).
    `segments`: each sequence's segments walked at once (`segments.py`; 1 the one pass; None: `segment_count`'s).

    Returns the chunk-start states `h: [B, NT, H, K, V]` and pseudo-values `U: [B, T, H, V]` (None without the erase
    term) in `store`, and the float32 final state `[N, H, K, V]` (None unless `output_final_state`).
    """
    B, T, H, K = w.shape
    V = u_tilde.shape[-1]
    erase = k_tilde is not None
    h = torch.empty(B, layout.NT, H, K, V, dtype=store, device=w.device)
    U = torch.empty(B, T, H, V, dtype=store, device=w.device) if erase else None
    # float32 write directions without a decay (VLA's α̂) would go from the load straight into the product that
    # contracts over tokens and, as the state backward's K̃ would, be copied in 4 bytes at a time: so they are laid
    # out along the tokens first (`transpose.py`). Scaled by a decay, or converted from 16 bits, they pass through
    # registers anyway.
    transposed = w.dtype == torch.float32 and G is None
    walk = partial(
        _walk, k_tilde, u_tilde, chunk_transpose(w, layout) if transposed else w, G, h, U, T, H=H, K=K, BT=layout.BT,
        precision=precision, w_t=transposed,
    )  # fmt: skip
    if segments is None:
        segments = segment_count(layout, layout.N * H * cdiv(V, BLOCK_V), w.device)
    if segments <= 1:
        ht = torch.empty(layout.N, H, K, V, dtype=torch.float32, device=w.device) if output_final_state else None
        walk(layout.cu_seqlens, layout.chunk_offsets, layout.N, V, initial_state, ht, store_chunks=True)
        return h, U, ht
    final = segmented_walk(walk, layout, segments, initial_state, H=H, K=K, V=V, device=w.device)
    return h, U, (final if output_final_state else None)


def _walk(
    k_tilde, u_tilde, w, G, h, U, T, cu_seqlens, chunk_offsets, N, V, h0, ht, *, H, K, BT, precision, w_t,
    store_chunks, transition=False,
) -> None:  # fmt: skip
    """One launch of `state_fwd_kernel` over `N` sequences (packed by `cu_seqlens` / `chunk_offsets`, or rows of
    `T`) whose states have `V` columns (`K` with `transition`), from `h0` (or 0), the end states into `ht` (if any)."""
    # the whole key dim in one tile (the state's rows cannot be split across loop steps), the value dim in blocks
    # of 16 – 64 (`value_block`); every dim ≥ 16 for tl.dot
    BK = max(16, next_power_of_2(K))
    # K = V = 128: three stages prefetch the next chunks' K̃, Ũ, w while this one multiplies (`python -m
    # linattn.bench stages` times the pass at 2 and 3); at K = 256 two would take 209 KB of shared memory (16 columns)
    stages = 3 if BK <= 128 else 1
    row = BK * (w.element_size() + (0 if k_tilde is None else k_tilde.element_size()))
    BV = value_block(
        N * H, K, V, w.device, lambda bv: stages * BT * (row + bv * u_tilde.element_size()), wide=precision != "tf32x3"
    )
    grid = (cdiv(V, BV), N * H)
    state_fwd_kernel[grid](
        k_tilde, u_tilde, w, G, h, U, h0, ht, cu_seqlens, chunk_offsets, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV,
        ERASE=k_tilde is not None, USE_G=G is not None, USE_H0=h0 is not None, STORE_HT=ht is not None,
        IS_VARLEN=cu_seqlens is not None, PRECISION=precision, W_T=w_t, TRANSITION=transition,
        STORE_CHUNKS=store_chunks, num_warps=4, num_stages=stages,
    )  # fmt: skip
