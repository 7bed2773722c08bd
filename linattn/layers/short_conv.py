"""Causal depthwise short convolution over time, with a cache for decoding."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn


class ShortConv(nn.Module):
    """`y_t = act(Σ_{i<W} w_i ⊙ x_{t-i} + b)` per channel (depthwise, causal), `x, y: [B, T, D]`.

    The state is the last `W − 1` inputs, `[B, D, W − 1]` (zeros before the first token), so decoding one
    token at a time gives the same result as one pass over the sequence.
    """

    def __init__(self, dim: int, kernel_size: int = 4, *, activation: str | None = "silu", bias: bool = False):
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"kernel_size: expected >= 1, got {kernel_size}")
        if activation not in (None, "silu"):
            raise ValueError(f"activation: expected None or 'silu', got {activation!r}")
        self.dim, self.kernel_size, self.activation = dim, kernel_size, activation
        self.conv = nn.Conv1d(dim, dim, kernel_size, groups=dim, bias=bias)

    def init_state(self, batch_size: int, *, device=None, dtype=None) -> torch.Tensor:
        return torch.zeros(batch_size, self.dim, self.kernel_size - 1, device=device, dtype=dtype)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`x: [B, T, D]`, `state: [B or N, D, W − 1]` -> `(y: [B, T, D], new state)`."""
        if cu_seqlens is None:
            return self._one(x, state)
        bounds = cu_seqlens.tolist()
        outs, states = [], []
        for i, (bos, eos) in enumerate(itertools.pairwise(bounds)):
            y, s = self._one(x[:, bos:eos], None if state is None else state[i : i + 1])
            outs.append(y)
            states.append(s)
        return torch.cat(outs, dim=1), torch.cat(states, dim=0)

    def _one(self, x: torch.Tensor, state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        B, _T, D = x.shape
        W = self.kernel_size
        if state is None:
            state = self.init_state(B, device=x.device, dtype=x.dtype)
        xt = torch.cat([state.to(x.dtype), x.transpose(1, 2)], dim=-1)  # [B, D, W - 1 + T]
        y = F.conv1d(
            xt, self.conv.weight.to(x.dtype), None if self.conv.bias is None else self.conv.bias.to(x.dtype), groups=D
        )  # [B, D, T]
        y = y.transpose(1, 2)
        if self.activation == "silu":
            y = F.silu(y)
        return y, xt[..., xt.shape[-1] - (W - 1) :]


class ConvProjections(nn.Module):
    """Named input projections `x -> SiLU(ShortConv(W_n x))` (or `SiLU(W_n x)` without the conv), as in
    DeltaNet, Gated DeltaNet, KLA and Mamba-2. The state holds one conv cache per projection, `"conv_<name>"`."""

    def __init__(self, d_model: int, dims: dict[str, int], *, short_conv: bool = True, conv_size: int = 4):
        super().__init__()
        self.proj = nn.ModuleDict({n: nn.Linear(d_model, dim, bias=False) for n, dim in dims.items()})
        self.convs = nn.ModuleDict({n: ShortConv(dim, conv_size) for n, dim in dims.items()}) if short_conv else None

    def init_state(self, batch_size: int, *, device=None) -> dict[str, torch.Tensor]:
        if self.convs is None:
            return {}
        return {f"conv_{n}": conv.init_state(batch_size, device=device) for n, conv in self.convs.items()}

    def forward(self, x: torch.Tensor, state: dict, cu_seqlens: torch.Tensor | None):
        """`x: [B, T, d_model]` -> `({name: [B, T, dim]}, {conv caches})`."""
        out, new = {}, {}
        for n, proj in self.proj.items():
            h = proj(x)
            if self.convs is None:
                out[n] = F.silu(h)
            else:
                out[n], new[f"conv_{n}"] = self.convs[n](h, state.get(f"conv_{n}"), cu_seqlens)
        return out, new
