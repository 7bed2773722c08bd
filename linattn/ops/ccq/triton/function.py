"""CCQ's chunked Triton kernels as an autograd function: `ccq_query(..., backend="triton")`.

Forward, three launches (packed sequences included):
1. `state.py`   `(C_c, m_c, Z_c)` at every chunk start: each chunk's term, then a scan     parallel, then over chunks
2. `output.py`  `q' = q − λ/z (a − ρ b)` per chunk from its start state, written    per chunk, in parallel

Backward, six launches:
B1. `state.py`      the chunk-start states again (the forward's two launches)               as 1.
B2. `local_bwd.py`  per-row scalars `s, ρ, dr, dz` and `dλ`                  per chunk (or token), in parallel
B3. `state.py`      `(dC, dm, dZ)` at every chunk end, and the initial state's: terms, scan  parallel, then in reverse
B4. `local_bwd.py`  `dq, dk, dg`                                                     per chunk, in parallel

Recomputing the chunk-start states (B1) rather than saving them keeps the forward's memory at the inputs': the states
take `4 K² / 64` bytes per token and head (1 KiB at `K = 128`; half at the fast level, whose `C` is bfloat16), as the
delta-rule engine decides too. Up to `K = 64` a training call keeps them instead, with the read's parts `u, b, z, ρ`
(`keeps_states`): B1 is skipped, and B2 forms its row scalars token by token from the kept `u`, `b` (`rows_kept`)
instead of rebuilding the chunk's `[BT, BT]` score tiles (`rows_bwd`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.ops.ccq.triton.local_bwd import local_bwd, rows_bwd, rows_kept
from linattn.ops.ccq.triton.output import output_fwd
from linattn.ops.ccq.triton.state import state_bwd, state_fwd
from linattn.ops.utils.inputs import INPUT_DTYPES
from linattn.ops.utils.layout import chunk_layout
from linattn.ops.utils.precision import fast_precision, grad_precision, state_precision

MAX_HEAD_DIM = 256


@dataclass(frozen=True)
class Options:
    """The non-tensor arguments of one call (and `cu_seqlens`, which gets no gradient)."""

    centered: bool
    output_final_state: bool
    cu_seqlens: torch.Tensor | None  # integer [N + 1], or None
    needs_grad: bool  # a gradient will be asked for (grad mode on, an input requires it): the forward may keep
    store: torch.dtype = torch.float32  # the dtype of the chunk-boundary sums `C` and `dC` (the fast level's bfloat16)


# the forward's chunk-start states are kept for the backward up to this head dim: `K² + K + 1` floats a chunk of 64
# tokens and head (at K = 32 as many bytes as a bfloat16 `q`, at K = 64 twice as many); above, recomputed (B1).
# Keeping them saves a few percent of CCQ's forward + backward at either size, for an eighth more memory at K = 64
# but over a quarter more at K = 128 (`python -m linattn.bench profile --contenders CCQ-GDN --K 64,128`, with this
# constant changed). With them the read's `u, b, z, ρ` (`2 K + 2` floats a token and head: 264 bytes at K = 32)
KEEP_STATES_MAX_K = 64


def keeps_states(q: torch.Tensor, k: torch.Tensor, initial_state, output_final_state: bool, precision: str) -> bool:
    """Whether the forward keeps its chunk-start states and its read `u, b, z, ρ` for the backward instead of B1
    and B2 recomputing them: small head dims, and only where the backward would recompute them at the forward's
    precision (no final state, so no final state's gradient; no initial state; `grad_precision` of `q`, `k` and
    `dy`, which takes `q`'s dtype)."""
    if q.shape[-1] > KEEP_STATES_MAX_K or initial_state is not None or output_final_state:
        return False
    return grad_precision((q, k), False) == precision


class CCQTriton(torch.autograd.Function):
    """`(q, k, lam, g, C0, m0, Z0, options) -> (q', C, m, Z)`; `g` and the initial state `(C0, m0, Z0)` may be None,
    and the final state is `(None, None, None)` unless `options.output_final_state`."""

    @staticmethod
    def forward(ctx, q, k, lam, g, C0, m0, Z0, options: Options):
        layout = chunk_layout(q.shape[0], q.shape[1], options.cu_seqlens, q.device)
        initial_state = None if C0 is None else (C0, m0, Z0)
        # one tf32 pass for the products when a bfloat16 q' is the only output (ops/utils/precision.py)
        precision = state_precision(q.dtype, options.output_final_state)
        h, final = state_fwd(k, g, initial_state, options.output_final_state, layout, precision, options.store)
        keep = options.needs_grad and keeps_states(q, k, initial_state, options.output_final_state, precision)
        y, read = output_fwd(q, k, lam, g, h, options.centered, layout, precision, keep=keep)
        kept = (*h, *read) if keep else (None,) * 6
        ctx.save_for_backward(q, k, lam, g, C0, m0, Z0, *kept)
        ctx.layout, ctx.centered, ctx.store = layout, options.centered, options.store
        # an unused output's gradient arrives as None instead of a tensor of zeros
        ctx.set_materialize_grads(False)
        return (y, *(final or (None, None, None)))

    @staticmethod
    def backward(ctx, dy, dCt, dmt, dZt):
        q, k, lam, g, C0, m0, Z0, *kept = ctx.saved_tensors
        layout = ctx.layout
        dy = torch.zeros_like(q) if dy is None else dy.to(q.dtype).contiguous()
        dht = None
        if any(d is not None for d in (dCt, dmt, dZt)):
            N, H, K = layout.N, q.shape[2], q.shape[3]
            f32 = {"dtype": torch.float32, "device": q.device}
            zeros = (torch.zeros(N, H, K, K, **f32), torch.zeros(N, H, K, **f32), torch.zeros(N, H, **f32))
            dht = tuple(z if d is None else d.contiguous() for z, d in zip(zeros, (dCt, dmt, dZt)))
        initial_state = None if C0 is None else (C0, m0, Z0)
        # one tf32 pass as the delta rule's backward takes it, but not with an initial state: the initial mass Z_0's
        # gradient is one number per sequence and head, where docs/design.md §4's ratio of norms is a coin toss
        # between two errors of one order (in the interpreter with Hopper's rounding emulated it fails the 2× rule)
        precision = grad_precision((q, k, dy), final_state_grad=dht is not None) if C0 is None else "tf32x3"
        if kept[0] is not None:  # the forward's states and read, at this precision (`keeps_states`: no dht)
            h = tuple(kept[:3])
            rows, dlam = rows_kept(lam, tuple(kept[3:]), dy, ctx.centered)
        else:
            h, _ = state_fwd(k, g, initial_state, False, layout, precision, ctx.store)
            rows, dlam = rows_bwd(q, k, lam, g, h, dy, ctx.centered, layout, precision)
        dh, dh0 = state_bwd(q, dy, g, rows, dht, initial_state is not None, layout, precision, ctx.store)
        dq, dk, dg = local_bwd(q, k, g, h, dh, dy, rows, layout, precision)
        dC0, dm0, dZ0 = (None, None, None) if dh0 is None else (d.to(x.dtype) for d, x in zip(dh0, initial_state))
        return dq, dk, dlam, dg, dC0, dm0, dZ0, None


def ccq_query_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    centered: bool,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    fast: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """`ccq_query`'s triton backend on validated inputs (shapes as `ccq_query` documents; keys already normalised
    if asked): `(q', final_state)`, `q'` in q's dtype, the final `(C, m, Z)` float32 (None unless requested);
    differentiable in `q, k, lam, g` and the initial state. `fast`: the `precision="fast"` level, bfloat16 sums at
    the chunk boundaries for bfloat16 `q`, `k` (`utils.precision.fast_precision`; other dtypes as exact).

    The kernels compute in float32 and take float32, bfloat16 or float16 `q, k`; float64 is refused with a
    TypeError rather than silently computed in float32 (`chunk` and `naive` keep float64).
    """
    if q.dtype not in INPUT_DTYPES or k.dtype != q.dtype:
        raise TypeError(
            f"ccq_query(backend='triton'): q, k must be float32, bfloat16 or float16 (one dtype), got {q.dtype}, "
            f"{k.dtype} (the kernels compute in float32; use backend='chunk' or 'naive' for float64)"
        )
    if q.shape[-1] > MAX_HEAD_DIM:
        raise ValueError(f"ccq_query(backend='triton'): head dims up to {MAX_HEAD_DIM} only, got K={q.shape[-1]}")
    C0, m0, Z0 = (None, None, None) if initial_state is None else initial_state
    q, k, lam, g, C0, m0, Z0 = (None if x is None else x.contiguous() for x in (q, k, lam, g, C0, m0, Z0))
    needs_grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (q, k, lam, g, C0, m0, Z0))
    store = torch.bfloat16 if fast and fast_precision(q.device, q.dtype, k.dtype) else torch.float32
    options = Options(centered, output_final_state, cu_seqlens, needs_grad, store)
    y, C, m, Z = CCQTriton.apply(q, k, lam, g, C0, m0, Z0, options)
    return y, ((C, m, Z) if output_final_state else None)
