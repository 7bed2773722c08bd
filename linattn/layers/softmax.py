"""Softmax attention layer (the baseline), decoding with a KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, State, merge_heads, split_heads
from linattn.layers.padding import run_unpadded
from linattn.layers.positions import rotary, token_positions
from linattn.layers.short_conv import ConvProjections
from linattn.ops import softmax_attention


class SoftmaxAttention(Mixer):
    """Multi-head causal softmax attention: `y = W_o · merge_h(softmax(q kᵀ / √d) v)`.

    No positional encoding inside unless `rope=True` (the LM adds learned positions, or none). With `rope=True` q and
    k are rotated by their token's position (`rotary`: RoPE, as in Llama and the Transformer++ baselines of fla's
    papers), counted from its sequence's start (each packed sequence's own, a padded row's real tokens only, a
    cache's tokens before), so that a score depends on the distance of its two tokens alone. With `short_conv=True`
    q, k and v go through a causal short convolution + SiLU first, as in DeltaNet / GDN / KLA: every position then
    sees its few predecessors, which is what a two-layer model needs to bind a key to the value after it.
    The state is the KV cache `{"k", "v": [B, T_past, H, d]}` (plus the conv caches); it grows with the context,
    so `state_size(seq_len)` is `2·d_model·seq_len`. With `cu_seqlens` the packed sequences run separately and
    no cache is returned (lengths differ). After a padded call (`attention_mask`) the cache keeps the padded
    positions too, with `"mask": [B, T_past]` (False = padding) so that no later query reads them.
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
        rope: bool = False,
        rope_base: float = 10_000.0,
        backend: str = "auto",
    ):
        super().__init__(d_model, n_heads, backend=backend)
        if rope and self.head_dim % 2:
            raise ValueError(f"rope: rotates pairs of channels, so the head dim must be even, got {self.head_dim}")
        if not rope_base > 1:
            raise ValueError(f"rope_base: expected a number > 1, got {rope_base!r}")
        self.rope, self.rope_base = rope, float(rope_base)
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

    def check_state(self, state: State, batch_size: int) -> None:
        """`Mixer.check_state`, and a padded cache's `"mask": [B, P]` beside its keys `[B, P, H, d]`."""
        if not isinstance(state, dict) or "mask" not in state:
            return super().check_state(state, batch_size)
        rest = {n: v for n, v in state.items() if n != "mask"}
        super().check_state(rest, batch_size)
        mask, P = state["mask"], rest["k"].shape[1] if "k" in rest else None
        if P is None or not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (batch_size, P):
            got = list(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"state['mask']: expected shape [{batch_size}, {P}] (the KV cache's), got {got}")

    def state_size(self, seq_len: int | None = None) -> int:
        if seq_len is None:
            raise ValueError("seq_len: softmax attention's state (its KV cache) grows with the context; pass seq_len")
        conv = sum(t.numel() for n, t in self.init_state(1).items() if n.startswith("conv_"))
        return 2 * self.d_model * seq_len + conv

    def mix(self, x, state, cu_seqlens, backend, output_state):
        convs = {}
        if self.conv_qkv is None:
            h = dict(zip("qkv", self.qkv(x).chunk(3, dim=-1)))
        else:
            h, convs = self.conv_qkv(x, state or {}, cu_seqlens)
        q, k, v = (split_heads(h[n], self.n_heads) for n in "qkv")  # [B, T, H, d]
        if cu_seqlens is not None and state is not None:
            raise ValueError("state: softmax attention cannot continue packed sequences (cu_seqlens) from a cache")
        if cu_seqlens is None and state is not None and "k" not in state:
            raise ValueError(
                "state: softmax attention keeps no KV cache after a packed prefill (cu_seqlens); "
                "prefill without cu_seqlens to decode from it"
            )
        if self.rope:
            q, k = self._rotate(q, k, token_positions(*x.shape[:2], self._past(state), cu_seqlens, None, x.device))
        if cu_seqlens is not None:
            o, _ = softmax_attention(q, k, v, cu_seqlens=cu_seqlens)
            return self.out(merge_heads(o)), convs  # no KV cache: sequences of different lengths (see below)
        if state is None or (state["k"].shape[1] == 0 and "mask" not in state):
            o, _ = softmax_attention(q, k, v)
            return self.out(merge_heads(o)), {"k": k, "v": v, **convs}
        return self._attend_cache(q, k, v, state, None, convs)

    def mix_padded(self, x, state, padding, backend, output_state):
        """Padding stays in the KV cache, marked by the state's `"mask": [B, P]` (False = padding), which no real
        query reads; the short convolutions run on the real tokens alone (`run_unpadded`)."""
        mask, convs = padding.mask, {}
        if self.conv_qkv is None:
            h = dict(zip("qkv", self.qkv(x).chunk(3, dim=-1)))
        else:
            h, convs = run_unpadded(
                lambda xp, s, cu: self.conv_qkv(xp, s or {}, cu),
                x,
                None if state is None else {n: s for n, s in state.items() if n.startswith("conv_")},
                padding,
                lambda b: self.conv_qkv.init_state(b, device=x.device),
            )
        q, k, v = (split_heads(h[n], self.n_heads) for n in "qkv")  # [B, T, H, d]
        state = state or self.init_state(x.shape[0])
        if self.rope:  # a real token's position counts the real tokens before it
            q, k = self._rotate(q, k, token_positions(*x.shape[:2], self._past(state), None, mask, x.device))
        y, new = self._attend_cache(q, k, v, state, mask, convs)
        return y * mask[..., None].to(y.dtype), new

    def _attend_cache(self, q, k, v, state, mask, convs):
        """Queries `[B, T, H, d]` over the cached keys and the new ones up to each; `mask: [B, T]` bool or None
        (all real). With padding in the cache or in `mask`, a query reads the real keys and itself (so that a padded
        query's softmax is never empty), and the new state carries the keys' `"mask"`."""
        B, T, P = q.shape[0], q.shape[1], state["k"].shape[1]
        allowed = causal = torch.ones(T, P + T, dtype=torch.bool, device=q.device).tril(P)  # [T, P + T]
        new = {}
        if mask is not None or "mask" in state:
            past = state.get("mask", torch.ones(B, P, dtype=torch.bool, device=q.device))
            new["mask"] = torch.cat(
                [past, torch.ones(B, T, dtype=torch.bool, device=q.device) if mask is None else mask], 1
            )
            itself = causal & ~causal.tril(P - 1)  # key P + t for query t
            allowed = ((causal & new["mask"][:, None, :]) | itself)[:, None]  # [B, 1, T, P + T]
        k_all = torch.cat([state["k"].to(k.dtype), k], dim=1)
        v_all = torch.cat([state["v"].to(v.dtype), v], dim=1)
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), k_all.transpose(1, 2), v_all.transpose(1, 2), attn_mask=allowed
        ).transpose(1, 2)
        return self.out(merge_heads(o)), {"k": k_all, "v": v_all, **new, **convs}

    def _past(self, state: State | None) -> torch.Tensor | None:
        """How many real tokens the cache holds, `[B]` (None without a cache)."""
        if state is None:
            return None
        if "mask" in state:
            return state["mask"].sum(1)
        k = state["k"]
        return torch.full(k.shape[:1], k.shape[1], dtype=torch.long, device=k.device)

    def _rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
        """`rotary` on q and k `[B, T, H, d]` at `positions: [B or 1, T]`."""
        return rotary(q, positions, self.rope_base), rotary(k, positions, self.rope_base)
