"""Host launcher of the chunked backward of the two-key gated delta rule: five stages, launched in order.

B0. `recompute.py`  Ũ = T β V, K̃ = T β Γ K from the forward's saved T                  per chunk, in parallel
                    (and K̃ chunk by chunk transposed, contiguous along the tokens, for B2)
B1. `state.py`      h_c, U_c again (the forward's stage 3, unchanged)                   sequential over chunks
B2. `state_bwd.py`  dU_c = scale tril(Q Wᵀ ⊙ D)ᵀ dO_c + W̃ dh_{c+1},  dṼ_c = Tᵀ dU_c,
                    dh_c = Γ_C dh_{c+1} + scale (diag(Γ) Q)ᵀ dO_c − K̃ᵀ dU_c              reverse over chunks
B3. `local_bwd.py`  dq, dk, dv, dw, dβ, dG of each chunk with h_c, dh_{c+1} fixed          per chunk, in parallel
B4. `cumsum.py`     dg = reverse chunk-local cumsum of dG                               per chunk, in parallel

The derivation is in `README.md` (backward section) and in the docstrings of `state_bwd.py` and `local_bwd.py`.

Without the erase term (the forward saved no `T`: linear attention, scalar-decay GLA) B0 is skipped, B1 reads the
values as `Ũ` (`U = V`), B2 runs with `ERASE` off (`dṼ = dU`, no `K̃ᵀ dU`), and B3 with `ERASE` off (no `A`, `T`,
`K̃` terms; the one key's gradient is `dW`).

Precision: every product that involves an intermediate takes three tf32 passes, or one when the tokens and `dO`
are all bfloat16, no final state's gradient comes in and the call has at least 1,000 tokens
(`precision.grad_precision` says why that keeps docs/design.md §4's bound). At the fast level B0 – B2 store in
bfloat16 and B3 multiplies bfloat16 operands (`precision.backward_precision`).

KLA (the forward saved `r = 1 / (‖k‖² + ε)`): B0 and B3 form the step `β = η r` from it, and B3 returns the gradient
of `η` in place of `dβ` and adds the step's dependence on `k` to `dk` (derivation in `local_bwd.py`).

Memory. B1 – B3 hold buffers of the whole sequence at once (float32; `h`, `dh`, `U`, `K̃ᵀ` bfloat16 at the fast
level): the chunk states `h` and their gradients `dh` (`[NT, H, K, V]` each, 1 GiB in float32 at T = 64K, H = 16,
K = V = 128), and `[T, H, V | K]` ones of half that size each: the pseudo-values `U`, `dṼ` (B2's `dU`, in place), and
for B2 only `K̃ᵀ` and (with a decay) `W̃`. A long single sequence (`B = 1`, not packed, its `h` and `dh` at least
`SPLIT_BYTES` together: from 32K tokens at H = 16, K = V = 128, 64K at the fast level) is therefore cut in two at
`cut = a T`, `a ≈ 0.45` (a chunk boundary), without redoing any sequential work:
1. B0, B1 on `[0, cut)` from the initial state: `h`, `U` of the first part and the state at `cut` (kept);
2. B0 – B3 on `[cut, T)` from the state at `cut`: the second part's gradients and `dh` at `cut`;
3. B0 (only `K̃ᵀ`), B2 on `[0, cut)` with that `dh` as the final state's gradient; then the whole sequence's
   gradients are allocated, B3 writes the first part's tokens into them, and the second part's are copied in.
In units of `h`'s full size at K = V = 128, float32 (the inputs' gradients, bfloat16, are `g = 0.75` of it with
`w = k`, 1 with two keys), the largest sets alive are step 2's B2, `1.5a + 4(1 − a)` (the first part's `h`, `U`
beside the second part's buffers), and step 3's B3, `3a + (2 − a) g` (the first part's `h, U, dh, dṼ`, the second
part's gradients and the whole sequence's): `a ≈ 0.45` keeps both at or below 2.9, against 4 + g for the whole
sequence at once (the fast level's bfloat16 `h`, `dh`, `U` lower every term that holds them; the same cut is kept).
The extra work is B0's keys run twice on the first part, two launches of each parallel stage and the copy of the
second part's gradients: a few percent more time for a clearly lower peak (`python -m linattn.bench ops` reports
both at 32K and 64K tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum
from linattn.ops.delta_rule.triton.forward import ForwardSaved
from linattn.ops.delta_rule.triton.local_bwd import local_bwd, local_bwd_outputs
from linattn.ops.delta_rule.triton.precision import BackwardPrecision, backward_precision
from linattn.ops.delta_rule.triton.recompute import wy_apply
from linattn.ops.delta_rule.triton.state import state_fwd
from linattn.ops.delta_rule.triton.state_bwd import state_bwd
from linattn.ops.utils.layout import ChunkLayout, chunk_layout

# a single sequence whose chunk states `h` and their gradients `dh` would take at least this many bytes together is
# cut in two for the backward (module docstring): the cut spares about a third of the backward's buffers at their
# peak for 1.5 – 4% more time (`python -m linattn.bench ops`, with this threshold raised), worth it from a GiB
SPLIT_BYTES = 2**30
CUT = 0.45  # where, as a fraction of the tokens (module docstring)


@dataclass(frozen=True)
class _Span:
    """The token-indexed tensors of the backward over one span of tokens (contiguous views when cut)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    w: torch.Tensor | None
    beta: torch.Tensor | None
    G: torch.Tensor | None
    T_inv: torch.Tensor | None
    inv_sq_norm: torch.Tensor | None
    do: torch.Tensor
    layout: ChunkLayout
    precision: BackwardPrecision  # of the products that involve an intermediate, per stage

    def cut(self, t0: int, t1: int) -> _Span:
        """Tokens `[t0, t1)` of a single unpacked sequence (`B = 1`: the slices stay contiguous)."""
        parts = {n: x[:, t0:t1] for n, x in vars(self).items() if isinstance(x, torch.Tensor)}
        return replace(self, **parts, layout=chunk_layout(1, t1 - t0, None, self.q.device))

    @property
    def erase(self) -> bool:
        return self.T_inv is not None  # the forward saved no T without the erase term

    @property
    def w_or_k(self) -> torch.Tensor:
        return self.k if self.w is None else self.w

    def wy(self, values: bool = True, keys_t: bool = True) -> tuple[torch.Tensor | None, ...]:
        """B0: `(Ũ, K̃, K̃ᵀ chunk by chunk)` (the first two None unless `values`, the last unless `keys_t`), or
        `(V, None, None)` without the erase term."""
        if not self.erase:
            return self.v, None, None
        x, p = self, self.precision
        return wy_apply(x.k, x.v, x.beta, x.G, x.T_inv, x.layout, x.inv_sq_norm, p.wy, values, keys_t, p.store)

    def states(self, u_tilde, k_tilde, h0: torch.Tensor | None, output_final_state: bool):
        """B1 from B0's outputs: `(h, U, the state after the span)` (the last None unless asked)."""
        h, U, ht = state_fwd(
            k_tilde,
            u_tilde,
            self.w_or_k,
            self.G,
            h0,
            output_final_state,
            self.layout,
            self.precision.state,
            self.precision.store,
        )
        return h, self.v if U is None else U, ht


