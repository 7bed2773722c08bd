"""CCQ's running sums at every chunk boundary: a parallel pass per chunk, then a scan over chunks.

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

Neither recurrence multiplies its state by anything but the scalar `Γ_C`: each chunk's term (the last column
above) does not depend on the state. So each direction runs in two launches:

1. `ccq_sums_fwd_kernel` / `ccq_sums_bwd_kernel`, one program per (column block, chunk, batch row · head), in
   parallel: the chunk's term, one `[K, BT] @ [BT, BV]` product, written into that chunk's row of the state buffer,
   and `log Γ_C` into `log_decay [B, NT, H]`.
2. `ccq_scan_kernel`, one program per (block of state entries, sequence · head): the decayed prefix sum of those
   rows over chunks, in place (forward, or in reverse), `CB` chunks a step (`utils/scan.py`). Every
   entry is independent, so the scan is elementwise: its cost is the rows' bytes, not a chain of matrix products.

(A walk that formed each chunk's product inside its sequential loop would run one product after another, on
`K / 16` programs a head.) The products take `tf32x3` (true float32) unless both
factors are raw inputs (no decay in the forward), where `precision.raw_precision` applies, or a bfloat16 training
call allows one tf32 pass (the forward: `q'` the only output, `precision.state_precision`; the backward: no final
state's gradient, `precision.grad_precision`; the delta rule's reasons hold here, `utils/precision.py`).

`chunk_decay` (the decays of one chunk from the raw `g`, by an in-register cumsum) is shared by every CCQ kernel,
so no kernel needs a stored cumulative decay.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords, sequence_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import raw_precision
from linattn.ops.utils.scan import SCAN_BE, SCAN_CB, scan_rows

SUMS_BV = 32  # columns of a chunk's term per program of the sums kernels


def sums_warps(BK: int, precision: str) -> int:
    """Warps of the sums kernels: two for one-pass products of up to 128 key rows, else four.

    bf16 training calls (one pass) at 64K, forward / backward: at K = 128 0.80 / 1.01 ms with 4 warps, 0.74 / 0.85
    with 2, 0.96 / 1.10 with 8; at K = 32 0.093 / 0.141, 0.074 / 0.117, 0.15 / 0.20 (`python -m linattn.bench profile
    --contenders CCQ-GDN --K 32,128`, with the count changed). With `tf32x3` two warps spill
    (`scripts/compile_kernels.py`): 0.56 KB a thread at K = 128 and 29 KB at K = 256, where four hold the `[K, 32]`
    tile without spilling at K = 128.
    """
    return 2 if precision == "tf32" and BK <= 128 else 4


@triton.jit
def chunk_decay(g, t0, i_h, o_i, m_t, last, H: tl.constexpr, BT: tl.constexpr, USE_G: tl.constexpr):
    """The decays of the chunk starting at token `t0`, from the raw log-decays `g` (`[B, T, H]`, any float dtype):
    `(Γ [BT], Γ_C/Γ [BT], D [BT, BT], G_last)` with `G` = the chunk-local cumsum of `g`, `Γ_t = exp(G_t)`,
    `D_ts = exp(G_t − G_s)` on `s ≤ t` of real rows (masked *before* `exp`: the other differences are positive and
    can overflow), `G_last` the chunk's log-decay (`Γ_C = exp(G_last)`). Rows past the sequence's end are 0;
    without `USE_G` every decay is 1."""
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
    return b_gamma, b_to_end, b_D, b_G_last


@triton.jit
def store_term(hC, hm, hZ, log_decay, b_C, b_m, b_Z, b_G_last, i_row, i_v, o_k, m_k, o_v, m_v, K: tl.constexpr):
    """One chunk's term into its state row `i_row` (`[rows, K, K]`, `[rows, K]`, `[rows]` buffers): the `[BK, BV]`
    tile of `C` and `[BV]` of `m` of column block `i_v`; its first column block's program also stores `Z` and the
    chunk's log-decay `G_last`."""
    b_C = b_C.to(hC.dtype.element_ty)  # float32, or the fast level's bfloat16
    tl.store(hC + i_row * K * K + o_k[:, None] * K + o_v[None, :], b_C, mask=m_k[:, None] & m_v[None, :])
    tl.store(hm + i_row * K + o_v, b_m, mask=m_v)
    if i_v == 0:
        tl.store(hZ + i_row, b_Z)
        tl.store(log_decay + i_row, b_G_last)


