"""Public `linear_attention` and `gated_linear_attention`: validation, then the chosen backend."""

from __future__ import annotations

import torch

from linattn.ops.checks import (
    check_backend,
    check_flag,
    check_head_first,
    check_log_decay,
    check_precision,
    check_qkv,
    check_scale,
    check_shape,
    check_state,
)
from linattn.ops.linear_attention.chunk import chunk_gated_linear_attention
from linattn.ops.linear_attention.naive import naive_gated_linear_attention
from linattn.ops.varlen import per_length, per_sequence

# the PyTorch backends, which take no cu_seqlens: `naive` runs packed sequences one at a time (`per_sequence`),
# `chunk` in batches of similar lengths (`per_length`: zero tokens at the end of a sequence write nothing)
PYTORCH = {"naive": naive_gated_linear_attention, "chunk": chunk_gated_linear_attention}
# "triton": the chunked delta-rule kernels without the erase term (scalar or no decay), GLA's own kernels for a
# per-channel decay (`triton/`); "fused_recurrent": the decode kernel (forward only)
BACKENDS = (*PYTORCH, "triton", "fused_recurrent")

# Lower clamp of the normaliser `z_tᵀ q_t` (the VLA paper's value).
NORMALIZER_EPS = 1e-4
# K and V of the triton backend (normalize=True adds a value column: the kernels take V + 1 = 257)
MAX_TRITON_HEAD_DIM = 256


