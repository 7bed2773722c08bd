"""The CCQ read: contract each head's query by the running key covariance before the base op reads."""

from __future__ import annotations

import torch
from torch import nn

from linattn.layers.base import promote
from linattn.ops import ccq_query


class CurvatureQuery(nn.Module):
    """`q'_t = (I − λ_t Σ_t) q_t` with `λ_t = σ(w_λᵀ q_t + b_λ)` per head (docs/design.md §2.5).

    `Σ_t` is the running covariance of the base op's keys, decayed with the base op's scalar decay when it
    has one. `w_λ` starts at 0 and `b_λ` at `lam_bias` (σ(0) = 0.5: a half contraction at init).
    State: `(C: [B, H, d, d], m: [B, H, d], Z: [B, H])`.
    """

    def __init__(
        self, n_heads: int, head_dim: int, *, centered: bool = True, normalize_keys: bool = True, lam_bias: float = 0.0
    ):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, head_dim
        self.centered, self.normalize_keys = centered, normalize_keys
        self.w_lam = nn.Parameter(torch.zeros(n_heads, head_dim))
        self.b_lam = nn.Parameter(torch.full((n_heads,), float(lam_bias)))

    def init_state(self, batch_size: int, *, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        H, d = self.n_heads, self.head_dim
        zeros = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        return zeros(batch_size, H, d, d), zeros(batch_size, H, d), zeros(batch_size, H)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        g: torch.Tensor | None,
        state,
        cu_seqlens,
        backend: str,
        precision: str,
        output_state: bool,
    ):
        """`q, k: [B, T, H, d]`, `g: [B, T, H]` or None -> `(q': [B, T, H, d], state)`; `precision`: the base
        layer's (`ccq_query`'s); `output_state` False: no state formed (None), as the layer's `forward` takes it."""
        q, k = promote(q, k)
        lam = torch.sigmoid((q * self.w_lam.to(q.dtype)).sum(-1) + self.b_lam.to(q.dtype))  # [B, T, H]
        return ccq_query(
            q,
            k,
            lam,
            g=g,
            centered=self.centered,
            normalize_keys=self.normalize_keys,
            initial_state=state,
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=backend,
            precision=precision,
        )
