"""Public `delta_rule`: validation, then the chosen backend."""

from __future__ import annotations

import torch

from linattn.ops.checks import (
    check_backend,
    check_flag,
    check_gate,
    check_head_first,
    check_precision,
    check_qk,
    check_qkv,
    check_scale,
    check_state,
)
from linattn.ops.delta_rule.chunk import chunk_delta_rule
from linattn.ops.delta_rule.kaczmarz import check_kaczmarz_eps, kaczmarz_step
from linattn.ops.delta_rule.naive import naive_delta_rule
from linattn.ops.varlen import per_length, per_sequence

# the PyTorch backends, which take no cu_seqlens: `naive` runs packed sequences one at a time (`per_sequence`),
# `chunk` in batches of similar lengths (`per_length`: zero tokens at the end of a sequence write nothing)
PYTORCH = {"naive": naive_delta_rule, "chunk": chunk_delta_rule}
BACKENDS = (*PYTORCH, "triton", "fused_recurrent")


def delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    w: torch.Tensor | None = None,
    beta: torch.Tensor | None = None,
    g: torch.Tensor | None = None,
    kaczmarz_eps: float | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    backend: str = "auto",
    precision: str = "exact",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The two-key gated delta rule (DeltaNet, Gated DeltaNet, KLA and VLA's state are configurations of it).

    `S_t = exp(g_t) (I − β_t w_t k_tᵀ) S_{t-1} + β_t w_t v_tᵀ`,   `o_t = scale · S_tᵀ q_t`.

    `k_t` is the erase/read key (the state predicts `S_{t-1}ᵀ k_t` for it), `w_t` the write direction.

    KLA (Kaczmarz linear attention) is `beta=η, kaczmarz_eps=ε` on raw keys: the step becomes
    `β_t = η_t / (‖k_t‖² + ε)`, computed inside the backend (the Triton kernels take `‖k_t‖²` from the key rows
    they load anyway) and differentiated in both `η` and `k`. It equals `beta=kaczmarz_beta(k, η, ε)` without
    the separate pass over `k` and its float32 temporaries.

    Args:
        q, k: `[B, T, H, K]`.  v: `[B, T, H, V]` (same dtype as q).
        w: write direction `[B, T, H, K]`, default `k` (DeltaNet); VLA passes `α̂`.
        beta: step `[B, T, H]`, default 1; with `kaczmarz_eps`, the relaxation `η` of the Kaczmarz step.
        g: log-decay `[B, T, H]`, `<= 0`, default 0 (no decay); Gated DeltaNet's gate.
        kaczmarz_eps: None (default): `beta` is the step. A number `ε >= 0` (KLA: `1e-6`): the step is
            `β_t = beta_t / (‖k_t‖² + ε)` of the erase key `k` (not `w`), `beta` None meaning `η = 1`.
        scale: output scale, default `K ** -0.5`.
        initial_state: `[N, H, K, V]` (`N = B`, or the number of packed sequences), any float dtype.
        output_final_state: also return the final state `[N, H, K, V]` (float32; float64 for float64 inputs).
        cu_seqlens: `[N + 1]` int offsets of packed sequences in `B == 1`.
        backend: `"auto"` (`"triton"` on CUDA unless the inputs are float64, else `"chunk"`), `"naive"`, `"chunk"`
            or `"triton"` (float32 / bfloat16 / float16 inputs; on CPU it needs `TRITON_INTERPRET=1` set before
            the first call), or `"fused_recurrent"` (one launch for a few tokens on a carried state: decoding;
            forward only).
        precision: `"exact"` (default): every backend within twice the naive recurrence's error in the inputs'
            dtype (docs/design.md §4). `"fast"`: with bfloat16 inputs the `triton` backend stores its
            intermediates (chunk states, pseudo-values, the WY factors) in bfloat16 and multiplies some of them on
            its bfloat16 tensor cores, as fla does; outputs and gradients within 3× the naive recurrence's error,
            final states within bfloat16's rounding (`2⁻⁸`). float32 / float16 inputs and the other backends compute
            as at `"exact"`, which meets the looser contract too.
    Returns:
        `(o, final_state)`, `o: [B, T, H, V]` in v's dtype; `final_state` is None unless requested.

    Example (Gated DeltaNet, then KLA on raw keys with the same gates):
        >>> k = torch.nn.functional.normalize(torch.randn(1, 256, 4, 64), dim=-1)
        >>> q, v = torch.randn(1, 256, 4, 64), torch.randn(1, 256, 4, 64)
        >>> beta, g = torch.rand(1, 256, 4), -torch.rand(1, 256, 4) * 0.1
        >>> o, S = delta_rule(q, k, v, beta=beta, g=g, output_final_state=True)
        >>> o, S = delta_rule(q, 3 * torch.randn(1, 256, 4, 64), v, beta=beta, g=g, kaczmarz_eps=1e-6)
    """
    dims = check_qkv(q, k, v, cu_seqlens)
    check_head_first(dims, ("beta", beta, "BTH"), ("g", g, "BTH"), ("initial_state", initial_state, "NHKV"))
    if w is not None:
        check_qk(q, w, k_name="w")
    if beta is not None:
        check_gate("beta", beta, dims)
    if g is not None:
        check_gate("g", g, dims, log_decay=True)
    if kaczmarz_eps is not None:
        check_kaczmarz_eps("kaczmarz_eps", kaczmarz_eps)
    check_state("initial_state", initial_state, (dims.N, dims.H, dims.K, dims.V), "[N, H, K, V]", dims.device)
    name = check_backend(backend, q.device, BACKENDS, q.dtype)
    fast = check_precision(precision)
    check_flag("output_final_state", output_final_state)
    scale = check_scale(scale, dims.K)
    if name == "fused_recurrent":
        from linattn.ops.delta_rule.triton.fused_recurrent import fused_recurrent

        o, S = fused_recurrent(
            q,
            k,
            v,
            w=w,
            beta=beta,
            g=g,
            erase=True,
            kaczmarz_eps=kaczmarz_eps,
            scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state,
            cu_seqlens=cu_seqlens,
        )
        return o, S
    if name == "triton":
        # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
        from linattn.ops.delta_rule.triton.function import delta_rule_triton

        if beta is not None and beta.dtype not in (q.dtype, torch.float32):
            # the kernels are checked with beta in q's dtype or float32: a bfloat16 beta beside float32 q, k, v (a
            # layer under autocast) gave wrong gradients on a GPU with the Kaczmarz step and packed sequences; a
            # float32 beta is kept, as rounding it to bfloat16 q's dtype puts 2⁻⁹ into S and dβ (T = 1)
            beta = beta.float()

        return delta_rule_triton(
            q, k, v, w, beta, g, scale, initial_state, output_final_state, cu_seqlens, kaczmarz_eps, fast=fast
        )
    if kaczmarz_eps is not None:
        beta = kaczmarz_step(k, beta, kaczmarz_eps)  # per token, so packed sequences need no split
    fn = PYTORCH[name]
    split = per_sequence if name == "naive" else per_length
    o, S = split(
        lambda q, k, v, w, beta, g, s: fn(q, k, v, w, beta, g, s, scale=scale),
        cu_seqlens,
        (q, k, v, w, beta, g),
        initial_state,
    )
    return o.to(v.dtype), (S if output_final_state else None)
