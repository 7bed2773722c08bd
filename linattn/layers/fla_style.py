"""Layers as flash-linear-attention (fla) users write them: `GatedDeltaNet(hidden_size=1024, num_heads=4, ...)`.

Each class configures one of this package's mixers (the one `build_layer` names, kept as `layer.mixer`) with fla's
argument names and defaults, and answers fla's layer call:

    o, _, past_key_values = layer(hidden_states, attention_mask=None, past_key_values=None, use_cache=False)

The math is the mixer's (docs/design.md §2; for GDN, DeltaNet and GLA the same recurrence, gates and norms as
fla's layers); parameter names and initialisation are this package's, so an fla checkpoint does not load as is.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from linattn.layers.base import DECODE, Mixer
from linattn.layers.deltanet import DeltaNet as DeltaNetMixer
from linattn.layers.gated_deltanet import GatedDeltaNet as GatedDeltaNetMixer
from linattn.layers.gla import GatedLinearAttention
from linattn.layers.linear import LinearAttention as LinearAttentionMixer
from linattn.layers.mamba2 import Mamba2 as Mamba2Mixer
from linattn.layers.vla import VariationalLinearAttention

MODES = ("chunk", "fused_recurrent")


class FlaLayer(nn.Module):
    """fla's layer call around a mixer (`self.mixer`).

    `forward(hidden_states, attention_mask=None, past_key_values=None, use_cache=False, **kwargs)` with
    `hidden_states: [B, T, hidden_size]` returns `(o: [B, T, hidden_size], None, past_key_values)`:
      - `attention_mask: [B, T]`, 1 for a token, 0 for padding: the rows are unpadded into packed sequences, so
        padding neither writes to nor reads from a state. A longer mask (HF's while generating: the past tokens'
        and the new ones') is read at its last `T` columns, as fla's layers read it.
      - `past_key_values`: any object with `get_layer_state(layer_idx)` (None before this layer's first call) and
        `set_layer_state(layer_idx, state)`, e.g. `linattn.models.cache.LinAttnCache` (the HF model's): the layer
        continues from its state there and stores the new one (the layer then needs its `layer_idx`).
      - `use_cache` with a one-token input: the decode path (`Mixer.step`'s: the fused recurrent kernel on CUDA
        without autograd, the token loop elsewhere).
      - `cu_seqlens` (keyword): packed sequences in one row (`B == 1`), as in fla.
      - `output_attentions=True` is refused (there are no attention weights); other keywords that fla's and HF's
        blocks pass along (e.g. `position_ids`) are accepted and unused, as fla's layers do.
    `mode`: `"chunk"` (the chunked forms, with `backend` choosing the ops' implementation) or `"fused_recurrent"`
    (the token-by-token recurrence for every call, as decoding runs it).
    """

    def __init__(self, mixer: Mixer, *, layer_idx: int | None, mode: str):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
        if layer_idx is not None and (not isinstance(layer_idx, int) or isinstance(layer_idx, bool) or layer_idx < 0):
            raise ValueError(f"layer_idx: expected None or an int >= 0, got {layer_idx!r}")
        self.mixer = mixer
        self.hidden_size, self.num_heads = mixer.d_model, mixer.n_heads
        self.layer_idx, self.mode = layer_idx, mode

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        use_cache: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, None, object]:
        if kwargs.get("output_attentions"):
            raise ValueError("output_attentions: a linear-attention layer has no attention weights to return")
        x = hidden_states
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.hidden_size:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"hidden_states: expected shape [B, T, hidden_size={self.hidden_size}], got {got}")
        state = None
        if past_key_values is not None:
            if self.layer_idx is None:
                raise ValueError(
                    f"layer_idx: {type(self).__name__} reads and writes its state in past_key_values by its index; "
                    "build it with layer_idx=…"
                )
            state = past_key_values.get_layer_state(self.layer_idx)
        decode = self.mode == "fused_recurrent" or (use_cache and x.shape[1] == 1)
        mask = {}
        if attention_mask is not None:
            long = (
                isinstance(attention_mask, torch.Tensor)
                and attention_mask.dim() == 2
                and attention_mask.shape[1] > x.shape[1]
            )
            mask["attention_mask"] = attention_mask[:, -x.shape[1] :] if long else attention_mask
        # no cache to write: no state formed (the training call's case)
        keep = past_key_values is not None
        backend = DECODE if decode else None
        o, state = self.mixer(x, state, kwargs.get("cu_seqlens"), backend=backend, output_state=keep, **mask)
        if past_key_values is not None:
            past_key_values.set_layer_state(self.layer_idx, state)
        return o, None, past_key_values


def _positive_int(name: str, x: object) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x <= 0:
        raise ValueError(f"{name}: expected a positive int, got {x!r}")
    return x


def _per_head(name: str, hidden_size: int, num_heads: int, expand: object) -> int:
    """`hidden_size · expand / num_heads`, fla's head size for DeltaNet, GLA and linear attention."""
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand < math.inf:
        raise ValueError(f"{name}: expected a finite number > 0, got {expand!r}")
    dim = hidden_size * expand / num_heads
    if not math.isclose(dim, round(dim), rel_tol=1e-6) or round(dim) == 0:
        raise ValueError(
            f"{name}: hidden_size · {name} = {hidden_size * expand:g} must be a positive multiple of "
            f"num_heads = {num_heads}"
        )
    return round(dim)


def _head_sizes(
    hidden_size: object,
    num_heads: object,
    head_dim: int | None,
    expand_v: float,
    *,
    expand_k: float | None = None,
    default_k: float | None = None,
) -> tuple[int, int, int, float]:
    """`(hidden_size, num_heads, K, V / K)` for the mixer, from a layer's sizing arguments. With `head_dim` given (fla's
    GatedDeltaNet's way), `K = head_dim` and `V = head_dim · expand_v`. Otherwise fla's DeltaNet, GLA and linear
    attention (those with a `default_k`) size their heads by fractions of the width, `K = hidden_size · expand_k /
    num_heads`, `V = hidden_size · expand_v / num_heads`; the rest split the width, `K = hidden_size / num_heads`."""
    hidden_size, num_heads = _positive_int("hidden_size", hidden_size), _positive_int("num_heads", num_heads)
    if head_dim is not None:
        if expand_k is not None:
            raise ValueError(f"expand_k: give head_dim or expand_k, not both (got {head_dim}, {expand_k})")
        return hidden_size, num_heads, head_dim, expand_v
    if default_k is None:
        if hidden_size % num_heads:
            raise ValueError(f"num_heads: expected a divisor of hidden_size = {hidden_size}, got {num_heads}")
        return hidden_size, num_heads, hidden_size // num_heads, expand_v
    K = _per_head("expand_k", hidden_size, num_heads, default_k if expand_k is None else expand_k)
    return hidden_size, num_heads, K, _per_head("expand_v", hidden_size, num_heads, expand_v) / K


class GatedDeltaNet(FlaLayer):
    """Gated DeltaNet with fla's `GatedDeltaNet` arguments and defaults; the mixer is `build_layer`'s
    `"gated_deltanet"`: `S_t = exp(g_t)(I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`, output
    `W_o (RMSNorm(o) ⊙ SiLU(W_g x))`.

    Args:
        hidden_size: the model width (2048).
        expand_v: a value head's dim is `head_dim · expand_v` (2).
        head_dim: a query / key head's dim (256).
        num_heads: query / key heads (6).
        num_v_heads: value heads, None (`num_heads`) or a multiple of `num_heads`: GVA, each query / key head
            serves `num_v_heads / num_heads` value heads; `β`, the decay and the state `[B, num_v_heads, K, V]` are
            per value head.
        mode: `"chunk"` or `"fused_recurrent"` (`FlaLayer`).
        use_gate: the output gate `SiLU(W_g x)` (True).
        use_short_conv, conv_size, conv_bias: the causal depthwise convolution of q, k, v (True, 4, False).
        layer_idx: this layer's index in `past_key_values` (None).
        norm_eps: the output RMSNorm's ε (1e-5).
        backend: the ops' backend (this package's): `"auto"` (Triton on CUDA, the chunked PyTorch form elsewhere),
            `"chunk"`, `"naive"` or `"triton"`.
        precision: `"exact"` (default) or `"fast"` (bfloat16 intermediates in the Triton kernels, docs/design.md §4).

    Example:
        >>> layer = GatedDeltaNet(hidden_size=64, num_heads=2, head_dim=16, expand_v=2, num_v_heads=4)
        >>> o, _, _ = layer(torch.randn(2, 10, 64))   # o: [2, 10, 64]
    """

    kaczmarz = False

    def __init__(
        self,
        hidden_size: int = 2048,
        *,
        expand_v: float = 2,
        head_dim: int = 256,
        num_heads: int = 6,
        num_v_heads: int | None = None,
        mode: str = "chunk",
        use_gate: bool = True,
        use_short_conv: bool = True,
        conv_size: int = 4,
        conv_bias: bool = False,
        layer_idx: int | None = None,
        norm_eps: float = 1e-5,
        backend: str = "auto",
        precision: str = "exact",
    ):
        hidden_size, num_heads, K, expand = _head_sizes(hidden_size, num_heads, head_dim, expand_v)
        mixer = GatedDeltaNetMixer(
            hidden_size,
            num_heads,
            kaczmarz=self.kaczmarz,
            head_dim=K,
            expand_v=expand,
            num_v_heads=num_v_heads,
            output_gate=use_gate,
            short_conv=use_short_conv,
            conv_size=conv_size,
            conv_bias=conv_bias,
            norm_eps=norm_eps,
            backend=backend,
            precision=precision,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)


class KLA(GatedDeltaNet):
    """KLA (Kaczmarz linear attention): Gated DeltaNet on raw keys with the step `β = η / (‖k‖² + 1e-6)`,
    `η = σ(W_β x)`; the mixer is `build_layer`'s `"kla"`. The arguments and defaults are `GatedDeltaNet`'s (GVA
    included).

    Example:
        >>> layer = KLA(hidden_size=64, num_heads=2, head_dim=16, expand_v=1, use_gate=False)
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    kaczmarz = True


class DeltaNet(FlaLayer):
    """DeltaNet with fla's `DeltaNet` arguments and defaults; the mixer is `build_layer`'s `"deltanet"`:
    `S_t = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`, output `W_o RMSNorm(o)` (`⊙ SiLU(W_g x)` with `use_gate`).

    Args:
        hidden_size: the model width (1024).
        expand_k, expand_v: fla's head sizes, `K = hidden_size · expand_k / num_heads` (expand_k None: 1) and
            `V = hidden_size · expand_v / num_heads` (1).
        head_dim: instead of `expand_k`, `K = head_dim` and then `V = head_dim · expand_v` (as `GatedDeltaNet`).
        num_heads: query / key heads (4).
        num_v_heads: value heads, None (`num_heads`) or a multiple of it (GVA, as `GatedDeltaNet`; not in fla's
            DeltaNet).
        use_gate: the output gate (False).
        use_short_conv, conv_size, conv_bias: as `GatedDeltaNet` (True, 4, False).
        mode, layer_idx, norm_eps (1e-5), backend, precision: as `GatedDeltaNet`.

    Example:
        >>> layer = DeltaNet(hidden_size=64, num_heads=4)   # K = V = 16
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    def __init__(
        self,
        hidden_size: int = 1024,
        *,
        expand_k: float | None = None,
        expand_v: float = 1.0,
        head_dim: int | None = None,
        num_heads: int = 4,
        num_v_heads: int | None = None,
        mode: str = "chunk",
        use_gate: bool = False,
        use_short_conv: bool = True,
        conv_size: int = 4,
        conv_bias: bool = False,
        layer_idx: int | None = None,
        norm_eps: float = 1e-5,
        backend: str = "auto",
        precision: str = "exact",
    ):
        hidden_size, num_heads, K, expand = _head_sizes(
            hidden_size, num_heads, head_dim, expand_v, expand_k=expand_k, default_k=1.0
        )
        mixer = DeltaNetMixer(
            hidden_size,
            num_heads,
            head_dim=K,
            expand_v=expand,
            num_v_heads=num_v_heads,
            output_gate=use_gate,
            short_conv=use_short_conv,
            conv_size=conv_size,
            conv_bias=conv_bias,
            norm_eps=norm_eps,
            backend=backend,
            precision=precision,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)


class GLA(FlaLayer):
    """Gated linear attention with fla's `GatedLinearAttention` arguments and defaults; the mixer is `build_layer`'s
    `"gla"`: `S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ` with `g = logsigmoid(W_2 W_1 x + b) / gate_logit_normalizer`
    per key channel, output `W_o (RMSNorm(o) ⊙ SiLU(W_g x))`.

    Args:
        hidden_size: the model width (1024).
        expand_k, expand_v, head_dim: head sizes as `DeltaNet` (expand_k None: 0.5; expand_v 1).
        num_heads: query / key heads (4).
        num_v_heads: value heads, None (`num_heads`) or a multiple of it (GVA; the decay is per value head). fla's
            `num_kv_heads` (fewer key / value heads than query heads) is not offered.
        use_short_conv, conv_size, conv_bias: as `GatedDeltaNet` (False, 4, False).
        use_output_gate: the output gate (True).
        gate_logit_normalizer, gate_low_rank_dim: the decay's divisor and the rank of `W_2 W_1` (16, 16).
        mode, layer_idx, norm_eps (1e-5), backend: as `GatedDeltaNet`.

    Example:
        >>> layer = GLA(hidden_size=64, num_heads=4, expand_k=0.5)   # K = 8, V = 16
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    def __init__(
        self,
        hidden_size: int = 1024,
        *,
        expand_k: float | None = None,
        expand_v: float = 1.0,
        head_dim: int | None = None,
        num_heads: int = 4,
        num_v_heads: int | None = None,
        mode: str = "chunk",
        use_short_conv: bool = False,
        conv_size: int = 4,
        conv_bias: bool = False,
        use_output_gate: bool = True,
        norm_eps: float = 1e-5,
        gate_logit_normalizer: float = 16,
        gate_low_rank_dim: int = 16,
        layer_idx: int | None = None,
        backend: str = "auto",
    ):
        hidden_size, num_heads, K, expand = _head_sizes(
            hidden_size, num_heads, head_dim, expand_v, expand_k=expand_k, default_k=0.5
        )
        mixer = GatedLinearAttention(
            hidden_size,
            num_heads,
            head_dim=K,
            expand_v=expand,
            num_v_heads=num_v_heads,
            gate_rank=_positive_int("gate_low_rank_dim", gate_low_rank_dim),
            gate_normalizer=gate_logit_normalizer,
            short_conv=use_short_conv,
            conv_size=conv_size,
            conv_bias=conv_bias,
            output_gate=use_output_gate,
            norm_eps=norm_eps,
            backend=backend,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)


class LinearAttention(FlaLayer):
    """Linear attention with fla's `LinearAttention` sizing arguments; the mixer is `build_layer`'s `"linear"`:
    `S_t = S_{t-1} + φ(k_t) v_tᵀ`, `o_t = S_tᵀ φ(q_t) / max(z_tᵀ φ(q_t), 1e-4)` with `φ = ELU + 1` and
    `z_t = Σ φ(k_s)`, heads merged, LayerNorm, `W_o` (the VLA paper's baseline; fla's feature maps and its
    per-head RMSNorm are not offered).

    Args:
        hidden_size: the model width (1024).
        expand_k, expand_v, head_dim: head sizes as `DeltaNet` (expand_k None: 1; expand_v 1).
        num_heads: query / key heads (8).
        num_v_heads: value heads, None (`num_heads`) or a multiple of it (GVA).
        normalize: the sum normaliser `z_tᵀ φ(q_t)` (True; this package's option).
        mode, layer_idx, norm_eps (the LayerNorm's, 1e-5), backend, precision: as `GatedDeltaNet`.

    Example:
        >>> layer = LinearAttention(hidden_size=64, num_heads=4)
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    def __init__(
        self,
        hidden_size: int = 1024,
        *,
        expand_k: float | None = None,
        expand_v: float = 1.0,
        head_dim: int | None = None,
        num_heads: int = 8,
        num_v_heads: int | None = None,
        normalize: bool = True,
        mode: str = "chunk",
        norm_eps: float = 1e-5,
        layer_idx: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        hidden_size, num_heads, K, expand = _head_sizes(
            hidden_size, num_heads, head_dim, expand_v, expand_k=expand_k, default_k=1.0
        )
        mixer = LinearAttentionMixer(
            hidden_size,
            num_heads,
            head_dim=K,
            expand_v=expand,
            num_v_heads=num_v_heads,
            normalize=normalize,
            norm_eps=norm_eps,
            backend=backend,
            precision=precision,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)


class VLA(FlaLayer):
    """Variational linear attention in the same style (fla has no VLA layer); the mixer is `build_layer`'s `"vla"`
    (docs/design.md §2.3): the least-squares write direction `α̂_t = A_t k̂_t / ‖A_t k̂_t‖`,
    `S_t = (I − α̂_t k̂_tᵀ) S_{t-1} + α̂_t v_tᵀ`, the sum-normalised read, heads merged, LayerNorm, `W_o`.

    Args:
        hidden_size: the model width (1024).
        num_heads: heads (4).
        head_dim: a query / key head's dim, None: `hidden_size / num_heads`.
        expand_v: a value head's dim is `head_dim · expand_v` (1).
        num_v_heads: value heads, None (`num_heads`) or a multiple of it (GVA). A key head's value heads share its
            gate (which reads keys only), so the mixer runs them as one head `num_v_heads / num_heads` times as wide:
            `A_t` is formed once per key head; the state `S` is `[B, num_heads, head_dim, V · num_v_heads / num_heads]`.
        use_short_conv, conv_size, conv_bias: a causal depthwise convolution of the q, k, v projections before the
            feature maps (False: the paper's layer has none; 4, False).
        lam0, rho: the ridge `λ0` (0.1) and the forgetting factor `ρ` (1: none).
        normalizer: `"sum"` (the paper's read) or `"none"` (`S_tᵀ q_t / √K`).
        mode, layer_idx, norm_eps (the LayerNorm's, 1e-5), backend: as `GatedDeltaNet`.

    Example:
        >>> layer = VLA(hidden_size=64, num_heads=4, expand_v=2, num_v_heads=8)
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    def __init__(
        self,
        hidden_size: int = 1024,
        *,
        num_heads: int = 4,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        use_short_conv: bool = False,
        conv_size: int = 4,
        conv_bias: bool = False,
        lam0: float = 0.1,
        rho: float = 1.0,
        normalizer: str = "sum",
        mode: str = "chunk",
        norm_eps: float = 1e-5,
        layer_idx: int | None = None,
        backend: str = "auto",
    ):
        hidden_size, num_heads, K, expand = _head_sizes(hidden_size, num_heads, head_dim, expand_v)
        mixer = VariationalLinearAttention(
            hidden_size,
            num_heads,
            head_dim=K,
            expand_v=expand,
            num_v_heads=num_v_heads,
            short_conv=use_short_conv,
            conv_size=conv_size,
            conv_bias=conv_bias,
            lam0=lam0,
            rho=rho,
            normalizer=normalizer,
            norm_eps=norm_eps,
            backend=backend,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)


class Mamba2(FlaLayer):
    """Mamba-2 in this package's scalar-decay form, with the sizing arguments of fla's (and HF's) `Mamba2`; the mixer
    is `build_layer`'s `"mamba2"`: per head `h_t = exp(Δ_t A) h_{t-1} + (Δ_t B_t) x_tᵀ`, `y_t = h_tᵀ C_t + D x_t`,
    output `W_o RMSNorm(y ⊙ SiLU(z))`, the linear-attention op with `q = C`, `k = Δ B`, `v = x`.

    Args:
        hidden_size: the model width (2048).
        num_heads: heads, None: `expand · hidden_size / head_dim` (given, it must equal that).
        head_dim: a head's dim `P` (64).
        state_size: `N`, the dim of `B` and `C` (128).
        expand: the inner width `expand · hidden_size = num_heads · head_dim` (2).
        n_groups: groups of heads sharing one `B, C` (1; a divisor of `num_heads`).
        conv_kernel, use_conv_bias: the causal depthwise convolution of `x, B, C` (4, True).
        mode, layer_idx, norm_eps (1e-5), backend, precision: as `GatedDeltaNet`.
    Its call is the others' `(o, None, past_key_values)`, not HF's `Mamba2Mixer` one (`cache_params`).

    Example:
        >>> layer = Mamba2(hidden_size=64, head_dim=16, state_size=8)   # 8 heads: 2 · 64 / 16
        >>> o, _, _ = layer(torch.randn(2, 10, 64))
    """

    def __init__(
        self,
        hidden_size: int = 2048,
        *,
        num_heads: int | None = None,
        head_dim: int = 64,
        state_size: int = 128,
        expand: float = 2,
        n_groups: int = 1,
        conv_kernel: int = 4,
        use_conv_bias: bool = True,
        mode: str = "chunk",
        norm_eps: float = 1e-5,
        layer_idx: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        hidden_size, head_dim = _positive_int("hidden_size", hidden_size), _positive_int("head_dim", head_dim)
        if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand < math.inf:
            raise ValueError(f"expand: expected a finite number > 0, got {expand!r}")
        heads = hidden_size * expand / head_dim
        if not math.isclose(heads, round(heads), rel_tol=1e-6) or round(heads) == 0:
            raise ValueError(
                f"head_dim: expected a divisor of expand · hidden_size = {hidden_size * expand:g}, got {head_dim}"
            )
        heads = round(heads)
        if num_heads is not None and num_heads != heads:
            raise ValueError(
                f"num_heads: expected None or expand · hidden_size / head_dim = {heads}, got {num_heads!r}"
            )
        mixer = Mamba2Mixer(
            hidden_size,
            heads,
            head_dim=head_dim,
            d_state=_positive_int("state_size", state_size),
            n_groups=n_groups,
            conv_size=conv_kernel,
            conv_bias=use_conv_bias,
            norm_eps=norm_eps,
            backend=backend,
            precision=precision,
        )
        super().__init__(mixer, layer_idx=layer_idx, mode=mode)