@triton.jit(do_not_specialize=["T"])
def ccq_sums_fwd_kernel(
    k,
    g,
    hC,
    hm,
    hZ,
    log_decay,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (column block, chunk, batch row · head): `(K ⊙ Γ_C/Γ)ᵀ K`, `(Γ_C/Γ)ᵀ K`, `Σ Γ_C/Γ`."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    t0 = bos + i_t * BT
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1
    _, b_to_end, _, b_G_last = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < K
    # this head at the chunk's first token; a token step is H·K elements
    o_t = (t0 * H + i_h) * K + o_i[:, None] * (H * K)
    # [BT, BK] the chunk's keys, decayed to its end; [BT, BV] their column block
    b_k = tl.load(k + o_t + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
    b_kv = tl.load(k + o_t + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0).to(tl.float32)
    if USE_G:
        b_k *= b_to_end[:, None]
    # [BK, BT] @ [BT, BV] -> [BK, BV]
    b_C = tl.dot(tl.trans(b_k), b_kv, input_precision=PRECISION)
    b_m = tl.sum(b_kv * b_to_end[:, None], axis=0)
    store_term(hC, hm, hZ, log_decay, b_C, b_m, tl.sum(b_to_end), b_G_last, i_tg * H + i_h, i_v, o_k, m_k, o_v,
               m_v, K)  # fmt: skip


@triton.jit(do_not_specialize=["T", "R"])
def ccq_sums_bwd_kernel(
    q,
    do,
    g,
    rows,
    dhC,
    dhm,
    dhZ,
    log_decay,
    cu_seqlens,
    chunk_indices,
    T,
    R,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (column block, chunk, batch row · head): `(diag(Γ s) Q)ᵀ dY`, `Σ Γ (dr q − ρ s dy)`,
    `Σ Γ dz`. `rows` holds the per-row scalars in planes of `R = B·T·H` floats: `s, ρ, dr, dz`."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    t0 = bos + i_t * BT
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1
    b_gamma, _, _, b_G_last = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
    # [BT] per-row scalars (0 on padding)
    o_r = t0 * H + i_h + o_i * H
    b_s = tl.load(rows + o_r, mask=m_t, other=0)
    b_rho = tl.load(rows + R + o_r, mask=m_t, other=0)
    b_dr = tl.load(rows + 2 * R + o_r, mask=m_t, other=0)
    b_dz = tl.load(rows + 3 * R + o_r, mask=m_t, other=0)

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < K
    o_t = (t0 * H + i_h) * K + o_i[:, None] * (H * K)
    m_tv = m_t[:, None] & m_v[None, :]
    # [BT, BK] queries scaled by Γ s; [BT, BV] column blocks of the queries and of dY
    b_q = tl.load(q + o_t + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
    b_qv = tl.load(q + o_t + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
    b_do = tl.load(do + o_t + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
    b_q *= (b_gamma * b_s)[:, None]
    # [BK, BT] @ [BT, BV] -> [BK, BV]
    b_dC = tl.dot(tl.trans(b_q), b_do, input_precision=PRECISION)
    b_db = b_dr[:, None] * b_qv - (b_rho * b_s)[:, None] * b_do
    b_dm = tl.sum(b_gamma[:, None] * b_db, axis=0)
    store_term(dhC, dhm, dhZ, log_decay, b_dC, b_dm, tl.sum(b_gamma * b_dz), b_G_last, i_tg * H + i_h, i_v, o_k,
               m_k, o_v, m_v, K)  # fmt: skip


@triton.jit(do_not_specialize=["T"])
def ccq_scan_kernel(
    hC,
    hm,
    hZ,
    log_decay,
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
    BE: tl.constexpr,
    CB: tl.constexpr,
    USE_G: tl.constexpr,
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    REVERSE: tl.constexpr,
):
    """One program per (block of `BE` entries of `C`, sequence · head), and one more per sequence · head for `m`
    and `Z`."""
    i_e, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    _, _, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)
    if i_e < tl.cdiv(K * K, BE):
        o_e = i_e * BE + tl.arange(0, BE)
        scan_rows(hC, C0, Ct, log_decay, i_nh, i_h, boh, NT, o_e, o_e < K * K, H, K * K, CB, USE_G, USE_H0, STORE_HT,
                  REVERSE)  # fmt: skip
    else:
        o_k = tl.arange(0, BK)
        scan_rows(hm, m0, mt, log_decay, i_nh, i_h, boh, NT, o_k, o_k < K, H, K, CB, USE_G, USE_H0, STORE_HT, REVERSE)
        o_1 = tl.arange(0, 1)
        scan_rows(hZ, Z0, Zt, log_decay, i_nh, i_h, boh, NT, o_1, o_1 < 1, H, 1, CB, USE_G, USE_H0, STORE_HT, REVERSE)


State = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _state_buffers(B: int, H: int, K: int, layout: ChunkLayout, device: torch.device, store: torch.dtype) -> State:
    """`(C [B, NT, H, K, K], m [B, NT, H, K], Z [B, NT, H])`, one row per chunk: `C` in `store`, the rest float32."""
    f32 = {"dtype": torch.float32, "device": device}
    return (
        torch.empty(B, layout.NT, H, K, K, dtype=store, device=device),
        torch.empty(B, layout.NT, H, K, **f32),
        torch.empty(B, layout.NT, H, **f32),
    )


def _final_buffers(N: int, H: int, K: int, device: torch.device) -> State:
    """Float32 `(C [N, H, K, K], m [N, H, K], Z [N, H])`."""
    f32 = {"dtype": torch.float32, "device": device}
    return torch.empty(N, H, K, K, **f32), torch.empty(N, H, K, **f32), torch.empty(N, H, **f32)


def _scan(h: State, log_decay: torch.Tensor | None, start: State | None, end: State | None, layout: ChunkLayout,
          reverse: bool) -> None:  # fmt: skip
    """`ccq_scan_kernel` over the chunk rows `h` (each chunk's term, replaced in place by the state entering it),
    from `start` (or 0) into `end` (when given); `log_decay` `[B, NT, H]` (each chunk's `log Γ_C`) or None."""
    H, K = h[0].shape[2], h[0].shape[3]
    C0, m0, Z0 = (None, None, None) if start is None else start
    Ct, mt, Zt = (None, None, None) if end is None else end
    grid = (cdiv(K * K, SCAN_BE) + 1, layout.N * H)
    ccq_scan_kernel[grid](
        *h, log_decay, C0, m0, Z0, Ct, mt, Zt, layout.cu_seqlens, layout.chunk_offsets, layout.T,
        H=H, K=K, BT=layout.BT, BK=next_power_of_2(K), BE=SCAN_BE, CB=SCAN_CB,
        USE_G=log_decay is not None, USE_H0=start is not None, STORE_HT=end is not None,
        IS_VARLEN=layout.cu_seqlens is not None, REVERSE=reverse, num_warps=4,
    )  # fmt: skip


def state_fwd(
    k: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: State | None,
    output_final_state: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
    store: torch.dtype = torch.float32,
) -> tuple[State, State | None]:
    """`k: [B, T, H, K]` (float32, bfloat16 or float16), `g: [B, T, H]` or None, `initial_state = (C, m, Z)` or None;
    `precision` of the products with decayed keys (one tf32 pass where the caller's outputs allow it; without decay
    the keys are raw and `precision.raw_precision` applies); `store` the dtype of the chunk-start `C` (the fast
    level's bfloat16: each chunk's term is rounded to it, and the scan sums the rounded terms in float32).

    Returns the chunk-start states `(C [B, NT, H, K, K], m [B, NT, H, K], Z [B, NT, H])` and the final state
    `(C [N, H, K, K], m [N, H, K], Z [N, H])` (None unless `output_final_state`), float32 but the chunk-start `C`.
    """
    B, T, H, K = k.shape
    h = _state_buffers(B, H, K, layout, k.device, store)
    log_decay = torch.empty(B, layout.NT, H, dtype=torch.float32, device=k.device)
    final = _final_buffers(layout.N, H, K, k.device) if output_final_state else None
    BK = next_power_of_2(max(16, K))
    # without decay both factors of KᵀK are raw inputs
    precision = precision if g is not None else raw_precision(k.dtype)
    grid = (cdiv(K, SUMS_BV), layout.NT, B * H)
    ccq_sums_fwd_kernel[grid](
        k, g, *h, log_decay, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, K=K, BT=layout.BT, BK=BK, BV=SUMS_BV, USE_G=g is not None, IS_VARLEN=layout.cu_seqlens is not None,
        PRECISION=precision, num_warps=sums_warps(BK, precision),
    )  # fmt: skip
    _scan(h, log_decay if g is not None else None, initial_state, final, layout, reverse=False)
    return h, final


def state_bwd(
    q: torch.Tensor,
    do: torch.Tensor,
    g: torch.Tensor | None,
    rows: torch.Tensor,
    dht: State | None,
    with_initial_state: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
    store: torch.dtype = torch.float32,
) -> tuple[State, State | None]:
    """`q, do: [B, T, H, K]`, `g: [B, T, H]` or None, `rows: [4, B, T, H]` float32 (`local_bwd.rows_bwd`), `dht` the
    final state's gradient `(dC, dm, dZ)` (each contiguous, zeros where unused) or None; `precision` of the
    products (`precision.grad_precision`); `store` the dtype of `dC` (as `state_fwd`'s).

    Returns `dh = (dC [B, NT, H, K, K], dm [B, NT, H, K], dZ [B, NT, H])` (`dC` in `store`, the rest float32), the
    gradients of each chunk's end state, and the initial state's float32 gradient `(dC [N, H, K, K], dm [N, H, K],
    dZ [N, H])` if `with_initial_state`, else None.
    """
    B, T, H, K = q.shape
    dh = _state_buffers(B, H, K, layout, q.device, store)
    log_decay = torch.empty(B, layout.NT, H, dtype=torch.float32, device=q.device)
    dh0 = _final_buffers(layout.N, H, K, q.device) if with_initial_state else None
    BK = next_power_of_2(max(16, K))
    grid = (cdiv(K, SUMS_BV), layout.NT, B * H)
    ccq_sums_bwd_kernel[grid](
        q, do, g, rows, *dh, log_decay, layout.cu_seqlens, layout.chunk_indices, T, B * T * H,
        H=H, K=K, BT=layout.BT, BK=BK, BV=SUMS_BV, USE_G=g is not None, IS_VARLEN=layout.cu_seqlens is not None,
        PRECISION=precision, num_warps=sums_warps(BK, precision),
    )  # fmt: skip
    _scan(dh, log_decay if g is not None else None, dht, dh0, layout, reverse=True)
    return dh, dh0
