"""The two sequential walks of CCQ's chunked kernels: the running sums forward, their gradients in reverse.

Forward, for the chunks `c = 0, 1, …` of one sequence from the initial state (or 0), with `Γ_C / Γ_s` the decay
from token `s` to the chunk's last real token (`exp(G_last − G_s)`, 1 without `g`):

    C_{c+1} = Γ_C C_c + (K ⊙ Γ_C/Γ)ᵀ K        [K, K]
    m_{c+1} = Γ_C m_c + (Γ_C/Γ)ᵀ K            [K]
    Z_{c+1} = Γ_C Z_c + Σ_s Γ_C/Γ_s           scalar

Every chunk-start state `(C_c, m_c, Z_c)` is stored for the per-chunk kernels (`output.py`, `local_bwd.py`).

Backward, from the final state's gradient (or 0) down to the initial state's, with the per-row scalars of
`local_bwd.rows_bwd` (`s = −λ/z`, `ρ = r/z` centred or 0, `dr`, `dz`; `local_bwd.py` derives them):

    dC_c = Γ_C dC_{c+1} + (diag(Γ s) Q)ᵀ dY                 (the read  a_t = Γ_t C_cᵀ q_t + …, da_t = s_t dy_t)
    dm_c = Γ_C dm_{c+1} + Σ_t Γ_t (dr_t q_t − ρ_t s_t dy_t)  (the mean b_t = Γ_t m_c + …,    db_t = dr_t q_t − ρ_t da_t)
    dZ_c = Γ_C dZ_{c+1} + Σ_t Γ_t dz_t                      (the mass z_t = Γ_t Z_c + …)

storing `dh[c]` = the gradient of chunk `c`'s *end* state (what `local_bwd` pairs with `h[c]`, its start state).

Both walks run one program per (column block of `C`, sequence · head), holding a `[K, BV]` float32 tile of `C`
(or `dC`), the `[BV]` slice of `m` and the mass `Z` (carried as a one-element vector) in registers for the whole
sequence. Each chunk costs one `[K, BT] @ [BT, BV]` product: `tf32x3` (true float32) unless both factors are raw
inputs (no decay in the forward), where `precision.raw_precision` applies, or a bfloat16 training call allows one
tf32 pass (the forward: `q'` the only output, `precision.state_precision`; the backward: no final state's
gradient, `precision.grad_precision`; the delta rule's reasons hold here, `delta_rule/triton/precision.py`).

`chunk_decay` (the decays of one chunk from the raw `g`, by an in-register cumsum) is shared by every CCQ kernel,
so no kernel needs a stored cumulative decay.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.cumsum import ChunkLayout
from linattn.ops.delta_rule.triton.index import sequence_coords
from linattn.ops.delta_rule.triton.precision import raw_precision

# one column block of 16 per program: 8 programs per head at K = 128 (128 at B = 1, H = 16, about one per SM)
STATE_BV = 16
# sm_90, K = 128, bfloat16 (scripts/compile_kernels.py, Triton 3.6): 4 warps spill (104 – 148 B a thread), 8 do not
WALK_WARPS = 8


@triton.jit
def chunk_decay(g, t0, i_h, o_i, m_t, last, H: tl.constexpr, BT: tl.constexpr, USE_G: tl.constexpr):
    """The decays of the chunk starting at token `t0`, from the raw log-decays `g` (`[B, T, H]`, any float dtype):
    `(Γ [BT], Γ_C/Γ [BT], D [BT, BT], Γ_C)` with `G` = the chunk-local cumsum of `g`, `Γ_t = exp(G_t)`,
    `D_ts = exp(G_t − G_s)` on `s ≤ t` of real rows (masked *before* `exp`: the other differences are positive and
    can overflow), `Γ_C = exp(G_last)`. Rows past the sequence's end are 0; without `USE_G` every decay is 1."""
    m_O = (o_i[:, None] >= o_i[None, :]) & m_t[:, None]
    # [BT] chunk-local cumsum (padding loads 0, so it stays at G_last there); one code path with or without g
    if USE_G:
        b_G = tl.cumsum(tl.load(g + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32), axis=0)
    else:
        b_G = tl.zeros([BT], dtype=tl.float32)
    b_G_last = tl.sum(tl.where(o_i == last, b_G, 0.0))
    b_gamma = tl.where(m_t, tl.exp(b_G), 0.0)
    b_to_end = tl.where(m_t, tl.exp(b_G_last - b_G), 0.0)
    b_D = tl.exp(tl.where(m_O, b_G[:, None] - b_G[None, :], float("-inf")))
    b_gamma_last = tl.exp(b_G_last)
    return b_gamma, b_to_end, b_D, b_gamma_last


