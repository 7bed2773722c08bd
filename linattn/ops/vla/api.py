"""Public `vla_gate` and `vla`: validation, then the chosen backend."""

from __future__ import annotations

import math
from functools import partial

import torch

from linattn.ops.checks import (
    Dims,
    check_backend,
    check_cu_seqlens,
    check_flag,
    check_head_first,
    check_precision,
    check_qk,
    check_qkv,
    check_scale,
    check_shape,
    check_spd,
    check_state,
)
from linattn.ops.delta_rule.chunk import chunk_delta_rule
from linattn.ops.delta_rule.naive import naive_delta_rule
from linattn.ops.unit_rows import unit_rows
from linattn.ops.utils.precision import fast_precision
from linattn.ops.varlen import per_length, per_sequence
from linattn.ops.vla.chunk import chunk_vla_gate
from linattn.ops.vla.forgetting import forgetting_gate, max_chunk
from linattn.ops.vla.head import headed_gate
from linattn.ops.vla.naive import naive_vla_gate
from linattn.ops.vla.refresh import check_position, pseudo_norm, run_gate


def triton_vla_gate(k, u, initial_state, *, lam0, unit_keys=False, fast=False):
    """The gate's Triton kernel (`triton/gate.py`), imported on first use: triton is an optional dependency."""
    from linattn.ops.vla.triton import triton_vla_gate as gate

    return gate(k, u, initial_state, lam0=lam0, unit_keys=unit_keys, fast=fast)


GATES = {"naive": naive_vla_gate, "chunk": chunk_vla_gate, "triton": triton_vla_gate}
STATES = {"naive": naive_delta_rule, "chunk": chunk_delta_rule}
# "fused_recurrent": decoding, the gate's step kernel (`triton/fused_recurrent.py`) then the delta rule's (forward only)
BACKENDS = (*GATES, "fused_recurrent")


def fused_recurrent_vla_gate(k, u, initial_state, *, lam0, rho, cu_seqlens):
    """The gate's decode kernel (`triton/fused_recurrent.py`), imported on first use: triton is an optional
    dependency."""
    from linattn.ops.vla.triton import fused_recurrent_vla_gate as gate

    return gate(k, u, initial_state, lam0=lam0, rho=rho, cu_seqlens=cu_seqlens)


def _finite_positive(name: str, x: object, expected: str = "a finite number > 0") -> float:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not 0 < x < math.inf:
        raise ValueError(f"{name}: expected {expected}, got {x!r}")
    return float(x)


def check_lam0(lam0: object) -> float:
    """The ridge `0 < λ0 < ∞` (the op's and the layer's check): `A_0 = I / λ0`, so an infinite one zeroes the gate."""
    return _finite_positive("lam0", lam0)


def check_rho(rho: object) -> float:
    """The forgetting factor `0 < ρ ≤ 1` (the op's and the layer's check)."""
    if not isinstance(rho, (int, float)) or isinstance(rho, bool) or not 0 < rho <= 1:
        raise ValueError(f"rho: expected a number in (0, 1], got {rho!r}")
    return float(rho)


def split_packed(name: str, rho: float):
    """How backend `name` meets packed sequences (`cu_seqlens`): `naive`, the definition, and any backend with
    forgetting (`ρ < 1`: padding would decay `A`) one at a time (`per_sequence`); the others in batches of similar
    lengths (`per_length`): a zero token leaves the gate's `A` (`u = 0` adds nothing to the penalty) and the state
    (`α̂ = 0`, no write) as they are."""
    return per_length if name != "naive" and rho == 1.0 else per_sequence


