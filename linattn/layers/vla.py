"""Variational linear attention layer (docs/design.md §2.3): the least-squares write gate, ELU+1 features."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import (
    Mixer,
    State,
    elu_plus_one,
    merge_heads,
    promote,
    split_heads,
)
from linattn.layers.ccq import CurvatureQuery
from linattn.layers.short_conv import ShortConv
from linattn.ops import linear_attention, vla
from linattn.ops.checks import check_flag
from linattn.ops.linear_attention.api import NORMALIZER_EPS
from linattn.ops.vla.api import check_lam0, check_rho


class VariationalLinearAttention(Mixer):
    """Per head: `q = ELU(W_q x)+1`, `k = ELU(W_k x)+1`, `k̂ = k/‖k‖`, `v = W_v x`,
    `u = normalize(W_u k_raw)/√d` (`k_raw = W_k x`, `W_u` per head, bias-free);
    `A_t = (λ0 I + Σ u uᵀ)⁻¹` (with `rho < 1`: `A_t = M_t⁻¹`, `M_t = ρ M_{t-1} + c e_j e_jᵀ + u uᵀ`, the prior
    re-injected one coordinate `j = t mod d` a token, `vla`'s `refresh`), `α̂_t = A_t k̂_t/‖A_t k̂_t‖`,
    `S_t = (I − α̂_t k̂_tᵀ) S_{t-1} + α̂_t v_tᵀ`;
    read `o_t = S_tᵀ q_t / max(z_tᵀ q_t, 1e-4)` with `z_t = Σ_{s≤t} k_s` (`normalizer="sum"`, the paper's) or
    `S_tᵀ q_t / √d` (`normalizer="none"`); heads merged → LayerNorm → `W_o`.

    Options: `lam0` (0.1), `rho` (1: no forgetting, the paper's), `refresh` (True; False: plain forgetting
    `M_t = ρ M_{t-1} + u uᵀ`, whose `A` winds up along directions `u` stops visiting until the op refuses it),
    `normalizer`, `ccq` (+ `ccq_options`: contract q by the covariance of `k̂`), `norm_eps` (the LayerNorm's,
    1e-5); head sizes `head_dim` (`K`, default `d_model // n_heads`), `expand_v` (`V = K · expand_v`, default 1) and
    `num_v_heads` (GVA, a multiple of `n_heads`: value head `j` reads query / key head `j // G`,
    `G = num_v_heads / n_heads`); `short_conv` (False: the paper's layer has none; with it `W_q x`, `W_k x`, `W_v x`
    each pass a causal depthwise convolution of `conv_size` (4) taps, `conv_bias` (False), before the feature maps,
    as fla's layers convolve theirs); `precision` (`"exact"`, or `"fast"`: `vla`'s). The gate `α̂` depends on the
    keys only, so the `G` value heads of a key head are exactly one head of values `G · V` wide: the op runs
    `n_heads` heads of that width, `A` is formed once per key head, not once per value head.
    State: `{"S": [B, H, K, G·V], "A": [B, H, K, K][, "z": [B, H, K]][, "position": [B] (refreshing: tokens seen)]
    [, "ccq"][, "conv_q", "conv_k", "conv_v"]}`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        lam0: float = 0.1,
        rho: float = 1.0,
        refresh: bool = True,
        normalizer: str = "sum",
        ccq: bool = False,
        ccq_options: dict | None = None,
        norm_eps: float = 1e-5,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        short_conv: bool = False,
        conv_size: int = 4,
        conv_bias: bool = False,
        backend: str = "auto",
        precision: str = "exact",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend, precision=precision)
        if normalizer not in ("sum", "none"):
            raise ValueError(f"normalizer: expected 'sum' or 'none', got {normalizer!r}")
        check_flag("refresh", refresh)
        self.lam0, self.rho, self.normalizer = check_lam0(lam0), check_rho(rho), normalizer
        self.refresh = refresh and self.rho < 1
        H, d, HV, V = self.head_sizes(num_v_heads, expand_v)
        self.q_proj = nn.Linear(d_model, H * d, bias=False)
        self.k_proj = nn.Linear(d_model, H * d, bias=False)
        self.v_proj = nn.Linear(d_model, HV * V, bias=False)
        self.W_u = nn.Parameter(torch.stack([nn.init.orthogonal_(torch.empty(d, d)) for _ in range(n_heads)]))
        self.norm = nn.LayerNorm(HV * V, eps=norm_eps)
        self.out = nn.Linear(HV * V, d_model, bias=False)
        self.ccq = CurvatureQuery(n_heads, d, **(ccq_options or {})) if ccq else None
        self.convs = None
        if short_conv:
            dims = {"q": H * d, "k": H * d, "v": HV * V}
            # linear taps: the feature maps (ELU + 1, u's normalisation) act on the convolved projections
            self.convs = nn.ModuleDict(
                {n: ShortConv(dim, conv_size, activation=None, bias=conv_bias) for n, dim in dims.items()}
            )

    def init_state(self, batch_size: int) -> State:
        H, d = self.n_heads, self.head_dim
        A = (torch.eye(d, device=self.W_u.device) / self.lam0).expand(batch_size, H, d, d).clone()
        state = {"S": self.zeros(batch_size, H, d, self.num_v_heads // H * self.head_v_dim), "A": A}
        if self.normalizer == "sum":
            state["z"] = self.zeros(batch_size, H, d)
        if self.refresh:
            state["position"] = torch.zeros(batch_size, dtype=torch.long, device=self.W_u.device)
        if self.ccq is not None:
            state["ccq"] = self.ccq.init_state(batch_size, device=self.W_u.device)
        for n, conv in (self.convs or {}).items():
            state[f"conv_{n}"] = conv.init_state(batch_size, device=self.W_u.device)
        return state

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        new: State = {}
        H, d = self.n_heads, self.head_dim
        h = {"q": self.q_proj(x), "k": self.k_proj(x), "v": self.v_proj(x)}
        for n, conv in (self.convs or {}).items():
            h[n], new[f"conv_{n}"] = conv(h[n], state.get(f"conv_{n}"), cu_seqlens)
        q = elu_plus_one(split_heads(h["q"], H))  # [B, T, H, d]
        k_raw = split_heads(h["k"], H)
        k = elu_plus_one(k_raw)
        v = split_heads(h["v"], H)  # [B, T, H, G·V]: a key head's value heads side by side
        u = F.normalize(torch.einsum("bthi,hji->bthj", k_raw, self.W_u.to(k_raw.dtype)), dim=-1) / d**0.5
        q, k, v, u = promote(q, k, v, u)
        if self.ccq is not None:
            ccq_backend = self.op_backend(backend, x, fused=False)
            q, new["ccq"] = self.ccq(
                q, F.normalize(k, dim=-1), None, state.get("ccq"), cu_seqlens, ccq_backend, self.precision, output_state
            )
        # decoding on CUDA: the gate's and the state's step kernels (the gate's holds `A` for d ≤ 128)
        backend = self.op_backend(backend, x, fused=d <= 128)
        init = (state["S"], state["A"]) if "S" in state else None
        scale = 1.0 if self.normalizer == "sum" else None
        position = 0
        if self.refresh:  # each sequence's tokens seen: the phase of the prior's refresh
            N = x.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
            position = state.get("position", torch.zeros(N, dtype=torch.long, device=x.device))
            if position.is_floating_point():
                raise TypeError(f"state['position']: expected the integer count of tokens seen (int64), got "
                                f"{position.dtype}: convert a state's floating entries only")  # fmt: skip
            lengths = x.shape[1] if cu_seqlens is None else cu_seqlens.diff().to(position.device)
            new["position"] = position + lengths
        o, SA = vla(
            q,
            k,
            v,
            u,
            lam0=self.lam0,
            rho=self.rho,
            refresh=self.refresh,
            position=position,
            scale=scale,
            initial_state=init,
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=backend,
            max_u_norm=d**-0.5,  # u's norm, so that a training call needs no look at u on the host (`vla_gate`)
            precision=self.precision,
        )
        if output_state:
            new["S"], new["A"] = SA
        if self.normalizer == "sum":
            # z_tᵀ q_t is linear attention with a single value column of ones
            ones = v.new_ones(*v.shape[:3], 1)
            z0 = state["z"][..., None] if "z" in state else None
            den, z = linear_attention(
                q, k, ones, scale=1.0, initial_state=z0, output_final_state=output_state, cu_seqlens=cu_seqlens,
                backend=backend,
            )  # fmt: skip
            if output_state:
                new["z"] = z[..., 0]
            o = o / den.clamp_min(NORMALIZER_EPS)
        return self.out(self.norm(merge_heads(o))), new