@triton.jit
def load_triple(C, m, Z, i_nh, o_h, m_h, o_v, m_v, o_1, K: tl.constexpr):
    """Sequence-head `i_nh`'s `[BK, BV]` tile of a `[K, K]` matrix, `[BV]` of a `[K]` vector and its scalar `[1]`
    (a state `(C, m, Z)` or its gradient), float32."""
    b_C = tl.load(C + i_nh.to(tl.int64) * K * K + o_h, mask=m_h, other=0).to(tl.float32)
    b_m = tl.load(m + i_nh.to(tl.int64) * K + o_v, mask=m_v, other=0).to(tl.float32)
    return b_C, b_m, tl.load(Z + i_nh + o_1).to(tl.float32)


@triton.jit
def start_triple(C, m, Z, i_nh, o_h, m_h, o_v, m_v, o_1, K: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                 GIVEN: tl.constexpr):  # fmt: skip
    """A walk's starting triple: `load_triple` when `GIVEN`, else zeros."""
    if GIVEN:
        b_C, b_m, b_Z = load_triple(C, m, Z, i_nh, o_h, m_h, o_v, m_v, o_1, K)
    else:
        b_C, b_m, b_Z = tl.zeros([BK, BV], tl.float32), tl.zeros([BV], tl.float32), tl.zeros([1], tl.float32)
    return b_C, b_m, b_Z