def backend_gate(
    name: str, lam0: float, rho: float = 1.0, unit_keys: bool = False, max_u_norm: float | None = None,
    fast: bool = False,
):  # fmt: skip
    """Backend `name`'s gate as `(k, u, A_0) -> (α̂, A_T)` (`naive_vla_gate`'s contract) at `λ0`, `ρ`: `naive`
    forgets token by token, the others through `forgetting.py`'s rescaled segments (when `ρ < 1`; the PyTorch path's
    chunks no longer than `forgetting.max_chunk(ρ)`, the Triton kernel's are 16 tokens), from an ill-conditioned
    start with `head.py`'s float64 head (`max_u_norm`: a known bound on `‖u_t‖` for its test). `fast`: the Triton
    kernel's products in one tf32 pass (`fast_gate`)."""
    gate = _forgetting(name, lam0, rho, unit_keys, fast)
    if name == "naive":
        return gate
    head = _forgetting("chunk", lam0, rho, unit_keys)
    return partial(headed_gate, gate, head, lam0=lam0, max_u_norm=max_u_norm)


def check_max_u_norm(max_u_norm: object) -> float | None:
    """A bound on `‖u_t‖` the caller knows (`vla_gate`'s `max_u_norm`), or None."""
    if max_u_norm is None:
        return None
    return _finite_positive("max_u_norm", max_u_norm, "None or a finite number > 0")


def check_refresh(refresh: object, position: object, N: int, device: torch.device) -> tuple[bool, torch.Tensor | int]:
    """`refresh` a bool, `position` as `refresh.check_position` takes it (checked also where no refresh reads it)."""
    return check_flag("refresh", refresh), check_position(position, N, device)


def refreshed_u_norm(max_u_norm: float | None, lam0: float, rho: float, K: int, refresh: bool) -> float | None:
    """The bound on the gate's row norms once the refresh's pseudo-rows join `u`'s."""
    if max_u_norm is None or not refresh or rho == 1.0:
        return max_u_norm
    return max(max_u_norm, pseudo_norm(lam0, rho, K))


def fast_gate(precision: object, *tokens: torch.Tensor) -> bool:
    """Whether `precision` (checked) is the `"fast"` level and applies to these token inputs, by the delta-rule
    engine's rule (`utils.precision.fast_precision`: all bfloat16). Other dtypes compute as at `"exact"`."""
    fast = check_precision(precision)
    return fast and fast_precision(tokens[0].device, *(x.dtype for x in tokens)) is not None


def _forgetting(name: str, lam0: float, rho: float, unit_keys: bool, fast: bool = False):
    gate = partial(triton_vla_gate, fast=fast) if name == "triton" else GATES[name]
    if rho == 1.0:
        return lambda k, u, s: gate(k, u, s, lam0=lam0, unit_keys=unit_keys)
    if name == "naive":
        return lambda k, u, s: gate(k, u, s, lam0=lam0, rho=rho, unit_keys=unit_keys)
    if name == "chunk":
        gate = partial(gate, max_chunk=max_chunk(rho))
    return lambda k, u, s: forgetting_gate(gate, k, u, s, lam0=lam0, rho=rho, unit_keys=unit_keys)


def vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    *,
    lam0: float = 0.1,
    rho: float = 1.0,
    refresh: bool = False,
    position: torch.Tensor | int = 0,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    max_u_norm: float | None = None,
    precision: str = "exact",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """VLA's write direction: `α̂_t = A_t k̂_t / ‖A_t k̂_t‖` with `A_t = (λ0 I + Σ_{s≤t} u_s u_sᵀ)⁻¹`.

    `A_t` is the inverse penalty of the online regularised least-squares write, updated by Sherman–Morrison
    (`naive`) or by the equivalent chunk-parallel Cholesky form (`chunk`); `k̂ = k / ‖k‖`. With a forgetting factor
    `ρ < 1`, `A_t = M_t⁻¹` with `M_t = ρ M_{t-1} + u_t u_tᵀ`, `M_0 = λ0 I` (docs/design.md §2.3's option;
    `forgetting.py`).

    Args:
        k: keys `[B, T, H, K]` (L2-normalised inside).  u: penalty directions `[B, T, H, K]` (same dtype).
        lam0: ridge `λ0 > 0`, used when `initial_state` is None (`A_0 = I / λ0`).
        rho: forgetting factor `0 < ρ ≤ 1` (1: none, the paper's gate).
        refresh: with `ρ < 1`, re-inject the prior one coordinate a token, `M_t = ρ M_{t-1} + c e_j e_jᵀ + u_t u_tᵀ`
            (`j = n_t mod K`, `refresh.py`): `A` stays bounded whatever directions `u` visits (no wind-up). With
            `ρ = 1` it changes nothing (`c = 0`: nothing is forgotten, so nothing winds up).
        position: the position `n` of each sequence's first token, the refresh's phase: an int, or an integer
            tensor `[N]` (a decoder's tokens seen so far; continuing from an `initial_state`, the tokens before it,
            as the layer passes them). Read only with `refresh` and `ρ < 1`.
        initial_state: `A_0: [N, H, K, K]`, symmetric positive definite.
        output_final_state: also return `A_T: [N, H, K, K]` (float32; float64 for float64 inputs).
        cu_seqlens: `[N + 1]` int offsets of packed sequences in `B == 1`.
        backend: `"auto"` (`"triton"` on CUDA unless float64, else `"chunk"`), `"naive"`, `"chunk"`, `"triton"`
            (the kernel of `triton/gate.py` for head dims up to 128; packed sequences as `split_packed` says) or
            `"fused_recurrent"` (decoding: a few tokens on a carried `A` in one launch, forward only).
        max_u_norm: an upper bound on every `‖u_t‖` that the caller knows (the VLA layer's `u` has norm `K^-½`), or
            None. The chunked gates read `max ‖u_t‖` to decide whether their first tokens need float64 (`head.py`),
            a wait for the GPU once a call; with the bound and no `initial_state` they decide without it. A bound
            below the true norm costs accuracy on an ill-conditioned start, nothing else.
        precision: `"exact"` (default): within twice the naive recurrence's error in the inputs' dtype
            (docs/design.md §4). `"fast"`: with bfloat16 `k` and `u` the `triton` backend's products take one tf32
            pass, under the bfloat16 rounding of `α̂` (within 3× the naive recurrence's error); other dtypes and
            backends compute as at `"exact"`.
    Returns:
        `(alpha_hat, A)`, `alpha_hat: [B, T, H, K]` unit rows in k's dtype.

    Example:
        >>> k, u = torch.randn(1, 100, 2, 32), torch.randn(1, 100, 2, 32) / 32**0.5
        >>> alpha_hat, A = vla_gate(k, u, lam0=0.1, output_final_state=True)   # A: [1, 2, 32, 32]
    """
    B, T, H, K = check_qk(k, u, q_name="k", k_name="u")
    lam0, rho = check_lam0(lam0), check_rho(rho)
    N = check_cu_seqlens(cu_seqlens, B, T)
    check_head_first(Dims(B=B, T=T, H=H, K=K, V=K, N=N), ("initial_state", initial_state, "NHKK"), q_name="k")
    if check_state("initial_state", initial_state, (N, H, K, K), "[N, H, K, K]", k.device, "k") is not None:
        check_spd("initial_state", initial_state)
    name = check_backend(backend, k.device, BACKENDS, k.dtype)
    fast = fast_gate(precision, k, u)
    refresh, position = check_refresh(refresh, position, N, k.device)
    check_flag("output_final_state", output_final_state)
    max_u_norm = refreshed_u_norm(check_max_u_norm(max_u_norm), lam0, rho, K, refresh)

    def gate(k, u, rho, cu):
        if name == "fused_recurrent":
            return fused_recurrent_vla_gate(k, u, initial_state, lam0=lam0, rho=rho, cu_seqlens=cu)[1:]
        one = backend_gate(name, lam0, rho, max_u_norm=max_u_norm, fast=fast)
        return split_packed(name, rho)(one, cu, (k, u), initial_state)

    alpha_hat, A = run_gate(gate, k, u, lam0=lam0, rho=rho, refresh=refresh, position=position, cu_seqlens=cu_seqlens)
    return alpha_hat.to(k.dtype), (A if output_final_state else None)