def _span_walk(x: _Span, dht, want_dh0: bool, scale: float, h0=None, kept=None):
    """B0 – B2 on one span: `((h, U, dh, dṼ), dh_0)`, `dh_0` the gradient of the state the span starts from (None
    unless `want_dh0`). `kept`: the span's `(h, U)` computed earlier, else recomputed from `h0`."""
    u_tilde, k_tilde, k_tilde_t = x.wy(values=kept is None)
    h, U, _ = x.states(u_tilde, k_tilde, h0, False) if kept is None else (*kept, None)
    del u_tilde, k_tilde, kept  # free each intermediate once its last stage has run
    dh, dv_tilde, dh0 = state_bwd(
        x.q, x.w_or_k, x.G, x.T_inv, k_tilde_t, x.do, dht, scale, want_dh0, x.layout, x.precision.walk,
        store=x.precision.store,
    )  # fmt: skip
    return (h, U, dh, dv_tilde), dh0


def _span_local(x: _Span, walked, scale: float, out=None) -> tuple[torch.Tensor | None, ...]:
    """B3 on one span from `_span_walk`'s buffers: `(dq, dk, dv, dw, dβ, dG)`, into `out` if given."""
    h, U, dh, dv_tilde = walked
    return local_bwd(
        x.q, x.k, x.v, x.w, x.beta, x.G, h, dh, U, dv_tilde, x.do, scale, x.layout, x.erase, x.inv_sq_norm,
        x.precision.local, out,
    )  # fmt: skip


