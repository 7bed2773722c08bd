"""VLA's write gate, chunk-parallel: a Cholesky per chunk instead of a token loop, and a backward of matmuls.

Forward. For chunk `c` with penalty rows `U_c` and unit keys `K̂_c` (`C × d`), and the inverse penalty at the
chunk's start `A_c = M_c⁻¹`, `M_c = M_0 + Σ_{c' < c} U_{c'}ᵀ U_{c'}` (`M_0 = λ0 I`, or `A_0⁻¹`):

    L Lᵀ = I + U_c A_c U_cᵀ                      (C × C Cholesky)
    W_c  = L⁻¹ U_c A_c                           (C × d)
    α_c  = K̂_c A_c − tril(K̂_c W_cᵀ) W_c          (row t is α_t = A_t k̂_t, A_t after token t's update)
    α̂   = rows of α_c normalised                (their norms kept: α itself is not)

Why: by Woodbury, `A_t = A_c − (U_{≤t} A_c)ᵀ (I + U_{≤t} A_c U_{≤t}ᵀ)⁻¹ (U_{≤t} A_c)`; the leading `t × t` block
of `L` is the Cholesky factor of the leading block of the Gram matrix, so `A_t = A_c − Σ_{s≤t} w_s w_sᵀ`
with `w_s` the rows of `W_c`. This equals the Sherman–Morrison token loop exactly.

The sequence is cut into groups of `R` chunks. Each group's first `A_c` comes from its own `M_c` (a prefix sum of
`d × d` Gram matrices, then a `d × d` Cholesky); the chunks inside a group follow by the downdates
`A_{c+1} = A_c − W_cᵀ W_c`, all groups in parallel. So the rounding of the downdates never accumulates over more
than `R` chunks (a sequential carry over the whole sequence would let it grow with T), and the `d × d`
factorisations, the most expensive step, are `R` times fewer than one per chunk. Mapping rows `x_t -> A_t x_t`
inside the groups is the step a backend supplies (`apply`): PyTorch here, a Triton kernel in `triton/gate.py`.

Backward (`_ChunkGate`), without differentiating any factorisation. From `∂L/∂α̂` first
`g_t = ∂L/∂α_t = (∂L/∂α̂_t − α̂_t (α̂_tᵀ ∂L/∂α̂_t)) / ‖α_t‖` (and `α_t = ‖α_t‖ α̂_t`, rebuilt for the products below).
`α_t = M_t⁻¹ k̂_t` with `M_t = M_0 + Σ_{s≤t} u_s u_sᵀ`, so with `a_t = A_t g_t` (the forward's map applied to `g`):

    ∂L/∂k̂_t = a_t
    ∂L/∂M_t = −a_t α_tᵀ
    ∂L/∂u_s = −Σ_{t≥s} (a_t α_tᵀ + α_t a_tᵀ) u_s + 2 F u_s           F = −A_T sym(∂L/∂A_T) A_T
    ∂L/∂M_0 = −sym(Σ_t a_t α_tᵀ) + F

`∂L/∂u` is a reverse-causal linear attention (queries `u`, key/value pairs `(α, a)` and `(a, α)`): within a
block of tokens through `triu(U Αᵀ)` and `triu(U Aᵀ)`, across blocks through the reverse prefix sum of the `d × d`
matrices `Σ_{t∈c} (a_t α_tᵀ + α_t a_tᵀ)`. The backward saves only the groups' first `A_c` and recomputes the
rest by the same `apply` (no `W` kept; the Triton path keeps each 16-token chunk's `L⁻¹`, 16 floats a token,
so that its backward skips the elimination); it keeps `α̂` (which the delta rule after the gate keeps anyway) and the
norms `‖α_t‖`, not `α`. `k̂`'s normalisation stays outside (`unit_rows`, which keeps only its input), so that
`vla` normalises `k` once for the gate and the delta rule.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from linattn.ops.checks import compute_dtype
from linattn.ops.chunking import chunk_size, from_chunks, to_chunks
from linattn.ops.unit_rows import unit_rows
from linattn.ops.unit_rows.pytorch import EPS, unit_rows_grad
from linattn.ops.utils.grid import cdiv


def gate_chunk(T: int, d: int, max_chunk: int = 128) -> int:
    """Chunk size of the gate: its `d × d` inverse per chunk costs `∝ d³ / C` per token, its `C × C` factorisation
    and products `∝ C² + C d`, so the chunk grows with the head dim: 64 tokens, 128 from d = 128 on; at most
    `max_chunk` (a power of two: `forgetting.max_chunk`)."""
    largest = min(max_chunk, 128 if d >= 128 else 64)
    return chunk_size(T, largest, min(16, largest))


# the backward's products in this many slices of the sequence once one float32 copy of `u` would take
# SLICE_FROM_BYTES: the gate's backward then holds one slice's blocks at a time (`penalty_grads`)
BWD_SLICES = 8
SLICE_FROM_BYTES = 64 * 2**20

# chunks per `d × d` factorisation (`R`), the others carried by Woodbury downdates. `python -m linattn.bench stages
# --op vla-gate` times the forward with carry 1 and 8: 8 takes 38% and 11% off at d = 32 and 128 on the CPU
# (`--device cpu --lengths 8192`), 5% and 21% on the GPU at 64K. `python -m linattn.bench gate`: α̂ within 1.2e-6 of
# float64 at T = 1M.
CARRY = 8


@dataclass(frozen=True)
class Grouping:
    """Chunks of `C` tokens, `R` of them per group (one `d × d` factorisation per group)."""

    C: int
    R: int

    @property
    def L(self) -> int:
        return self.C * self.R


# `(X, U, A_starts, grouping, unit, *, keep=False, factors=None, unit_grad=None) -> (rows, norms, factors)`: the rows
# `A_t x_t` and None, or with `unit` those rows normalised (`unit_rows`' value) and their norms `‖A_t x_t‖`
# (`[B, T, H]`); `torch_apply` here, Triton in `triton/gate.py`. `keep`: also return the chunks' factors (Triton: each
# chunk's `L⁻¹`), which a later call on the same `U, A_starts` takes as `factors` and reads instead of forming them; a
# backend that keeps none returns None (and is given None). `unit_grad = (α̂, norms)`: `X` is `∂L/∂α̂` of rows
# normalised so (a forward's `unit` output), and the rows mapped are `x = unit_rows_grad(α̂, norms, X)`
Apply = Callable[..., tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]]
# `(u, a, α̂, max(‖α‖, EPS), F_T or None) -> (∂L/∂u, ∂L/∂M_0)`: `penalty_grads` here, Triton in
# `triton/penalty_grads.py`
PenaltyGrads = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]
]
# `M⁻¹` of SPD `[..., d, d]`: `spd_inverse` here, Triton in `triton/cholesky.py`
Inverse = Callable[[torch.Tensor], torch.Tensor]
# `(u, M_0 or λ0, L) -> M` at every group start and after the last token: `group_penalties` here, Triton in
# `triton/group_penalties.py`
GroupPenalties = Callable[[torch.Tensor, torch.Tensor | float, int], torch.Tensor]


def factor_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype of the `d × d` factorisations for inputs like `x`: float64 for float32 (and float64) inputs, whose
    users ask float32 accuracy of every gradient, float32 for bfloat16 and float16. The factorisations are where the
    float32 gate loses most: on the CPU (T = 63, K = 128, float32 inputs; BENCHMARKS.md), `∂L/∂A_0` through the gate
    is 8.4e-7 from float64 with float32 factorisations, 4.3e-7 with float64 ones, against the token loop's 2.8e-7;
    the whole `vla` on the Triton path (interpreter), 1.15e-6 and 0.87 – 0.93e-6. They are `d × d` per group of
    tokens: few."""
    return torch.float64 if x.dtype in (torch.float32, torch.float64) else compute_dtype(x)