def gated_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    precision: str = "exact",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated linear attention: `S_t = exp(g_t) ⊙ S_{t-1} + k_t v_tᵀ`, `o_t = scale · S_tᵀ q_t`.

    Args:
        q, k: `[B, T, H, K]`.  v: `[B, T, H, V]` (same dtype as q).
        g: log-decay `<= 0`, either `[B, T, H]` (one scalar per head: Mamba-2 / simple GLA) or
            `[B, T, H, K]` (one per key channel: GLA).
        scale: output scale, default `K ** -0.5`.
        initial_state: `[N, H, K, V]` (`N = B`, or the number of packed sequences), any float dtype.
        output_final_state: also return the final state `[N, H, K, V]` (float32; float64 for float64 inputs).
        cu_seqlens: `[N + 1]` int offsets of packed sequences in `B == 1`.
        backend: `"auto"` (`"triton"` on CUDA, except for float64 inputs; else `"chunk"`),
            `"naive"`, `"chunk"`, `"triton"` (float32 / bfloat16 / float16 inputs, head dims up to 256; on CPU
            it needs `TRITON_INTERPRET=1` set before the first call), or
            `"fused_recurrent"` (decoding: a few tokens on a carried state in one launch, forward only).
        precision: `"exact"` (default) or `"fast"`: with a scalar decay or none, the `triton` backend's chunk
            states in bfloat16 for bfloat16 inputs, as `delta_rule`'s (which says the contract); a per-channel
            decay's kernels and the other backends compute as at `"exact"`.
    Returns:
        `(o, final_state)`, `o: [B, T, H, V]` in v's dtype; `final_state` is None unless requested.

    Example:
        >>> q = k = torch.randn(2, 100, 4, 32); v = torch.randn(2, 100, 4, 16)
        >>> g = -torch.rand(2, 100, 4)
        >>> o, S = gated_linear_attention(q, k, v, g, output_final_state=True)   # S: [2, 4, 32, 16]
    """
    dims = check_qkv(q, k, v, cu_seqlens)
    check_head_first(dims, ("g", g, "BTH"), ("initial_state", initial_state, "NHKV"))
    if not isinstance(g, torch.Tensor) or g.dim() != 4:
        check_shape("g", g, (dims.B, dims.T, dims.H), "[B, T, H] or [B, T, H, K]", dims.device)
    else:
        check_shape("g", g, (dims.B, dims.T, dims.H, dims.K), "[B, T, H] or [B, T, H, K]", dims.device)
    check_log_decay("g", g)
    fast = check_precision(precision)
    check_flag("output_final_state", output_final_state)
    return _run(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, backend, dims, fast=fast)


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    normalize: bool = False,
    scale: float | None = None,
    initial_state: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    precision: str = "exact",
) -> tuple[torch.Tensor, torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None]:
    """Linear attention: `S_t = S_{t-1} + k_t v_tᵀ`, `o_t = scale · S_tᵀ q_t`.

    With `normalize=True` the output is divided by the normaliser of the same query,
    `o_t = S_tᵀ q_t / max(z_tᵀ q_t, 1e-4)` with `z_t = Σ_{s≤t} k_s` (q scaled by `scale` in both, so the scale
    cancels except inside the clamp). The state is then the pair `(S: [N, H, K, V], z: [N, H, K])`, both for
    `initial_state` and the returned final state, and `precision="fast"` runs the exact level (the op's README says
    why).

    Args and returns as `gated_linear_attention`, without `g`.

    Example:
        >>> phi = lambda x: torch.nn.functional.elu(x) + 1   # the paper baselines' feature map
        >>> q, k = phi(torch.randn(1, 64, 2, 16)), phi(torch.randn(1, 64, 2, 16))
        >>> o, (S, z) = linear_attention(q, k, torch.randn(1, 64, 2, 16), normalize=True, output_final_state=True)
    """
    dims = check_qkv(q, k, v, cu_seqlens)
    check_head_first(dims, ("initial_state", initial_state, "NHKV"))
    fast = check_precision(precision)
    check_flag("output_final_state", output_final_state)
    if not normalize:
        return _run(q, k, v, None, scale, initial_state, output_final_state, cu_seqlens, backend, dims, fast=fast)
    if initial_state is not None:
        if not isinstance(initial_state, tuple) or len(initial_state) != 2:
            raise TypeError("initial_state: with normalize=True expected a pair (S [N, H, K, V], z [N, H, K])")
        S0, z0 = initial_state
        check_shape("initial_state[0]", S0, (dims.N, dims.H, dims.K, dims.V), "[N, H, K, V]", dims.device)
        check_shape("initial_state[1]", z0, (dims.N, dims.H, dims.K), "[N, H, K]", dims.device)
        initial_state = torch.cat([S0, z0[..., None].to(S0.dtype)], dim=-1)
    # The normaliser is one more value column of ones: z_t is the state's last column. Where no gradient can be taken
    # the kernels' o is only the division's operand, so their products take the precision of v's dtype, not o's
    # (`derived_output`: one tf32 pass in bfloat16 without a final state, as unnormalised). Otherwise o keeps three
    # passes and the fast level is the exact one: `dq_t = Σ_s k_s (v_s − o_t)ᵀdo_t / z_t` comes out as two shares,
    # `S do / z` and `z oᵀdo / z` with the forward's o, that cancel where the values share a mean, past what a
    # one-pass o, or the fast level's bfloat16 states, keep within either level's rule (the op's README).
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, initial_state))
    v_aug = torch.cat([v, v.new_ones(*v.shape[:3], 1)], dim=-1)
    o_aug, S_aug = _run(
        q, k, v_aug, None, scale, initial_state, output_final_state, cu_seqlens, backend, dims, cast=False,
        derived_output=not grad,
    )  # fmt: skip
    o = o_aug[..., : dims.V] / o_aug[..., dims.V :].clamp_min(NORMALIZER_EPS)
    state = None if S_aug is None else (S_aug[..., : dims.V], S_aug[..., dims.V])
    return o.to(v.dtype), state


def _run(
    q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, backend, dims, *, cast=True, fast=False,
    derived_output=False,
):  # fmt: skip
    """The op on validated inputs; with `cast=False`, `o` stays in the compute dtype (float32, or float64); `fast`:
    the triton backend's fast level where the engine runs it (no decay or a scalar one); `derived_output`: `o` is
    an intermediate of an output rounded to v's dtype (`linear_attention_triton`)."""
    name = check_backend(backend, q.device, BACKENDS, q.dtype)
    V = v.shape[-1]
    check_state("initial_state", initial_state, (dims.N, dims.H, dims.K, V), "[N, H, K, V]", dims.device)
    scale = check_scale(scale, dims.K)
    if name == "triton":
        if dims.K > MAX_TRITON_HEAD_DIM or dims.V > MAX_TRITON_HEAD_DIM:
            raise ValueError(
                f"q, k, v: backend='triton' supports head dims up to {MAX_TRITON_HEAD_DIM}, got K={dims.K}, "
                f"V={dims.V} (use backend='chunk')"
            )
        # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
        if g is not None and g.dim() == 4:
            from linattn.ops.linear_attention.triton import gla_triton

            return gla_triton(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens)
        from linattn.ops.linear_attention.triton import linear_attention_triton

        out_dtype = None if cast else torch.float32
        return linear_attention_triton(
            q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, out_dtype=out_dtype, fast=fast,
            derived_output=derived_output,
        )  # fmt: skip
    if name == "fused_recurrent":
        from linattn.ops.linear_attention.triton import fused_recurrent_linear_attention

        o, S = fused_recurrent_linear_attention(q, k, v, g, scale, initial_state, cu_seqlens)
    else:
        fn = PYTORCH[name]
        split = per_sequence if name == "naive" else per_length
        o, S = split(lambda q, k, v, g, s: fn(q, k, v, g, s, scale=scale), cu_seqlens, (q, k, v, g), initial_state)
    return (o.to(v.dtype) if cast else o), (S if output_final_state else None)
