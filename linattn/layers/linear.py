"""Linear attention layer (the VLA paper's baseline): ELU+1 features, optional sum normaliser, optional CCQ."""

from __future__ import annotations

from torch import nn

from linattn.layers.base import (
    Mixer,
    State,
    elu_plus_one,
    merge_heads,
    promote,
    repeat_heads,
    split_heads,
)
from linattn.layers.ccq import CurvatureQuery
from linattn.ops import linear_attention


class LinearAttention(Mixer):
    """`S_t = S_{t-1} + φ(k_t) v_tᵀ`, `o_t = S_tᵀ φ(q_t) / max(z_tᵀ φ(q_t), ε)` (`normalize=True`) with φ = ELU+1;
    heads merged → LayerNorm → `W_o`.

    Options: `normalize` (the sum normaliser, default True), `ccq` (contract φ(q) by the running covariance of
    φ(k) before the read), `ccq_options` (kwargs of `CurvatureQuery`), `norm_eps` (the LayerNorm's, 1e-5); head sizes
    `head_dim`, `expand_v`, `num_v_heads` as in `GatedDeltaNet`.
    State: `{"S": [B, HV, K, V], "z": [B, HV, K]` (with `normalize`)`, "ccq": (C, m, Z)` (with `ccq`)`}`.
    With `normalize`, `precision="fast"` runs the exact level (`linear_attention`'s README says why).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        normalize: bool = True,
        ccq: bool = False,
        ccq_options: dict | None = None,
        norm_eps: float = 1e-5,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend, precision=precision)
        self.normalize = normalize
        H, K, HV, V = self.head_sizes(num_v_heads, expand_v)
        self.q_proj = nn.Linear(d_model, H * K, bias=False)
        self.k_proj = nn.Linear(d_model, H * K, bias=False)
        self.v_proj = nn.Linear(d_model, HV * V, bias=False)
        self.norm = nn.LayerNorm(HV * V, eps=norm_eps)
        self.out = nn.Linear(HV * V, d_model, bias=False)
        self.ccq = CurvatureQuery(HV, K, **(ccq_options or {})) if ccq else None

    def init_state(self, batch_size: int) -> State:
        HV, K = self.num_v_heads, self.head_dim
        state = {"S": self.zeros(batch_size, HV, K, self.head_v_dim)}
        if self.normalize:
            state["z"] = self.zeros(batch_size, HV, K)
        if self.ccq is not None:
            state["ccq"] = self.ccq.init_state(batch_size, device=self.out.weight.device)
        return state

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        groups = self.num_v_heads // self.n_heads
        q = repeat_heads(elu_plus_one(split_heads(self.q_proj(x), self.n_heads)), groups)  # [B, T, HV, K]
        k = repeat_heads(elu_plus_one(split_heads(self.k_proj(x), self.n_heads)), groups)
        v = split_heads(self.v_proj(x), self.num_v_heads)
        q, k, v = promote(q, k, v)
        new: State = {}
        if self.ccq is not None:
            ccq_backend = self.op_backend(backend, x, fused=False)
            q, new["ccq"] = self.ccq(
                q, k, None, state.get("ccq"), cu_seqlens, ccq_backend, self.precision, output_state
            )
        backend = self.op_backend(backend, x, fused=True)
        if self.normalize:
            init = (state["S"], state["z"]) if "S" in state else None
            o, S = linear_attention(
                q,
                k,
                v,
                normalize=True,
                initial_state=init,
                output_final_state=output_state,
                cu_seqlens=cu_seqlens,
                backend=backend,
                precision=self.precision,
            )
            if output_state:
                new["S"], new["z"] = S
        else:
            o, new["S"] = linear_attention(
                q,
                k,
                v,
                initial_state=state.get("S"),
                output_final_state=output_state,
                cu_seqlens=cu_seqlens,
                backend=backend,
                precision=self.precision,
            )
        return self.out(self.norm(merge_heads(o))), new
