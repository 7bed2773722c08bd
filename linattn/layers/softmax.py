"""Softmax attention layer (the baseline), decoding with a KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, State, merge_heads, split_heads
from linattn.layers.short_conv import ConvProjections
from linattn.ops import softmax_attention


class SoftmaxAttention(Mixer):
    """Multi-head causal softmax attention: `y = W_o · merge_h(softmax(q kᵀ / √d) v)`.

    No positional encoding inside (the LM adds learned positions). With `short_conv=True` q, k and v go through
    a causal short convolution + SiLU first, as in DeltaNet / GDN / KLA: every position then sees its few
    predecessors, which is what a two-layer model needs to bind a key to the value after it.
    The state is the KV cache `{"k", "v": [B, T_past, H, d]}` (plus the conv caches); it grows with the context,
    so `state_size(seq_len)` is `2·d_model·seq_len`. With `cu_seqlens` the packed sequences run separately and
    no cache is returned (lengths differ).
    """

    optional_state = frozenset({"k", "v"})  # a packed prefill keeps no KV cache (`mix` says so)
    growing_state = frozenset({("k", 1), ("v", 1)})  # the cache's length

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        short_conv: bool = False,
        conv_size: int = 4,
        bias: bool = False,
        backend: str = "auto",
    ):
        super().__init__(d_model, n_heads, backend=backend)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias) if not short_conv else None
        self.conv_qkv = (
            ConvProjections(d_model, dict.fromkeys("qkv", d_model), conv_size=conv_size) if short_conv else None
        )
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def init_state(self, batch_size: int) -> State:
        empty = self.out.weight.new_zeros(batch_size, 0, self.n_heads, self.head_dim)
        state = {"k": empty, "v": empty.clone()}
        if self.conv_qkv is not None:
            state.update(self.conv_qkv.init_state(batch_size, device=self.out.weight.device))
        return state

    def state_size(self, seq_len: int | None = None) -> int:
        if seq_len is None:
            raise ValueError("seq_len: softmax attention's state (its KV cache) grows with the context; pass seq_len")
        conv = sum(t.numel() for n, t in self.init_state(1).items() if n.startswith("conv_"))
        return 2 * self.d_model * seq_len + conv

    def mix(self, x, state, cu_seqlens, backend):
        convs = {}
        if self.conv_qkv is None:
            h = dict(zip("qkv", self.qkv(x).chunk(3, dim=-1)))
        else:
            h, convs = self.conv_qkv(x, state or {}, cu_seqlens)
        q, k, v = (split_heads(h[n], self.n_heads) for n in "qkv")  # [B, T, H, d]
        if cu_seqlens is not None:
            if state is not None:
                raise ValueError("state: softmax attention cannot continue packed sequences (cu_seqlens) from a cache")
            o, _ = softmax_attention(q, k, v, cu_seqlens=cu_seqlens)
            return self.out(merge_heads(o)), convs  # no KV cache: sequences of different lengths (see below)
        if state is not None and "k" not in state:
            raise ValueError(
                "state: softmax attention keeps no KV cache after a packed prefill (cu_seqlens); "
                "prefill without cu_seqlens to decode from it"
            )
        if state is None or state["k"].shape[1] == 0:
            o, _ = softmax_attention(q, k, v)
        else:
            k_all = torch.cat([state["k"].to(k.dtype), k], dim=1)
            v_all = torch.cat([state["v"].to(v.dtype), v], dim=1)
            P, T = state["k"].shape[1], q.shape[1]
            # query t sees the whole cache and new keys up to itself
            mask = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k_all.transpose(1, 2), v_all.transpose(1, 2), attn_mask=mask
            ).transpose(1, 2)
            k, v = k_all, v_all
        return self.out(merge_heads(o)), {"k": k, "v": v, **convs}