def spd_inverse(M: torch.Tensor) -> torch.Tensor:
    """`M⁻¹` of symmetric positive definite matrices `[..., d, d]`, as `L⁻ᵀ L⁻¹` from `M = L Lᵀ`. The matrices here
    are positive definite by construction, so no error check (which would wait for the GPU) is made."""
    L, _ = torch.linalg.cholesky_ex(M)
    eye = torch.eye(M.shape[-1], dtype=M.dtype, device=M.device).expand_as(M)
    L_inv = torch.linalg.solve_triangular(L, eye, upper=False)
    return L_inv.mT @ L_inv


def penalties(M0: torch.Tensor | float, Ug: torch.Tensor) -> torch.Tensor:
    """`M` at the start of every block of rows `Ug: [B, H, N, L, d]`, `M_0 + Σ_{c' < c} U_{c'}ᵀ U_{c'}`, and after
    the last block: `[B, H, N + 1, d, d]`; `M0: [B, H, d, d]`, or a number `λ0` for `M_0 = λ0 I` (added to the
    diagonal in place: no identity matrix is made, one kernel instead of three)."""
    gram = Ug.mT @ Ug  # [B, H, N, d, d]
    M = F.pad(gram.cumsum(2), (0, 0, 0, 0, 1, 0))
    if isinstance(M0, torch.Tensor):
        return M.add_(M0[:, :, None])
    M.diagonal(dim1=-2, dim2=-1).add_(M0)
    return M