def _tokens(xs: tuple[torch.Tensor | None, ...], t0: int, t1: int) -> tuple[torch.Tensor | None, ...]:
    """Tokens `[t0, t1)` of each `[1, T, ...]` tensor (contiguous views)."""
    return tuple(None if x is None else x[:, t0:t1] for x in xs)


def _cut(layout: ChunkLayout, chunk_bytes: int) -> int | None:
    """Where to cut the sequence for the backward (the chunk boundary nearest `CUT · T`), or None to run it whole;
    `chunk_bytes`: one chunk's `h` and `dh` over all heads, `H · K · V` elements each, as stored (float32, or the
    fast level's bfloat16)."""
    whole = layout.cu_seqlens is not None or layout.B != 1 or layout.NT < 2
    if whole or layout.NT * chunk_bytes < SPLIT_BYTES:
        return None
    return layout.BT * min(max(round(CUT * layout.NT), 1), layout.NT - 1)


def delta_rule_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    scale: float,
    initial_state: torch.Tensor | None,
    saved: ForwardSaved,
    do: torch.Tensor,
    dht: torch.Tensor | None,
    derived_keys: bool = False,
    fast: bool = False,
) -> tuple[torch.Tensor | None, ...]:
    """Gradients of the chunked forward `delta_rule_fwd` for the same inputs.

    Args:
        q, k, v, w, beta, g, scale, initial_state: as given to `delta_rule_fwd` (contiguous).
        saved: what `delta_rule_fwd` returned for them.
        do: `[B, T, H, V]` gradient of `o` (contiguous, any float dtype).
        dht: `[N, H, K, V]` gradient of the final state (contiguous), or None (none was output, or it is unused).
        derived_keys: `k`, `w` are float32 keys the caller derived from bfloat16 tokens, whose gradients it rounds
            to bfloat16 (VLA's `k̂`, `α̂`): the backward's precision follows `q`, `v`, `dO` (`backward_precision`).
        fast: the `precision="fast"` level, as the forward ran (`backward_precision`).
    Returns:
        `(dq, dk, dv, dw, dβ, dg, dh_0)`, each in its input's dtype, None where that input is None; with `w` None
        the gradient of the shared key is all in `dk`. For KLA (`saved.inv_sq_norm`) `dβ` is the gradient of the
        given `beta` (`η`).
    """
    layout = saved.layout
    if derived_keys:  # the precision follows the caller's bfloat16 tokens (`precision.backward_precision`)
        tokens = (q, v, do)
    else:
        tokens = tuple(x for x in (q, k, v, w, do) if x is not None)
    precision = backward_precision(tokens, dht is not None, derived_keys, initial_state is not None, fast)
    x = _Span(q, k, v, w, beta, saved.G, saved.T_inv, saved.inv_sq_norm, do, layout, precision)
    # one chunk's h and dh (as stored) over all heads
    cut = _cut(layout, 2 * precision.store.itemsize * q.shape[2] * q.shape[3] * v.shape[3])
    if cut is None:
        walked, dh0 = _span_walk(x, dht, initial_state is not None, scale, h0=initial_state)
        grads = _span_local(x, walked, scale)
        del walked
    else:
        first, second = x.cut(0, cut), x.cut(cut, layout.T)
        u_tilde, k_tilde, _ = first.wy(keys_t=False)
        h, U, h_cut = first.states(u_tilde, k_tilde, initial_state, True)
        del u_tilde, k_tilde
        walked, dh_cut = _span_walk(second, dht, True, scale, h0=h_cut)
        grads_second = _span_local(second, walked, scale)
        del walked
        walked, dh0 = _span_walk(first, dh_cut, initial_state is not None, scale, kept=(h, U))
        del h, U
        # allocated after the first part's walk, so that they are not alive through it (module docstring)
        grads = local_bwd_outputs(q, k, v, w, beta, saved.G)
        _span_local(first, walked, scale, out=_tokens(grads, 0, cut))
        del walked
        for a, b in zip(_tokens(grads, cut, layout.T), grads_second):
            if a is not None:
                a.copy_(b)
        del grads_second
    dq, dk, dv, dw, dbeta, dG = grads
    dg = None if g is None else chunk_cumsum(dG, layout, reverse=True).to(g.dtype)
    dbeta = None if beta is None else dbeta.to(beta.dtype)
    dh0 = None if initial_state is None else dh0.to(initial_state.dtype)
    return dq, dk, dv, dw, dbeta, dg, dh0
