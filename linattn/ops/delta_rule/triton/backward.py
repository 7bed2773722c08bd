"""Host launcher of the chunked backward of the two-key gated delta rule: five stages, launched in order.

B0. `recompute.py`  Ũ = T β V, K̃ = T β Γ K from the forward's saved T                  per chunk, in parallel
B1. `state.py`      h_c, U_c again (the forward's stage 3, unchanged)                   sequential over chunks
B2. `state_bwd.py`  dU_c = scale tril(Q Wᵀ ⊙ D)ᵀ dO_c + W̃ dh_{c+1},  dṼ_c = Tᵀ dU_c,
                    dh_c = Γ_C dh_{c+1} + scale (diag(Γ) Q)ᵀ dO_c − K̃ᵀ dU_c              reverse over chunks
B3. `local_bwd.py`  dq, dk, dv, dw, dβ, dG of each chunk with h_c, dh_{c+1} fixed          per chunk, in parallel
B4. `cumsum.py`     dg = reverse chunk-local cumsum of dG                               per chunk, in parallel

The derivation is in `README.md` (backward section) and in the docstrings of `state_bwd.py` and `local_bwd.py`.

Without the erase term (the forward saved no `T`: linear attention, scalar-decay GLA) B0 is skipped, B1 reads the
values as `Ũ` (`U = V`), B2 runs with `ERASE` off (`dṼ = dU`, no `K̃ᵀ dU`), and B3 with `ERASE` off (no `A`, `T`,
`K̃` terms; the one key's gradient is `dW`).

KLA (the forward saved `r = 1 / (‖k‖² + ε)`): B0 and B3 form the step `β = η r` from it, and B3 returns the gradient
of `η` in place of `dβ` and adds the step's dependence on `k` to `dk` (derivation in `local_bwd.py`).
"""

from __future__ import annotations

import torch

from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum
from linattn.ops.delta_rule.triton.forward import ForwardSaved
from linattn.ops.delta_rule.triton.local_bwd import local_bwd
from linattn.ops.delta_rule.triton.recompute import wy_apply
from linattn.ops.delta_rule.triton.state import state_fwd
from linattn.ops.delta_rule.triton.state_bwd import state_bwd


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
) -> tuple[torch.Tensor | None, ...]:
    """Gradients of the chunked forward `delta_rule_fwd` for the same inputs.

    Args:
        q, k, v, w, beta, g, scale, initial_state: as given to `delta_rule_fwd` (contiguous).
        saved: what `delta_rule_fwd` returned for them.
        do: `[B, T, H, V]` gradient of `o` (contiguous, any float dtype).
        dht: `[N, H, K, V]` gradient of the final state (contiguous), or None (none was output, or it is unused).
    Returns:
        `(dq, dk, dv, dw, dβ, dg, dh_0)`, each in its input's dtype, None where that input is None; with `w` None
        the gradient of the shared key is all in `dk`. For KLA (`saved.inv_sq_norm`) `dβ` is the gradient of the
        given `beta` (`η`).
    """
    layout, G, T_inv, inv_sq_norm = saved.layout, saved.G, saved.T_inv, saved.inv_sq_norm
    erase = T_inv is not None
    w_or_k = k if w is None else w
    if erase:
        u_tilde, k_tilde = wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm)
    else:
        u_tilde, k_tilde = v, None  # T = I, K̃ = 0
    h, U, _ = state_fwd(k_tilde, u_tilde, w_or_k, G, initial_state, False, layout)
    U = v if U is None else U
    del u_tilde  # free each intermediate once its last stage has run: the peak memory is in state_bwd
    dh, dv_tilde, dh0 = state_bwd(q, w_or_k, G, T_inv, k_tilde, do, dht, scale, initial_state is not None, layout)
    del k_tilde
    dq, dk, dv, dw, dbeta, dG = local_bwd(
        q, k, v, w, beta, G, h, dh, U, dv_tilde, do, scale, layout, erase, inv_sq_norm
    )  # fmt: skip
    dg = None if g is None else chunk_cumsum(dG, layout, reverse=True).to(g.dtype)
    dbeta = None if beta is None else dbeta.to(beta.dtype)
    dh0 = None if initial_state is None else dh0.to(initial_state.dtype)
    return dq, dk, dv, dw, dbeta, dg, dh0
