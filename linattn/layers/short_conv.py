"""Causal depthwise short convolution over time, with a cache for decoding."""

from __future__ import annotations

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
            raise ValueError(f"conv_size (the short convolution's kernel_size): expected >= 1, got {kernel_size}")
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
        if x.shape[0] != 1:
            raise ValueError(f"x: expected one packed row [1, T, D] with cu_seqlens, got {list(x.shape)}")
        return self._packed(x, state, cu_seqlens)

    def _packed(
        self, x: torch.Tensor, state: torch.Tensor | None, cu_seqlens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The `N` sequences of a packed row in one convolution: each sequence's `W − 1` cached inputs (zeros without
        a state) go in front of it, `[c_0, x_0, c_1, x_1, …]` (`T + N (W − 1)` places), so that no window reaches
        into the sequence before; the outputs are read at the tokens' places, the new states at each sequence's last
        `W − 1` places."""
        _, T, D = x.shape
        W1 = self.kernel_size - 1
        cu = cu_seqlens.to(x.device)
        N = cu.numel() - 1
        if state is None:
            state = self.init_state(N, device=x.device, dtype=x.dtype)
        seq = torch.searchsorted(cu, torch.arange(T, device=x.device), right=True) - 1  # [T] each token's sequence
        at = torch.arange(T, device=x.device) + (seq + 1) * W1  # [T] each token's place
        slots = torch.arange(W1, device=x.device)
        first = (cu[:-1] + torch.arange(N, device=x.device) * W1)[:, None] + slots  # [N, W − 1] the cached inputs
        last = (cu[1:] + torch.arange(1, N + 1, device=x.device) * W1)[:, None] - W1 + slots  # [N, W − 1]
        xt = x.new_zeros(D, T + N * W1)
        xt = xt.index_copy(1, at, x[0].T).index_copy(1, first.flatten(), state.to(x.dtype).transpose(0, 1).flatten(1))
        bias = None if self.conv.bias is None else self.conv.bias.to(x.dtype)
        y = F.conv1d(xt[None], self.conv.weight.to(x.dtype), bias, groups=D)[0]  # [D, T + (N − 1)(W − 1)]
        y = y[:, at - W1].T[None]  # [1, T, D]
        if self.activation == "silu":
            y = F.silu(y)
        return y, xt[:, last.flatten()].unflatten(1, (N, W1)).transpose(0, 1)  # [N, D, W − 1]

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
    DeltaNet, Gated DeltaNet, KLA and Mamba-2. The state holds one conv cache per projection, `"conv_<name>"`.
    `conv_bias` gives each convolution a bias (default False)."""

    def __init__(
        self,
        d_model: int,
        dims: dict[str, int],
        *,
        short_conv: bool = True,
        conv_size: int = 4,
        conv_bias: bool = False,
    ):
        super().__init__()
        self.proj = nn.ModuleDict({n: nn.Linear(d_model, dim, bias=False) for n, dim in dims.items()})
        self.convs = None
        if short_conv:
            self.convs = nn.ModuleDict({n: ShortConv(dim, conv_size, bias=conv_bias) for n, dim in dims.items()})

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