def group_penalties(u: torch.Tensor, M0: torch.Tensor | float, L: int) -> torch.Tensor:
    """`M` at the start of every group of `L` tokens and after the last, `[B, H, ⌈T/L⌉ + 1, d, d]` in u's compute
    dtype: `penalties` over `u: [B, T, H, d]` in groups (padded rows are 0 and add nothing)."""
    return penalties(M0, to_chunks(u.to(compute_dtype(u)), L))


def group_inverses(
    u: torch.Tensor,
    M0: torch.Tensor | float,
    L: int,
    inverse: Inverse = spd_inverse,
    group_sums: GroupPenalties = group_penalties,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`A` at the start of every group of `L` tokens, `[B, H, ⌈T/L⌉, d, d]` (a view: the groups of a head lie
    `⌈T/L⌉ + 1` matrices apart), and after the last token, `[B, H, d, d]` (one batch of inverses by `inverse`, in
    `factor_dtype(u)`, of the penalties `group_sums` forms), in u's compute dtype. `u: [B, T, H, d]`, `M0` as
    `penalties` takes it."""
    dt = compute_dtype(u)
    A = inverse(group_sums(u, M0, L).to(factor_dtype(u))).to(dt)
    return A[:, :, :-1], A[:, :, -1].clone()


def _apply_inverses(X: torch.Tensor, A: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Rows `A_t x_t` for every token of every chunk: `X A_c − tril(X W_cᵀ) W_c`; `X, W: [.., C, d]`,
    `A: [.., d, d]`."""
    return X @ A - (X @ W.transpose(-1, -2)).tril() @ W


def unit_rows_(Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`Y`'s rows normalised in place (`unit_rows`' value), and their norms before the clamp (`Y.shape[:-1]`)."""
    n = torch.linalg.vector_norm(Y, dim=-1)
    return Y.div_(n.clamp_min(EPS)[..., None]), n


def torch_apply(
    X: torch.Tensor,
    U: torch.Tensor,
    A_starts: torch.Tensor,
    grouping: Grouping,
    unit: bool = False,
    *,
    keep: bool = False,
    factors: None = None,
    unit_grad: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, None]:
    """Rows `A_t x_t` of `X: [B, T, H, d]`, `A_t` the inverse penalty after token t's update: per chunk a `C × C`
    Cholesky gives `W_c`, and `A_{c+1} = A_c − W_cᵀ W_c` inside each group (all groups at once, from `A_starts`).
    `U` may be in a lower precision than `X`; it is used in `X`'s. `unit`: as `Apply`; no factors are kept (a chunk
    of 64 or 128 tokens' factor would weigh as much as `X`)."""
    if unit_grad is not None:
        X = unit_rows_grad(unit_grad[0], unit_grad[1][..., None], X)
    T = X.shape[1]
    C, R = grouping.C, grouping.R
    Xc, Uc = to_chunks(X, C), to_chunks(U.to(X.dtype), C)  # [B, H, N, C, d]
    X6, U6 = _groups(Xc, R), _groups(Uc, R)  # [B, H, NG, R, C, d]
    eye = torch.eye(C, dtype=X.dtype, device=X.device)
    A, rows = A_starts, []
    for j in range(R):
        U_j = U6[:, :, :, j]  # [B, H, NG, C, d]
        UA = U_j @ A
        L, _ = torch.linalg.cholesky_ex(eye + UA @ U_j.mT)  # [C, C]; positive definite by construction
        W = torch.linalg.solve_triangular(L, UA, upper=False)  # [B, H, NG, C, d]
        rows.append(_apply_inverses(X6[:, :, :, j], A, W))
        if j < R - 1:
            # symmetrised: the downdate contracts A's errors except its antisymmetric part, which rounding of
            # `W.mT @ W` adds and which would then stay as A shrinks (3 digits lost over 7 chunks at d = 7)
            A = _sym(A - W.mT @ W)
    Y = from_chunks(_ungroup(rows, Xc.shape[2]), T)  # a view across the chunks
    # normalised in place into a tensor of its own (the delta rule after the gate keeps α̂); the backward's rows are
    # used as they are
    return (*unit_rows_(Y.contiguous()), None) if unit else (Y, None, None)


def _sym(x: torch.Tensor) -> torch.Tensor:
    return (x + x.transpose(-1, -2)) / 2


def _later_sums(S: torch.Tensor) -> torch.Tensor:
    """`Σ_{c' > c} S_{c'}` over dim 2 of `S: [B, H, N, d, d]`, by a reverse prefix sum (no difference of two large
    sums, whose rounding would swamp the late chunks' small ones)."""
    return S.flip(2).cumsum_(2).flip(2).sub_(S)


def _groups(x: torch.Tensor, R: int) -> torch.Tensor:
    """`[B, H, N, C, d]` -> `[B, H, ⌈N/R⌉, R, C, d]`, the last group padded with empty chunks."""
    B, H, N = x.shape[:3]
    NR = cdiv(N, R)
    return F.pad(x, (0, 0, 0, 0, 0, NR * R - N)).view(B, H, NR, R, *x.shape[3:])


def _ungroup(rows: list[torch.Tensor], N: int) -> torch.Tensor:
    """R tensors `[B, H, NR, C, d]` (chunk j of every group) -> `[B, H, N, C, d]`."""
    return torch.stack(rows, 3).flatten(2, 3)[:, :, :N]


def _no_autocast(device: torch.device):
    """Autocast off on `device` (meta tensors have no autocast to turn off)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


class _ChunkGate(torch.autograd.Function):
    """`(k̂, u, M_0) -> (α̂, A_T)` with `α̂_t = α_t / ‖α_t‖`, `α_t = M_t⁻¹ k̂_t`; `k̂: [B, T, H, d]` and
    `M_0: [B, H, d, d]` in the compute dtype (or the number `λ0`, `M_0 = λ0 I`), `u: [B, T, H, d]` in its own (kept
    so: a float32 copy of a bfloat16 `u` would double its bytes until the backward); `kernels` invert the groups'
    first `A`, map rows by `A_t` inside the groups of `grouping`, and form `∂L/∂u` and `∂L/∂M_0` in the backward;
    `keep`: a backward will follow (the chunks' factors are then kept).
    Saved for the backward: `A` at each group's start, `u`, `α̂` and the norms `‖α_t‖` (not `α`: the delta rule
    after the gate keeps `α̂` anyway), `A_T`, and the chunks' factors where `kernels.apply` keeps them."""

    @staticmethod
    def forward(ctx, k_hat, u, M0, grouping: Grouping, kernels: GateKernels, keep: bool):
        # the gate computes in k̂'s dtype throughout: autocast's bfloat16 products would break its Woodbury updates
        # and mix dtypes between its forward and backward
        with _no_autocast(k_hat.device):
            A_starts, A_final = group_inverses(u, M0, grouping.L, kernels.inverse, kernels.group_sums)
            # α's rows normalised (`unit_rows`' value), and their norms; a tensor of its own, as the delta rule after
            # the gate keeps it
            alpha_hat, n, factors = kernels.apply(k_hat, u, A_starts, grouping, True, keep=keep)
        norms = n.to(k_hat.dtype)  # [B, T, H]
        ctx.save_for_backward(u, A_starts, alpha_hat, norms, A_final, factors)
        ctx.grouping, ctx.kernels, ctx.u_dtype = grouping, kernels, u.dtype
        ctx.m0_grad = isinstance(M0, torch.Tensor)
        ctx.set_materialize_grads(False)  # an unused A_T gets None, not a zero matrix to multiply through
        return alpha_hat, A_final

    @staticmethod
    def backward(ctx, d_alpha_hat, d_A_final):
        # unpacked once: non-reentrant activation checkpointing refuses a second unpacking
        saved = ctx.saved_tensors
        with _no_autocast(saved[0].device):
            return _ChunkGate._backward(ctx, saved, d_alpha_hat, d_A_final)

    @staticmethod
    def _backward(ctx, saved, d_alpha_hat, d_A_final):
        u, A_starts, alpha_hat, norms, A_final, factors = saved
        n = norms[..., None]
        # a_t = A_t g_t, `[B, T, H, d]`, with g = ∂L/∂α through the normalisation (as `unit_rows`' backward), which
        # the apply forms from ∂L/∂α̂ row by row
        g_hat = torch.zeros_like(alpha_hat) if d_alpha_hat is None else d_alpha_hat.contiguous()
        a, _, _ = ctx.kernels.apply(
            g_hat, u, A_starts, ctx.grouping, False, factors=factors, unit_grad=(alpha_hat, norms)
        )
        del g_hat
        # F = −A_T sym(∂L/∂A_T) A_T, per (batch, head)
        F_T = None if d_A_final is None else -A_final @ _sym(d_A_final) @ A_final
        du, dM0 = ctx.kernels.grads(u, a, alpha_hat, n.clamp_min(EPS), F_T)  # α = max(‖α‖, EPS) α̂
        return a, du.to(ctx.u_dtype), (dM0 if ctx.m0_grad else None), None, None, None


def penalty_grads(
    u: torch.Tensor, a: torch.Tensor, alpha_hat: torch.Tensor, n: torch.Tensor, F_T: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`∂L/∂u` (`[B, T, H, d]`, a's dtype) and `∂L/∂M_0` (`[B, H, d, d]`) from `a_t`, `α_t = n_t α̂_t` and
    `F = −A_T sym(∂L/∂A_T) A_T` (or None), by the module docstring's formulas over blocks of `C` tokens.

    The blocks are taken in slices of chunks from the last to the first. Per slice: the pair sums
    `S_c = Σ_{t∈c} (a_t α_tᵀ + α_t a_tᵀ)`, their sums over later chunks (the slice's own reverse prefix sum plus
    the carry of the slices after it), then the slice's `∂L/∂u`. Only one slice's `[C, d]`, `[C, C]` and `[d, d]`
    blocks are alive at a time, beside `∂L/∂u` itself: a long sequence's backward holds a few slices, not five
    tensors the size of `u` in float32 (the gate's memory peak before)."""
    B, T, H, d = u.shape
    C = gate_chunk(T, d)  # blocks of the reverse-causal sums
    N = cdiv(T, C)
    # chunks per slice: all at once when small, else BWD_SLICES slices
    step = N if B * H * N * C * d * a.element_size() < SLICE_FROM_BYTES else cdiv(N, BWD_SLICES)
    du = torch.empty(B, T, H, d, dtype=a.dtype, device=a.device)
    carry = torch.zeros(B, H, d, d, dtype=a.dtype, device=a.device)  # Σ_c S_c over the chunks after the slice
    for n1 in range(N, 0, -step):
        n0 = max(0, n1 - step)
        t0, t1 = n0 * C, min(n1 * C, T)
        # [B, H, s, C, d] float32 blocks of the slice (the last one padded), and their [B·H·s, C, d] views
        Uc = to_chunks(u[:, t0:t1], C).to(a.dtype).contiguous()
        Ac = to_chunks(a[:, t0:t1], C).contiguous()
        Alc = to_chunks(alpha_hat[:, t0:t1] * n[:, t0:t1], C).contiguous()
        U3, A3, Al3 = (x.flatten(0, 2) for x in (Uc, Ac, Alc))
        pair = A3.mT @ Al3  # Σ_{t∈c} a_t α_tᵀ, [B·H·s, d, d]
        S = (pair + pair.mT).view(*Uc.shape[:3], d, d)
        del pair
        later = (_later_sums(S) + carry[:, :, None]).flatten(0, 2)
        carry += S.sum(2)
        del S
        P = torch.bmm(U3, Al3.mT).triu_()  # [B·H·s, C, C]
        du_s = torch.bmm(P, A3)
        torch.bmm(U3, A3.mT, out=P).triu_()
        du_s.baddbmm_(P, Al3).baddbmm_(U3, later, beta=-1, alpha=-1)  # −(within-chunk pairs) − U Σ_{later chunks}
        del P, later
        if F_T is not None:  # + 2 U F over all the rows of a (batch, head)
            du_s.view(B * H, -1, d).baddbmm_(Uc.view(B * H, -1, d), F_T.view(B * H, d, d), alpha=2)
        du[:, t0:t1] = from_chunks(du_s.view_as(Uc), t1 - t0)
    dM0 = -carry / 2
    return du, dM0 if F_T is None else dM0 + F_T


def initial_penalty(k: torch.Tensor, initial_state: torch.Tensor | None, lam0: float) -> torch.Tensor | float:
    """`M_0`: the number `λ0` for `λ0 I` (which `penalties` adds to the diagonal), or `A_0⁻¹` (factorised in
    `factor_dtype(k)`), `[B, H, d, d]` in the compute dtype. `A_0` is checked positive definite (on CUDA that check
    waits for the GPU, once per call with an initial state)."""
    if initial_state is None:
        return lam0
    try:
        return torch.cholesky_inverse(torch.linalg.cholesky(initial_state.to(factor_dtype(k)))).to(compute_dtype(k))
    except torch.linalg.LinAlgError as e:
        raise ValueError(f"initial_state: expected symmetric positive definite A_0 matrices, got: {e}") from None


@dataclass(frozen=True)
class GateKernels:
    """The gate's steps a backend supplies: `apply` maps rows by `A_t` inside the groups, `grads` forms the
    backward's `∂L/∂u` and `∂L/∂M_0`, `inverse` the groups' first `A` from the penalties `group_sums` forms."""

    apply: Apply
    grads: PenaltyGrads = penalty_grads
    inverse: Inverse = spd_inverse
    group_sums: GroupPenalties = group_penalties


def gate(
    k_hat: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    lam0: float,
    grouping: Grouping,
    kernels: GateKernels,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`naive_vla_gate`'s contract for unit keys `k_hat` (in the compute dtype, e.g. `unit_rows(k)`), with the
    groups of `grouping` and the steps of `kernels`."""
    M0 = initial_penalty(k_hat, initial_state, lam0)
    # the chunks' factors are kept for a backward only
    keep = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in (k_hat, u, M0))
    return _ChunkGate.apply(k_hat.contiguous(), u.contiguous(), M0, grouping, kernels, keep)


def chunk_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    carry: int = CARRY,
    unit_keys: bool = False,
    max_chunk: int = 128,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_vla_gate`; `carry`: chunks per `d × d` factorisation (1: every chunk its own);
    `unit_keys`: `k` is already `unit_rows(k)` (as `vla` passes it, normalising once for the gate and the state);
    `max_chunk`: the longest chunk (`gate_chunk`)."""
    T, d = k.shape[1], k.shape[-1]
    C = gate_chunk(T, d, max_chunk)
    grouping = Grouping(C, min(carry, cdiv(T, C)))
    return gate(k if unit_keys else unit_rows(k), u, initial_state, lam0, grouping, GateKernels(torch_apply))
