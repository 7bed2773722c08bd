"""Gated DeltaNet (Yang et al. 2025) and KLA (Kaczmarz linear attention), one layer with a switch."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import (
    Mixer,
    RMSNorm,
    State,
    gate_output,
    merge_heads,
    promote,
    repeat_heads,
    split_heads,
)
from linattn.layers.ccq import CurvatureQuery
from linattn.layers.short_conv import ConvProjections
from linattn.ops import delta_rule

KACZMARZ_EPS = 1e-6  # KLA's step η / (‖k‖² + ε), the authors' ε


class MambaDecay(nn.Module):
    """Mamba-2's per-head log-decay `g = −exp(A_log) · softplus(W_a x + dt_bias)` (`≤ 0`), `[B, T, H]`.

    Init as in Mamba-2: `A ~ U(1, 16)` (`A_log = log A`), `dt ~ logU[1e-3, 0.1]` with `dt_bias = softplus⁻¹(dt)`.
    (fla's GDN draws `U(0, 16)`; Mamba-2's own code, `A_init_range = (1, 16)`, is followed here, so no head starts
    with a decay rate near 0: docs/design.md §2.4.)
    `delta(x)` gives `Δ = softplus(W_a x + dt_bias)` alone (Mamba-2 also scales its input by it).
    """

    def __init__(self, d_model: int, n_heads: int, *, dt_min: float = 1e-3, dt_max: float = 0.1):
        super().__init__()
        self.a_proj = nn.Linear(d_model, n_heads, bias=False)
        self.A_log = nn.Parameter(torch.empty(n_heads).uniform_(1, 16).log())
        dt = torch.exp(torch.rand(n_heads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.a_proj(x).float() + self.dt_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -self.A_log.exp() * self.delta(x)


class GatedDeltaNet(Mixer):
    """Gated DeltaNet: `S_t = exp(g_t)(I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`, `o_t = S_tᵀ q_t / √d`;
    output `RMSNorm(o) ⊙ SiLU(W_g x)` per head, then `W_o` (docs/design.md §2.4).

    `q = L2norm(SiLU(conv(W_q x)))`, `v = SiLU(conv(W_v x))`, `η = σ(W_β x + b)`, `g` the Mamba-2 gate, and
      - GDN (`kaczmarz=False`): `k = L2norm(SiLU(conv(W_k x)))`, `β = η`;
      - KLA (`kaczmarz=True`): `k = SiLU(conv(W_k x))` (raw), `β = η / (‖k‖² + 1e-6)`, formed inside the op
        (`delta_rule(..., beta=η, kaczmarz_eps=1e-6)`);
      - GDN with raw keys (`raw_keys=True`): `k = SiLU(conv(W_k x))`, `β = η`: the KLA paper's ablation without
        key normalisation, whose write `I − β k kᵀ` expands the state once `β ‖k‖² > 2`.
    Options: `short_conv`, `conv_size`, `conv_bias` (False), `ccq` (+ `ccq_options`): contract q by the running,
    decayed covariance of the keys before the read; `output_gate=False`: output `RMSNorm(o)` alone, then `W_o` (fla's
    `use_gate=False`; an ablation: in Zoology's MQAR the gate slows GDN's learning, `zoology-mqar` in docs/results.md);
    `norm_eps` (the RMSNorm's, None: the dtype's machine epsilon). Head sizes: `head_dim` (`K`, default
    `d_model // n_heads`), `expand_v` (value dim `V = K · expand_v`, default 1), `num_v_heads` (`HV`, default
    `n_heads`; a multiple of it is GVA: `β`, `g`, the gate and the state are per value head, each query / key head
    serves `HV / H` of them).
    State: `{"S": [B, HV, K, V], "conv_q", "conv_k", "conv_v"[, "ccq"]}`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        kaczmarz: bool = False,
        raw_keys: bool = False,
        short_conv: bool = True,
        conv_size: int = 4,
        conv_bias: bool = False,
        ccq: bool = False,
        ccq_options: dict | None = None,
        output_gate: bool = True,
        norm_eps: float | None = None,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend, precision=precision)
        if kaczmarz and raw_keys:
            raise ValueError("raw_keys: KLA's keys are raw already (its step divides by ‖k‖²); set it for GDN only")
        self.kaczmarz = kaczmarz
        self.raw_keys = raw_keys
        H, K, HV, V = self.head_sizes(num_v_heads, expand_v)
        dims = {"q": H * K, "k": H * K, "v": HV * V}
        self.qkv = ConvProjections(d_model, dims, short_conv=short_conv, conv_size=conv_size, conv_bias=conv_bias)
        self.b_proj = nn.Linear(d_model, HV, bias=True)
        self.decay = MambaDecay(d_model, HV)
        self.g_proj = nn.Linear(d_model, HV * V, bias=False) if output_gate else None
        self.o_norm = RMSNorm(V, eps=norm_eps)
        self.out = nn.Linear(HV * V, d_model, bias=False)
        self.ccq = CurvatureQuery(HV, K, **(ccq_options or {})) if ccq else None

    def init_state(self, batch_size: int) -> State:
        device = self.out.weight.device
        S = self.zeros(batch_size, self.num_v_heads, self.head_dim, self.head_v_dim)
        state = {"S": S, **self.qkv.init_state(batch_size, device=device)}
        if self.ccq is not None:
            state["ccq"] = self.ccq.init_state(batch_size, device=device)
        return state

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        h, new = self.qkv(x, state, cu_seqlens)
        q, k = (split_heads(h[n], self.n_heads) for n in "qk")  # [B, T, H, K]
        v = split_heads(h["v"], self.num_v_heads)  # [B, T, HV, V]
        q = F.normalize(q, dim=-1)
        eta = torch.sigmoid(self.b_proj(x))  # [B, T, HV]
        if not (self.kaczmarz or self.raw_keys):
            k = F.normalize(k, dim=-1)
        groups = self.num_v_heads // self.n_heads
        q, k, v = promote(repeat_heads(q, groups), repeat_heads(k, groups), v)  # q, k: [B, T, HV, K]
        g = self.decay(x)  # [B, T, HV]
        if self.ccq is not None:
            ccq_backend = self.op_backend(backend, x, fused=False)
            q, new["ccq"] = self.ccq(q, k, g, state.get("ccq"), cu_seqlens, ccq_backend, self.precision, output_state)
        o, new["S"] = delta_rule(
            q,
            k,
            v,
            beta=eta,
            g=g,
            kaczmarz_eps=KACZMARZ_EPS if self.kaczmarz else None,
            initial_state=state.get("S"),
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
            precision=self.precision,
        )
        return self.out(merge_heads(gate_output(self.o_norm(o), self.g_proj, x, self.num_v_heads))), new
