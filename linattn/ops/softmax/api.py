"""Softmax attention through PyTorch's `scaled_dot_product_attention` (flash / memory-efficient kernels on GPU)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops.checks import check_qkv, check_scale
from linattn.ops.varlen import per_length, per_sequence


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = True,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, None]:
    """`o_t = Σ_s softmax_s(scale · q_tᵀ k_s) v_s` over `s ≤ t` (`causal`) or all `s`; the baseline.

    Same layout and return convention as the linear ops so layers can swap it in; there is no fixed-size
    state (decoding keeps a KV cache, see `linattn.layers`), so the second value is always None.

    Args:
        q, k: `[B, T, H, K]`.  v: `[B, T, H, V]`.  scale: default `K ** -0.5`.
        causal: mask future positions.  cu_seqlens: `[N + 1]` packed sequences in `B == 1` (causal: in batches of
            similar lengths, zero-padded, `varlen.per_length`, which a query before the padding never sees; else
            one at a time).
    Returns:
        `(o, None)`, `o: [B, T, H, V]` in v's dtype.

    Example:
        >>> q = k = v = torch.randn(2, 128, 4, 64)
        >>> o, _ = softmax_attention(q, k, v)
    """
    check_qkv(q, k, v, cu_seqlens)
    scale = check_scale(scale, q.shape[-1])
    if scale <= 0:
        # PyTorch's CPU kernel scales the causal mask's -inf too, and -inf · scale is NaN or +inf: scale q instead
        q, scale = q * scale, 1.0

    def one_sequence(q, k, v, _state):
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=scale
        )  # [B, H, T, V]
        return o.transpose(1, 2), None

    o, _ = (per_length if causal else per_sequence)(one_sequence, cu_seqlens, (q, k, v), None)
    return o, None