def vla(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    *,
    lam0: float = 0.1,
    rho: float = 1.0,
    refresh: bool = False,
    position: torch.Tensor | int = 0,
    scale: float | None = None,
    initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    max_u_norm: float | None = None,
    precision: str = "exact",
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """Variational linear attention: the VLA gate, then the delta rule with `k = k̂`, `w = α̂`, `β = γ = 1`.

    `S_t = (I − α̂_t k̂_tᵀ) S_{t-1} + α̂_t v_tᵀ`,  `o_t = scale · S_tᵀ q_t`  (the paper's
    `S_t = S_{t-1} + (v_t − S_{t-1} k̂_t) α̂_tᵀ` in its `[V, K]` orientation).

    The paper's output normaliser `max(z_tᵀ q_t, ε)` with `z_t = Σ k_s` is a layer option, not part of the op.

    Args:
        q, k: `[B, T, H, K]` (k is L2-normalised inside).  v: `[B, T, H, V]`.  u: `[B, T, H, K]`.
        lam0: ridge `λ0 > 0` for `A_0 = I / λ0` when no initial state is given.
        rho: the gate's forgetting factor `0 < ρ ≤ 1` (`vla_gate`; 1: none, the paper's).
        refresh, position: with `ρ < 1`, the prior re-injected one coordinate a token from each sequence's
            `position` on (`vla_gate`'s): no wind-up.
        scale: output scale, default `K ** -0.5`.
        initial_state: `(S_0: [N, H, K, V], A_0: [N, H, K, K])` or None.
        output_final_state: also return `(S_T, A_T)`.
        cu_seqlens: `[N + 1]` int offsets of packed sequences in `B == 1`.
        backend: `"auto"` (`"triton"` on CUDA unless float64, else `"chunk"`), `"naive"`, `"chunk"`, `"triton"`
            (the gate's kernels once per group of packed sequences of similar lengths, `split_packed`; the state
            on the Triton delta-rule engine, packed sequences in one launch per stage) or `"fused_recurrent"`
            (decoding: the gate's and the delta rule's step kernels, two launches for a few tokens on a carried
            `(S, A)`, forward only).
        max_u_norm: a known bound on every `‖u_t‖`, or None (`vla_gate`'s).
        precision: `"exact"` (default): within twice the naive recurrence's error in the inputs' dtype
            (docs/design.md §4). `"fast"`: with bfloat16 `q, k, v, u` the `triton` backend takes the gate's products
            (forward and backward) in one tf32 pass; outputs and gradients within 3× the naive recurrence's error,
            final states within bfloat16's rounding (`2⁻⁸`). The state's engine stays at its exact level on float32
            `k̂`, `α̂` (`_state_triton` says why). Other dtypes and backends compute as at `"exact"`.
    Returns:
        `(o, (S, A))`, `o: [B, T, H, V]` in v's dtype; the state is None unless requested.

    Example:
        >>> phi = lambda x: torch.nn.functional.elu(x) + 1
        >>> q, k = phi(torch.randn(1, 128, 4, 32)), phi(torch.randn(1, 128, 4, 32))
        >>> u = torch.nn.functional.normalize(torch.randn(1, 128, 4, 32), dim=-1) / 32**0.5
        >>> o, (S, A) = vla(q, k, torch.randn(1, 128, 4, 32), u, output_final_state=True)
    """
    dims = check_qkv(q, k, v, cu_seqlens)
    check_head_first(dims, ("initial_state", initial_state, "NHKV"))
    check_qk(k, u, q_name="k", k_name="u")
    lam0, rho = check_lam0(lam0), check_rho(rho)
    if initial_state is not None:
        if not isinstance(initial_state, tuple) or len(initial_state) != 2:
            raise TypeError("initial_state: expected a pair (S [N, H, K, V], A [N, H, K, K]) or None")
        check_shape("initial_state[0]", initial_state[0], (dims.N, dims.H, dims.K, dims.V), "[N, H, K, V]", dims.device)
        check_shape("initial_state[1]", initial_state[1], (dims.N, dims.H, dims.K, dims.K), "[N, H, K, K]", dims.device)
        check_spd("initial_state[1]", initial_state[1])
    name = check_backend(backend, q.device, BACKENDS, q.dtype)
    fast = fast_gate(precision, q, k, v, u)
    scale = check_scale(scale, dims.K)
    refresh, position = check_refresh(refresh, position, dims.N, q.device)
    check_flag("output_final_state", output_final_state)
    max_u_norm = refreshed_u_norm(check_max_u_norm(max_u_norm), lam0, rho, dims.K, refresh)
    S0, A0 = (None, None) if initial_state is None else initial_state
    gating = dict(lam0=lam0, rho=rho, refresh=refresh, position=position, cu_seqlens=cu_seqlens)
    if name == "fused_recurrent":
        return _vla_fused_recurrent(q, k, v, u, gating, scale, S0, A0, output_final_state)

    def gate(k_hat, u, rho, cu):
        one = backend_gate(name, lam0, rho, unit_keys=True, max_u_norm=max_u_norm, fast=fast)
        return split_packed(name, rho)(one, cu, (k_hat, u), A0)

    k_hat = unit_rows(k)  # once, for the gate and the state
    alpha_hat, A = run_gate(gate, k_hat, u, **gating)
    if name == "triton":
        o, S = _state_triton(q, k, k_hat, v, alpha_hat, scale, S0, output_final_state, cu_seqlens)
    else:

        def state(q, k_hat, v, alpha_hat, s):
            return STATES[name](q, k_hat, v, alpha_hat, None, None, s, scale=scale)

        # the state after the gate: zero padding writes nothing whatever `ρ` (`split_packed` at `ρ = 1`)
        o, S = split_packed(name, 1.0)(state, cu_seqlens, (q, k_hat, v, alpha_hat), S0)
    return o.to(v.dtype), ((S, A) if output_final_state else None)


def _vla_fused_recurrent(q, k, v, u, gating, scale, S0, A0, output_final_state):
    """`vla`'s decode backend on validated inputs: the gate's step kernel gives `k̂`, `α̂` (float32) and `A_T`, the
    delta rule's decode kernel the output and `S_T` (`w = α̂`): two launches, packed sequences included (`gating`:
    `run_gate`'s keywords)."""
    # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
    from linattn.ops.delta_rule.triton.fused_recurrent import fused_recurrent

    def gate(k, u, rho, cu):
        return fused_recurrent_vla_gate(k, u, A0, lam0=gating["lam0"], rho=rho, cu_seqlens=cu)

    k_hat, alpha_hat, A = run_gate(gate, k, u, **gating)
    o, S = fused_recurrent(
        q, k_hat, v, w=alpha_hat, scale=scale, initial_state=S0, output_final_state=output_final_state,
        cu_seqlens=gating["cu_seqlens"],
    )  # fmt: skip
    return o, ((S, A) if output_final_state else None)


def _state_triton(q, k, k_hat, v, alpha_hat, scale, S0, output_final_state, cu_seqlens):
    """`vla`'s state on the Triton engine: the two-key delta rule (`w = α̂`) of all sequences, one launch per stage.
    `k̂` and `α̂` come out of the gate in float32 and enter the engine so, beside `q` and `v` in their own dtype:
    rounding them to a bfloat16 model's dtype would put that dtype's rounding into the float32 state, which the
    reference keeps exact. So at the fast level too (`../vla/README.md`'s precision notes say what rounding them
    cost)."""
    # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
    from linattn.ops.delta_rule.triton.function import delta_rule_triton

    # k̂, α̂: float32 keys derived from the tokens, whose gradients the gate and `unit_rows` bring back to k, u
    derived = k.dtype == torch.bfloat16
    return delta_rule_triton(
        q, k_hat, v, alpha_hat, None, None, scale, S0, output_final_state, cu_seqlens, derived_keys=derived
    )
