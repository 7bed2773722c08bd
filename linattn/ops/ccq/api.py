"""Public `ccq_query`: validation, then the chosen backend."""

from __future__ import annotations

import torch

from linattn.ops.ccq.chunk import chunk_ccq_query
from linattn.ops.ccq.naive import naive_ccq_query
from linattn.ops.checks import (
    Dims,
    check_backend,
    check_cu_seqlens,
    check_flag,
    check_gate,
    check_head_first,
    check_nonnegative,
    check_precision,
    check_qk,
    check_shape,
)
from linattn.ops.unit_rows import unit_rows
from linattn.ops.varlen import per_sequence

PER_SEQUENCE = {"naive": naive_ccq_query, "chunk": chunk_ccq_query}
BACKENDS = (*PER_SEQUENCE, "triton")

CCQState = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def ccq_query(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    *,
    g: torch.Tensor | None = None,
    centered: bool = True,
    normalize_keys: bool = True,
    initial_state: CCQState | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    precision: str = "exact",
) -> tuple[torch.Tensor, CCQState | None]:
    """Curvature-conditioned query: `q'_t = (I − λ_t Σ_t) q_t` with `Σ_t` the running key covariance.

    `Σ_t = Σ_{s≤t} ω_ts k_s k_sᵀ / Z_t − μ_t μ_tᵀ`, `μ_t = Σ ω_ts k_s / Z_t`, `Z_t = Σ ω_ts`, with
    `ω_ts = Γ_t / Γ_s` (the base op's decay `g`) or 1. The base op then reads its state with `q'`.
    With unit keys `‖Σ_t‖ ≤ 1`, so for `λ ∈ [0, 1]` the map `I − λΣ` is a contraction.

    Args:
        q, k: `[B, T, H, K]` (same dtype).  lam: `λ_t` `[B, T, H]`, typically `σ(w_λᵀ q_t + b_λ)`.
        g: the base op's scalar log-decay `[B, T, H]` (`<= 0`) or None (no decay).
        centered: subtract `μ_t μ_tᵀ` (the Hessian of softmax's log-partition at `q = 0`); else `C_t / Z_t`.
        normalize_keys: L2-normalise the keys before they enter `Σ`.
        initial_state: `(C: [N, H, K, K], m: [N, H, K], Z: [N, H])` or None.
        output_final_state: also return the final `(C, m, Z)` (float32; float64 for float64 inputs).
        cu_seqlens: `[N + 1]` int offsets of packed sequences in `B == 1`.
        backend: `"auto"` (`"triton"` on CUDA unless float64, else `"chunk"`), `"naive"`, `"chunk"` or `"triton"`
            (CCQ's fused kernels: one walk over the keys for `(C, m, Z)`, the read and contraction per chunk;
            packed sequences in one launch).
        precision: `"exact"` (default): every backend within twice the naive recurrence's error in the inputs'
            dtype (docs/design.md §4). `"fast"`: with bfloat16 `q`, `k` the `triton` backend stores the running
            sums `C` at the chunk boundaries (and their gradients) in bfloat16, half the bytes its passes move;
            they are still summed in float32. Outputs and gradients within 3× the naive recurrence's error, final
            states within bfloat16's rounding; other dtypes and backends compute as at `"exact"`.
    Returns:
        `(q_clean, state)`, `q_clean: [B, T, H, K]` in q's dtype.

    Example:
        >>> q, k = torch.randn(1, 100, 2, 16), torch.randn(1, 100, 2, 16)
        >>> q_clean, _ = ccq_query(q, k, torch.sigmoid(torch.randn(1, 100, 2)))
    """
    B, T, H, K = check_qk(q, k)
    N = check_cu_seqlens(cu_seqlens, B, T)
    dims = Dims(B=B, T=T, H=H, K=K, V=K, N=N, device=q.device)
    check_head_first(dims, ("lam", lam, "BTH"), ("g", g, "BTH"), ("initial_state", initial_state, "NHKK"))
    check_gate("lam", lam, dims)
    if g is not None:
        check_gate("g", g, dims, log_decay=True)
    if initial_state is not None:
        if not isinstance(initial_state, tuple) or len(initial_state) != 3:
            raise TypeError("initial_state: expected a triple (C [N, H, K, K], m [N, H, K], Z [N, H]) or None")
        check_shape("initial_state[0]", initial_state[0], (N, H, K, K), "[N, H, K, K]", dims.device)
        check_shape("initial_state[1]", initial_state[1], (N, H, K), "[N, H, K]", dims.device)
        check_shape("initial_state[2]", initial_state[2], (N, H), "[N, H]", dims.device)
        check_nonnegative("initial_state[2]", initial_state[2], "the mass Z", "0: no key seen yet")
    name = check_backend(backend, q.device, BACKENDS, q.dtype)
    fast = check_precision(precision)
    check_flag("output_final_state", output_final_state)
    if normalize_keys:  # back in k's dtype: the quotient is float32 for half-precision keys
        k = unit_rows(k).to(k.dtype)
    if name == "triton":
        # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
        from linattn.ops.ccq.triton.function import ccq_query_triton

        return ccq_query_triton(q, k, lam, g, initial_state, centered, output_final_state, cu_seqlens, fast)
    fn = PER_SEQUENCE[name]
    q_clean, state = per_sequence(
        lambda q, k, lam, g, s: fn(q, k, lam, g, s, centered=centered), cu_seqlens, (q, k, lam, g), initial_state
    )
    return q_clean.to(q.dtype), (state if output_final_state else None)