@triton.jit
def walk_tile(i_v, K: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Column block `i_v`'s share of a state: `(o_k [BK], o_v [BV], o_1 [1], m_k, m_v, m_h, o_h)`, `o_h` the offsets
    of its `[BK, BV]` tile inside one `[K, K]` matrix and `m_h` their mask."""
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < K
    return o_k, o_v, tl.arange(0, 1), m_k, m_v, m_k[:, None] & m_v[None, :], o_k[:, None] * K + o_v[None, :]


@triton.jit
def store_triple(C, m, Z, b_C, b_m, b_Z, i_nh, i_v, o_h, m_h, o_v, m_v, o_1, K: tl.constexpr):
    """`load_triple`'s inverse (`i_nh` may also be a chunk row of `[rows, K, K]` buffers); the scalar is stored by
    the first column block's program only."""
    tl.store(C + i_nh.to(tl.int64) * K * K + o_h, b_C, mask=m_h)
    tl.store(m + i_nh.to(tl.int64) * K + o_v, b_m, mask=m_v)
    if i_v == 0:
        tl.store(Z + i_nh + o_1, b_Z)


@triton.jit(do_not_specialize=["T"])
def ccq_state_fwd_kernel(
    k,
    g,
    hC,
    hm,
    hZ,
    C0,
    m0,
    Z0,
    Ct,
    mt,
    Zt,
    cu_seqlens,
    chunk_offsets,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (column block, sequence · head) walks the sequence's chunks in order; the program of the
    first column block also stores `Z`."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)

    o_i = tl.arange(0, BT)
    o_k, o_v, o_1, m_k, m_v, m_h, o_h = walk_tile(i_v, K, BK, BV)

    # [BK, BV], [BV], [1] float32
    b_C, b_m, b_Z = start_triple(C0, m0, Z0, i_nh, o_h, m_h, o_v, m_v, o_1, K, BK, BV, USE_H0)

    for i_t in range(0, NT):
        store_triple(hC, hm, hZ, b_C, b_m, b_Z, (boh + i_t) * H + i_h, i_v, o_h, m_h, o_v, m_v, o_1, K)

        # this head at the chunk's first token; a token step is H·K elements
        t0 = bos + i_t * BT
        m_t = o_i < T - i_t * BT
        last = tl.minimum(BT, T - i_t * BT) - 1
        _, b_to_end, _, b_gamma_last = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
        o_t = (t0 * H + i_h) * K + o_i[:, None] * (H * K)
        # [BT, BK] the chunk's keys, decayed to its end; [BT, BV] their column block
        b_k = tl.load(k + o_t + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
        b_kv = tl.load(k + o_t + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0).to(tl.float32)
        if USE_G:
            b_k *= b_to_end[:, None]
        # [BK, BT] @ [BT, BV] -> [BK, BV]
        b_C = b_C * b_gamma_last + tl.dot(tl.trans(b_k), b_kv, input_precision=PRECISION)
        b_m = b_m * b_gamma_last + tl.sum(b_kv * b_to_end[:, None], axis=0)
        b_Z = b_Z * b_gamma_last + tl.sum(b_to_end)

    if STORE_HT:
        store_triple(Ct, mt, Zt, b_C, b_m, b_Z, i_nh, i_v, o_h, m_h, o_v, m_v, o_1, K)


@triton.jit(do_not_specialize=["T", "R"])
def ccq_state_bwd_kernel(
    q,
    do,
    g,
    rows,
    dhC,
    dhm,
    dhZ,
    dCt,
    dmt,
    dZt,
    dC0,
    dm0,
    dZ0,
    cu_seqlens,
    chunk_offsets,
    T,
    R,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    USE_DHT: tl.constexpr,
    STORE_DH0: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (column block, sequence · head) walks the sequence's chunks from the last to the first.
    `rows` holds the per-row scalars in planes of `R = B·T·H` floats: `s, ρ, dr, dz` (and `dG_Γ`, unused here)."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)

    o_i = tl.arange(0, BT)
    o_k, o_v, o_1, m_k, m_v, m_h, o_h = walk_tile(i_v, K, BK, BV)

    # [BK, BV], [BV], [1] gradients of the state at the end of the current chunk, float32
    b_dC, b_dm, b_dZ = start_triple(dCt, dmt, dZt, i_nh, o_h, m_h, o_v, m_v, o_1, K, BK, BV, USE_DHT)

    for i_t in range(NT - 1, -1, -1):
        store_triple(dhC, dhm, dhZ, b_dC, b_dm, b_dZ, (boh + i_t) * H + i_h, i_v, o_h, m_h, o_v, m_v, o_1, K)

        t0 = bos + i_t * BT
        m_t = o_i < T - i_t * BT
        last = tl.minimum(BT, T - i_t * BT) - 1
        b_gamma, _, _, b_gamma_last = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
        # [BT] per-row scalars (0 on padding)
        o_r = t0 * H + i_h + o_i * H
        b_s = tl.load(rows + o_r, mask=m_t, other=0)
        b_rho = tl.load(rows + R + o_r, mask=m_t, other=0)
        b_dr = tl.load(rows + 2 * R + o_r, mask=m_t, other=0)
        b_dz = tl.load(rows + 3 * R + o_r, mask=m_t, other=0)
        o_t = (t0 * H + i_h) * K + o_i[:, None] * (H * K)
        m_tv = m_t[:, None] & m_v[None, :]
        # [BT, BK] queries scaled by Γ s; [BT, BV] column blocks of the queries and of dY
        b_q = tl.load(q + o_t + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
        b_qv = tl.load(q + o_t + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
        b_do = tl.load(do + o_t + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
        b_q *= (b_gamma * b_s)[:, None]
        # [BK, BT] @ [BT, BV] -> [BK, BV]
        b_dC = b_dC * b_gamma_last + tl.dot(tl.trans(b_q), b_do, input_precision=PRECISION)
        b_db = b_dr[:, None] * b_qv - (b_rho * b_s)[:, None] * b_do
        b_dm = b_dm * b_gamma_last + tl.sum(b_gamma[:, None] * b_db, axis=0)
        b_dZ = b_dZ * b_gamma_last + tl.sum(b_gamma * b_dz)

    if STORE_DH0:
        store_triple(dC0, dm0, dZ0, b_dC, b_dm, b_dZ, i_nh, i_v, o_h, m_h, o_v, m_v, o_1, K)


State = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _state_buffers(B: int, H: int, K: int, layout: ChunkLayout, device: torch.device) -> State:
    """Float32 `(C [B, NT, H, K, K], m [B, NT, H, K], Z [B, NT, H])`, one row per chunk."""
    f32 = {"dtype": torch.float32, "device": device}
    return (
        torch.empty(B, layout.NT, H, K, K, **f32),
        torch.empty(B, layout.NT, H, K, **f32),
        torch.empty(B, layout.NT, H, **f32),
    )


def _final_buffers(N: int, H: int, K: int, device: torch.device) -> State:
    """Float32 `(C [N, H, K, K], m [N, H, K], Z [N, H])`."""
    f32 = {"dtype": torch.float32, "device": device}
    return torch.empty(N, H, K, K, **f32), torch.empty(N, H, K, **f32), torch.empty(N, H, **f32)


def state_fwd(
    k: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: State | None,
    output_final_state: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
) -> tuple[State, State | None]:
    """`k: [B, T, H, K]` (float32, bfloat16 or float16), `g: [B, T, H]` or None, `initial_state = (C, m, Z)` or None;
    `precision` of the products with decayed keys (one tf32 pass where the caller's outputs allow it; without decay
    the keys are raw and `precision.raw_precision` applies).

    Returns the chunk-start states `(C [B, NT, H, K, K], m [B, NT, H, K], Z [B, NT, H])` and the final state
    `(C [N, H, K, K], m [N, H, K], Z [N, H])` (None unless `output_final_state`), all float32.
    """
    B, T, H, K = k.shape
    h = _state_buffers(B, H, K, layout, k.device)
    final = _final_buffers(layout.N, H, K, k.device) if output_final_state else (None, None, None)
    C0, m0, Z0 = (None, None, None) if initial_state is None else initial_state
    # the whole key dim in one tile (a state row cannot be split across loop steps), columns in blocks of 16
    BK = max(16, triton.next_power_of_2(K))
    grid = (triton.cdiv(K, STATE_BV), layout.N * H)
    ccq_state_fwd_kernel[grid](
        k, g, *h, C0, m0, Z0, *final, layout.cu_seqlens, layout.chunk_offsets, T,
        H=H, K=K, BT=layout.BT, BK=BK, BV=STATE_BV,
        USE_G=g is not None, USE_H0=initial_state is not None, STORE_HT=output_final_state,
        IS_VARLEN=layout.cu_seqlens is not None,
        # without decay both factors of KᵀK are raw inputs
        PRECISION=precision if g is not None else raw_precision(k.dtype),
        num_warps=WALK_WARPS, num_stages=2 if BK <= 128 else 1,
    )  # fmt: skip
    return h, (final if output_final_state else None)


def state_bwd(
    q: torch.Tensor,
    do: torch.Tensor,
    g: torch.Tensor | None,
    rows: torch.Tensor,
    dht: State | None,
    with_initial_state: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
) -> tuple[State, State | None]:
    """`q, do: [B, T, H, K]`, `g: [B, T, H]` or None, `rows: [5, B, T, H]` float32 (`local_bwd.rows_bwd`), `dht` the
    final state's gradient `(dC, dm, dZ)` (each contiguous, zeros where unused) or None; `precision` of the
    products (`precision.grad_precision`).

    Returns float32 `dh = (dC [B, NT, H, K, K], dm [B, NT, H, K], dZ [B, NT, H])`, the gradients of each chunk's
    end state, and the initial state's gradient `(dC [N, H, K, K], dm [N, H, K], dZ [N, H])` if
    `with_initial_state`, else None.
    """
    B, T, H, K = q.shape
    dh = _state_buffers(B, H, K, layout, q.device)
    dh0 = _final_buffers(layout.N, H, K, q.device) if with_initial_state else (None, None, None)
    dCt, dmt, dZt = (None, None, None) if dht is None else dht
    BK = max(16, triton.next_power_of_2(K))
    grid = (triton.cdiv(K, STATE_BV), layout.N * H)
    ccq_state_bwd_kernel[grid](
        q, do, g, rows, *dh, dCt, dmt, dZt, *dh0, layout.cu_seqlens, layout.chunk_offsets, T, B * T * H,
        H=H, K=K, BT=layout.BT, BK=BK, BV=STATE_BV,
        USE_G=g is not None, USE_DHT=dht is not None, STORE_DH0=with_initial_state,
        IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
        num_warps=WALK_WARPS, num_stages=2 if BK <= 128 else 1,
    )  # fmt: skip
    return dh, (dh0 if with_initial_state else None)
