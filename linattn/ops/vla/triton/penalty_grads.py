"""VLA's gate backward on the GPU: `∂L/∂u` and `∂L/∂M_0` (`chunk.penalty_grads`'s formulas) in three launches a slice.

With `a_t = A_t g_t` (the gate's map applied to `∂L/∂α_t`, `../chunk.py`), `α_t = ‖α_t‖ α̂_t` and
`S_c = Σ_{t∈c} (a_t α_tᵀ + α_t a_tᵀ)` over chunks `c` of `BT = 64` tokens:

    ∂L/∂u_s = −Σ_{t ≥ s in s's chunk} (a_t (α_tᵀ u_s) + α_t (a_tᵀ u_s)) − (Σ_{c' > c} S_{c'}) u_s + 2 F u_s
    ∂L/∂M_0 = −(Σ_c S_c) / 2 + F                                     F = −A_T sym(∂L/∂A_T) A_T, or 0

1. `vla_pair_sums_kernel`, one program per (column block, chunk, batch row · head): `S_c`'s columns,
   `Aᵀ Α[:, j] + Αᵀ A[:, j]` (`A`, `Α` the chunk's rows of `a`, `α`), into the chunk's row of `[B, NT, H, d, d]`.
2. `utils/scan.py`, in reverse and without decay: each row becomes the sum over the chunks after it,
   and the sum over all of them gives `∂L/∂M_0`.
3. `vla_penalty_grad_kernel`, one program per (column block, chunk, batch row · head): the chunk's
   `triu(U Αᵀ)`, `triu(U Aᵀ)` (`[BT, BT]`, query `s` ≤ key `t`), then its column block of `∂L/∂u`.

Precision. The products' operands are float32 (`a`, `α`, the sums): three tf32 passes (`tf32x3`), or one when the
caller says the gradients come from bfloat16 tokens alone (`gate.py`: a bfloat16 `u`, no initial `A`, at least
`ONE_PASS_TOKENS` tokens; `utils/precision.py`'s rule for the engine's backward) and no final state's
gradient comes in. `∂L/∂u` is then rounded to bfloat16, and one pass's ~2⁻¹¹ per product stays under that:
`python -m linattn.bench verify --ops vla` puts `du` at 1.39 – 1.45× the naive recurrence's error where three passes
give 1.16 – 1.22× (the `no-h0 no-ht` bfloat16 cases; the bound is 2×), and one pass takes a third to a half off the
three launches at 64K tokens (`python -m linattn.bench profile --contenders "VLA triton" --K 32,64,128`).

The per-chunk sums are float32 `d × d` matrices, `4 d² / 64` bytes a token and head: as much as `a` itself at
d = 64, but 1 KiB at d = 128 (1 GiB at 64K tokens and 16 heads). So the chunks are taken in `⌈d / 64⌉` slices, from
the last: each slice's sums are formed, scanned in reverse from the sums of the slices after it (the carry, `d × d` per
head), and used for its `∂L/∂u`; only one slice's sums are alive, never more bytes than `a`'s.

Launch. A program takes whole rows of columns (`BV = d` up to 128) and `∂L/∂u`'s key loop is not pipelined: with
32 columns a program and three stages, the key loop's buffers would take 136 KB of shared memory, one program an SM.
Whole rows take a quarter off the three launches at d = 128 and a tenth at d = 64 (the same time at d = 32; 64K
tokens, one-pass products, the same bits; `python -m linattn.bench profile --contenders "VLA triton" --K 32,64,128`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import chunk_layout
from linattn.ops.utils.scan import chunk_scan

MAX_HEAD_DIM = 128
BT = 64  # tokens per chunk
MAX_BV = 128  # columns per program: the whole row up to this (launch settings in the module docstring)


@triton.jit
def load_rows(x, o_t, m_t, o_c, m_c):
    """Rows `o_t` (`[BT]`, offsets of their first element) of columns `o_c` as a float32 `[BT, BC]` tile."""
    return tl.load(x + o_t[:, None] + o_c[None, :], mask=m_t[:, None] & m_c[None, :], other=0).to(tl.float32)


@triton.jit
def chunk_rows(n, T, C0, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    """The chunk of this program: chunk `C0 + (axis 1)` of batch row · head `axis 2`, in a slice of `num_programs(1)`
    chunks from chunk `C0`. Returns `(i_row, i_bh, o_t, m_t, b_n)`: its row of the slice's per-chunk sums
    `[B, slice, H, ...]`, the offsets `[BT]` of its tokens' rows (a token step is `H·D` elements), their mask and
    norms."""
    i_s, i_bh = tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(C0 + i_s, i_b, T, None, None, BT, False)
    o_i = i_t * BT + tl.arange(0, BT)
    m_t = o_i < T
    o_r = (bos + o_i) * H + i_h
    i_row = (i_b * tl.num_programs(1) + i_s) * H + i_h
    return i_row, i_bh, o_r * D, m_t, tl.load(n + o_r, mask=m_t, other=0)


@triton.jit
def pair_rows(a, alpha_hat, b_n, o_t, m_t, o_c, m_c):
    """`a` and `α = ‖α‖ α̂` on rows `o_t`, columns `o_c`: two float32 `[BT, BC]` tiles."""
    return load_rows(a, o_t, m_t, o_c, m_c), load_rows(alpha_hat, o_t, m_t, o_c, m_c) * b_n[:, None]


@triton.jit(do_not_specialize=["T", "C0"])
def vla_pair_sums_kernel(
    a,
    alpha_hat,
    n,
    S,
    T,
    C0,
    H: tl.constexpr,
    D: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """`S_c[:, j] = Aᵀ Α[:, j] + Αᵀ A[:, j]` for column block `j` of chunk `c`."""
    i_row, _, o_t, m_t, b_n = chunk_rows(n, T, C0, H, D, BT)
    o_k, o_v = tl.arange(0, BK), tl.program_id(0) * BV + tl.arange(0, BV)
    m_k, m_v = o_k < D, o_v < D
    # [BT, BK] whole rows, [BT, BV] their column block: a, and α = ‖α‖ α̂
    b_a, b_al = pair_rows(a, alpha_hat, b_n, o_t, m_t, o_k, m_k)
    b_av, b_alv = pair_rows(a, alpha_hat, b_n, o_t, m_t, o_v, m_v)
    # [BK, BT] @ [BT, BV] -> [BK, BV], twice
    b_S = tl.dot(tl.trans(b_a), b_alv, input_precision=PRECISION)
    b_S += tl.dot(tl.trans(b_al), b_av, input_precision=PRECISION)
    tl.store(S + i_row * D * D + o_k[:, None] * D + o_v[None, :], b_S, mask=m_k[:, None] & m_v[None, :])


@triton.jit(do_not_specialize=["T", "C0"])
def vla_penalty_grad_kernel(
    u,
    a,
    alpha_hat,
    n,
    S,
    F,
    du,
    T,
    C0,
    H: tl.constexpr,
    D: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    HAS_F: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Column block `j` of `∂L/∂u` on chunk `c`, from the sums over the chunks after it (`S`'s row `c`); the key dim
    in blocks of `BK`."""
    i_row, i_bh, o_t, m_t, b_n = chunk_rows(n, T, C0, H, D, BT)
    o_v = tl.program_id(0) * BV + tl.arange(0, BV)
    m_v = o_v < D
    o_s = tl.arange(0, BT)
    # [BT, BT] u_sᵀ α_t and u_sᵀ a_t; [BT, BV] U (Σ_later S − 2 F), this column block
    b_Pal = tl.zeros([BT, BT], dtype=tl.float32)
    b_Pa = tl.zeros([BT, BT], dtype=tl.float32)
    b_US = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(D, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < D
        # [BT, BK] rows of u, a, α
        b_u = load_rows(u, o_t, m_t, o_k, m_k)
        b_a, b_al = pair_rows(a, alpha_hat, b_n, o_t, m_t, o_k, m_k)
        b_Pal += tl.dot(b_u, tl.trans(b_al), input_precision=PRECISION)
        b_Pa += tl.dot(b_u, tl.trans(b_a), input_precision=PRECISION)
        # [BK, BV] the later chunks' sums (less 2 F)
        m_kv = m_k[:, None] & m_v[None, :]
        b_S = tl.load(S + i_row * D * D + o_k[:, None] * D + o_v[None, :], mask=m_kv, other=0)
        if HAS_F:
            b_S -= 2 * tl.load(F + i_bh.to(tl.int64) * D * D + o_k[:, None] * D + o_v[None, :], mask=m_kv, other=0)
        b_US += tl.dot(b_u, b_S, input_precision=PRECISION)
    # kept on t ≥ s
    m_st = o_s[:, None] <= o_s[None, :]
    b_Pal = tl.where(m_st, b_Pal, 0)
    b_Pa = tl.where(m_st, b_Pa, 0)
    # [BT, BV] a and α on this column block; [BT, BT] @ [BT, BV] -> [BT, BV], twice
    b_av, b_alv = pair_rows(a, alpha_hat, b_n, o_t, m_t, o_v, m_v)
    b_du = tl.dot(b_Pal, b_av, input_precision=PRECISION)
    b_du += tl.dot(b_Pa, b_alv, input_precision=PRECISION)
    b_du = -(b_du + b_US)
    tl.store(du + o_t[:, None] + o_v[None, :], b_du.to(du.dtype.element_ty), mask=m_t[:, None] & m_v[None, :])


def triton_penalty_grads(
    u: torch.Tensor,
    a: torch.Tensor,
    alpha_hat: torch.Tensor,
    n: torch.Tensor,
    F_T: torch.Tensor | None,
    precision: str = "tf32x3",
) -> tuple[torch.Tensor, torch.Tensor]:
    """`chunk.penalty_grads`'s contract: `u: [B, T, H, d]` (its own dtype), `a`, `α̂: [B, T, H, d]` float32,
    `n = max(‖α_t‖, EPS)`: `[B, T, H, 1]`, `F_T: [B, H, d, d]` or None; returns `∂L/∂u` (a's dtype, `[B, T, H, d]`)
    and `∂L/∂M_0` (`[B, H, d, d]`). Head dims up to `MAX_HEAD_DIM`. `precision`: the products' `input_precision`
    when no final state's gradient comes in (`F_T` None; with one, three tf32 passes: module docstring)."""
    B, T, H, D = u.shape
    if D > MAX_HEAD_DIM:
        raise ValueError(f"triton_penalty_grads: head dims up to {MAX_HEAD_DIM}, got d={D}")
    u, a, alpha_hat, n = (x.contiguous() for x in (u, a, alpha_hat, n))
    F_T = None if F_T is None else F_T.contiguous()
    NT = cdiv(T, BT)
    per_slice = cdiv(NT, cdiv(D, BT))  # the slice's sums take at most a's bytes (module docstring)
    BK = max(16, next_power_of_2(D))  # whole rows for the sums, blocks of at most 64 keys for ∂L/∂u
    precision = "tf32x3" if F_T is not None else precision
    BV = min(BK, MAX_BV)
    launch = {"H": H, "D": D, "BT": BT, "BV": BV, "PRECISION": precision, "num_warps": 4 if D <= 64 else 8}
    du = torch.empty_like(a)
    carry = torch.empty(B, H, D, D, dtype=torch.float32, device=u.device)  # Σ S_c over the chunks after the slice
    for c1 in range(NT, 0, -per_slice):
        c0 = max(0, c1 - per_slice)
        S = torch.empty(B, c1 - c0, H, D, D, dtype=torch.float32, device=u.device)
        grid = (cdiv(D, BV), c1 - c0, B * H)
        vla_pair_sums_kernel[grid](a, alpha_hat, n, S, T, c0, BK=BK, **launch)
        # from the slices after it (none for the last), in place: each program reads its entries of the carry
        # before it writes them
        start = None if c1 == NT else carry
        chunk_scan(S, None, start, carry, chunk_layout(B, (c1 - c0) * BT, None, u.device, BT=BT), reverse=True)
        vla_penalty_grad_kernel[grid](
            u, a, alpha_hat, n, S, F_T, du, T, c0, BK=min(BK, 64), HAS_F=F_T is not None, num_stages=1, **launch
        )
        del S
    dM0 = (-carry / 2).to(a.dtype)
    return du, dM0 if F_T is None else dM0 + F_T
