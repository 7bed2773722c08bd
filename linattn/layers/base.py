"""The interface every sequence mixer implements, and the head reshapes they share.

A mixer maps `x: [B, T, d_model]` to `y: [B, T, d_model]` and carries a recurrent state between calls:

    y, state = mixer(x, state=None, cu_seqlens=None)     # prefill (chunk backend)
    y, _ = mixer(x, cu_seqlens=cu, output_state=False)   # training: no final state formed
    y, state = mixer(x, state, attention_mask=mask)      # a padded batch, mask: [B, T] (1 = real token)
    y_t, state = mixer.step(x_t, state)                  # decoding one token, x_t: [B, d_model]

A state is a dict of tensors (or tuples of tensors) whose first dim is the sequence (`B`, or `N` packed
sequences with `cu_seqlens`). `step` runs the same code as `forward` on one token with the token-by-token
backend, so a full forward equals a prefill followed by steps. Padding (`attention_mask`) runs the real tokens as
one packed row (`linattn.layers.padding`): a padded position changes no state and no real token's output.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import nn

from linattn.layers.padding import Unpadded, check_padding, run_unpadded
from linattn.ops.checks import BACKENDS, check_cu_seqlens, check_flag, check_precision

State = dict[str, Any]

DECODE = "decode"  # the layer-level backend of `step`; each op call turns it into its decode path (`op_backend`)


class Mixer(nn.Module):
    """Base class: subclasses implement `mix(x, state, cu_seqlens, backend)` and `init_state(batch_size)`."""

    d_model: int
    n_heads: int
    # decoding: None = the fused recurrent kernel on CUDA for ops that have one, the token loop elsewhere;
    # "fused_recurrent" or "naive" forces one (e.g. to test the kernel in Triton's interpreter)
    decode_backend: str | None = None

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        head_dim: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        """`head_dim`: the (key) dim of a head; None (the default) means `d_model // n_heads`, and then `n_heads`
        must divide `d_model`. `precision`: `"exact"` or `"fast"`, passed to the ops that take it (`delta_rule`,
        `linear_attention`, `gated_linear_attention` with a scalar decay, `vla`, and `ccq_query` for their CCQ read
        with `ccq=True`: docs/design.md §4); a mixer whose ops have no fast level (softmax, GLA's per-channel decay)
        takes no such argument, and its CCQ read stays exact."""
        super().__init__()
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"d_model: expected a positive int, got {d_model!r}")
        if head_dim is None:
            if not isinstance(n_heads, int) or n_heads <= 0 or d_model % n_heads:
                raise ValueError(f"n_heads: expected a positive divisor of d_model = {d_model}, got {n_heads!r}")
            head_dim = d_model // n_heads
        elif not isinstance(n_heads, int) or isinstance(n_heads, bool) or n_heads <= 0:
            raise ValueError(f"n_heads: expected a positive int, got {n_heads!r}")
        elif not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim <= 0:
            raise ValueError(f"head_dim: expected a positive int, got {head_dim!r}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, head_dim
        if backend not in BACKENDS:  # now, not at the first forward
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        check_precision(precision)
        self.precision = precision

    def head_sizes(self, num_v_heads: int | None, expand_v: float) -> tuple[int, int, int, int]:
        """The head sizes `(H, K, HV, V)` of a mixer with value heads of their own: `n_heads`, `head_dim`, then
        `value_heads(n_heads, num_v_heads)` and `value_head_dim(head_dim, expand_v)`, kept as `num_v_heads` and
        `head_v_dim`."""
        self.num_v_heads = value_heads(self.n_heads, num_v_heads)
        self.head_v_dim = value_head_dim(self.head_dim, expand_v)
        return self.n_heads, self.head_dim, self.num_v_heads, self.head_v_dim

    def forward(
        self,
        x: torch.Tensor,
        state: State | None = None,
        cu_seqlens: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | Unpadded | None = None,
        backend: str | None = None,
        output_state: bool = True,
    ) -> tuple[torch.Tensor, State | None]:
        """`x: [B, T, d_model]` -> `(y: [B, T, d_model], final state)`; `state` continues an earlier call.

        `attention_mask: [B, T]` (bool or 0/1; 1 = a real token, 0 = padding, anywhere in a row): the padded
        positions touch neither the state nor a real token's output, and their `y` is zero; a row without a real
        token keeps its state. Not with `cu_seqlens` (a packed row has no padding). An `Unpadded` (`check_padding`'s)
        stands for a mask already checked: the LM's, checked once for all its layers.
        `backend` overrides the layer's op backend for this call (decoding uses the token-by-token one).
        `output_state=False`: the final state is neither formed nor returned (None), as a training step that discards
        it wants: the ops then skip it, and the Triton kernels take the products that only a returned state would
        need in three tf32 passes in one (`linattn/ops/utils/precision.py`).

        Example:
            >>> layer = build_layer("gated_deltanet", 64, 4)
            >>> mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # left padding
            >>> y, state = layer(torch.randn(2, 5, 64), attention_mask=mask)
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x: expected shape [B, T, d_model={self.d_model}], got {list(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"x: expected a floating-point tensor, got {x.dtype}")
        weight = next(self.parameters(), None)
        if weight is not None and x.device != weight.device:
            raise ValueError(f"x: expected the layer's device {weight.device}, got {x.device}")
        if weight is not None and x.dtype != weight.dtype and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(f"x: expected the layer's dtype {weight.dtype} (or autocast), got {x.dtype}")
        if x.shape[1] == 0:
            raise ValueError(f"x: expected at least one time step (T >= 1), got shape {list(x.shape)}")
        # on CPU tensors only, as the ops' value checks: a NaN input would otherwise be reported by the op as one
        # of the layer's own intermediates (a gate, a decay)
        if x.device.type == "cpu" and not bool(torch.isfinite(x).all()):
            raise ValueError("x: expected finite values, got NaN or inf")
        if backend is not None and backend != DECODE and backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        N = check_cu_seqlens(cu_seqlens, x.shape[0], x.shape[1])  # before any conv reads the offsets
        padding = check_padding(attention_mask, cu_seqlens, x.shape[0], x.shape[1])
        if state is not None:
            self.check_state(state, N)
        check_flag("output_state", output_state)
        backend = backend or self.backend
        if padding is None:
            y, new = self.mix(x, state, cu_seqlens, backend, output_state)
        else:
            y, new = self.mix_padded(x, state, padding, backend, output_state)
        return y, (new if output_state else None)

    def check_state(self, state: State, batch_size: int) -> None:
        """`state` must be this layer's: the names `init_state` gives (those in `optional_state` may be missing),
        each shaped as there for `batch_size` sequences (dims in `growing_state` may differ: a KV cache's length).
        A matching state costs a few dict lookups: this runs at every decoded token of every layer."""
        if not isinstance(state, dict):
            raise TypeError(f"state: expected a dict (this layer's state), got {type(state).__name__}")
        shapes = self._shapes_by_batch.get(batch_size)
        if shapes is None:
            shapes = self._shapes_by_batch[batch_size] = {
                name: [(batch_size, *s[1:]) for s in spec] for name, spec in self._state_spec.items()
            }
        if state.keys() == shapes.keys():
            for name, value in state.items():
                if ([t.shape for t in value] if isinstance(value, tuple) else [value.shape]) != shapes[name]:
                    break
            else:
                return
        missing = shapes.keys() - state.keys()
        unknown = state.keys() - shapes.keys()
        if unknown or (missing and missing != self.optional_state):
            raise ValueError(
                f"state: expected {type(self).__name__}'s entries {sorted(shapes)}"
                + (f" (or all but {sorted(self.optional_state)})" if self.optional_state else "")
                + f", got {sorted(state)} (the state of another layer?)"
            )
        for name, value in state.items():
            parts = value if isinstance(value, tuple) else (value,)
            if len(parts) != len(shapes[name]) or not all(isinstance(t, torch.Tensor) for t in parts):
                raise ValueError(
                    f"state[{name!r}]: expected {len(shapes[name])} tensor(s), got "
                    + ", ".join(type(t).__name__ for t in parts)
                )
            for i, (got, want) in enumerate(zip(_shapes(value), shapes[name])):
                expected = ["any" if (name, d) in self.growing_state else n for d, n in enumerate(want)]
                if len(got) != len(expected) or any(e not in ("any", g) for g, e in zip(got, expected)):
                    where = f"state[{name!r}]" + (f"[{i}]" if isinstance(value, tuple) else "")
                    raise ValueError(f"{where}: expected shape {expected} (batch {batch_size}), got {list(got)}")
        grown = {state[name].shape[d] for name, d in self.growing_state if name in state}
        if len(grown) > 1:
            raise ValueError(f"state: the entries {sorted(n for n, _ in self.growing_state)} must have one length")

    optional_state: frozenset[str] = frozenset()  # entries a valid state may lack
    growing_state: frozenset[tuple[str, int]] = frozenset()  # (entry, dim) pairs whose size the context sets

    @functools.cached_property
    def _state_spec(self) -> dict[str, list[tuple[int, ...]]]:
        return {name: _shapes(value) for name, value in self.init_state(1).items()}

    @functools.cached_property
    def _shapes_by_batch(self) -> dict[int, dict[str, list[tuple[int, ...]]]]:
        return {}

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Decode one token: `x_t: [B, d_model]` -> `(y_t: [B, d_model], state)`."""
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t: expected shape [B, d_model={self.d_model}], got {list(x_t.shape)}")
        y, state = self.forward(x_t[:, None], state, backend=DECODE)
        return y[:, 0], state

    def mix(
        self, x: torch.Tensor, state: State | None, cu_seqlens: torch.Tensor | None, backend: str, output_state: bool
    ) -> tuple[torch.Tensor, State | None]:
        """The layer's computation on checked inputs: `(y, new state)`; with `output_state` False the new state may be
        None or incomplete (`forward` drops it)."""
        raise NotImplementedError

    def mix_padded(
        self, x: torch.Tensor, state: State | None, padding: Unpadded, backend: str, output_state: bool
    ) -> tuple[torch.Tensor, State | None]:
        """`mix` on a padded batch (`padding.mask: [B, T]` bool, some False): the real tokens as one packed row with
        `cu_seqlens`, the outputs padded back. A layer whose state cannot be packed overrides it (softmax)."""
        run = functools.partial(self.mix, backend=backend, output_state=output_state)
        return run_unpadded(run, x, state, padding, self.init_state, output_state=output_state)

    def op_backend(self, backend: str, x: torch.Tensor, *, fused: bool) -> str:
        """The backend an op runs with: `backend` itself, except when decoding (`DECODE`), where an op with a
        fused recurrent kernel (`fused`) uses it on CUDA without autograd (the kernel has no backward), and
        everything else steps the naive recurrence."""
        if backend != DECODE:
            return backend
        choice = self.decode_backend or ("fused_recurrent" if x.is_cuda else "naive")
        use_fused = fused and choice == "fused_recurrent" and not torch.is_grad_enabled()
        return "fused_recurrent" if use_fused else "naive"

    def init_state(self, batch_size: int) -> State:
        """The state before any token (what `state=None` means)."""
        raise NotImplementedError

    def zeros(self, *shape: int) -> torch.Tensor:
        """A float32 zero tensor on this module's device (states are float32 whatever the weights' dtype)."""
        return torch.zeros(*shape, device=next(self.parameters()).device)

    def state_size(self, seq_len: int | None = None) -> int:
        """Floats of recurrent state per sequence (for softmax attention: its KV cache at `seq_len`)."""
        return sum(_numel(v) for v in self.init_state(1).values())


def _shapes(x) -> list[tuple[int, ...]]:
    """The shapes of a state entry: a tensor, or a tuple of them."""
    return [tuple(t.shape) for t in x] if isinstance(x, tuple) else [tuple(x.shape)]


def _numel(x) -> int:
    """Floats in a state entry (an integer counter, such as a forgetting VLA's position, is not state)."""
    if isinstance(x, tuple):
        return sum(_numel(t) for t in x)
    return x.numel() if isinstance(x, torch.Tensor) and x.is_floating_point() else 0


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """`[B, T, H * d] -> [B, T, H, d]`."""
    return x.unflatten(-1, (n_heads, -1))


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """`[B, T, H, d] -> [B, T, H * d]`."""
    return x.flatten(-2)


def value_heads(n_heads: int, num_v_heads: int | None) -> int:
    """The number of value heads: `n_heads` (None), or a multiple of it (GVA, grouped value attention: each query /
    key head serves `num_v_heads // n_heads` value heads, fla's convention)."""
    if num_v_heads is None:
        return n_heads
    if not isinstance(num_v_heads, int) or isinstance(num_v_heads, bool) or num_v_heads <= 0 or num_v_heads % n_heads:
        raise ValueError(
            f"num_v_heads: expected None or a positive multiple of the {n_heads} query / key heads, got {num_v_heads!r}"
        )
    return num_v_heads


def value_head_dim(head_dim: int, expand_v: float) -> int:
    """A value head's dim `head_dim · expand_v`, which must be an integer (to a relative 1e-6, so that a ratio such as
    `40 / 24` gives back 40)."""
    if isinstance(expand_v, bool) or not isinstance(expand_v, (int, float)) or not 0 < expand_v < math.inf:
        raise ValueError(f"expand_v: expected a finite number > 0, got {expand_v!r}")
    dim = head_dim * expand_v
    if not math.isclose(dim, round(dim), rel_tol=1e-6):
        raise ValueError(f"expand_v: head_dim · expand_v must be an integer, got {head_dim} · {expand_v} = {dim:g}")
    return round(dim)


def repeat_heads(x: torch.Tensor, groups: int) -> torch.Tensor:
    """`[B, T, H, d] -> [B, T, H * groups, d]`, head `i` repeated for heads `i * groups … (i + 1) * groups − 1`: the
    query / key head of each value head under GVA (value head `j` reads head `j // groups`, as fla's kernels)."""
    if groups == 1:
        return x
    return x.unsqueeze(3).expand(*x.shape[:3], groups, x.shape[-1]).flatten(2, 3)


def promote(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Cast to one float dtype, as an op wants for q, k, v (its states and accumulation are float32 either way):
    under autocast on their device, autocast's (the matmuls'), else the widest among `xs`. CUDA's autocast runs norms
    (`F.normalize`) in float32 beside bfloat16 matmuls: the widest would hand the ops float32 q, k, v, whose kernels
    then take three tf32 passes, and none of the fast level's bfloat16 products."""
    device = xs[0].device.type
    if torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device):  # none on "meta"
        dtype = torch.get_autocast_dtype(device)
    else:
        dtype = functools.reduce(torch.promote_types, (x.dtype for x in xs))
    return tuple(x.to(dtype) for x in xs)


class RMSNorm(nn.RMSNorm):
    """`nn.RMSNorm` with its input cast to the weight's dtype. Under autocast a bfloat16 input beside the float32
    weight makes torch skip its fused kernel (and warn at every call); so the norm runs in float32 there, as autocast
    runs LayerNorm, and in the model's dtype when the whole model is cast."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x if self.weight is None else x.to(self.weight.dtype))


def gate_output(o: torch.Tensor, g_proj: nn.Linear | None, x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The output gate of GDN, KLA and GLA: `o ⊙ SiLU(W_g x)` per head (`o: [B, T, H, d]`), or `o` where the layer
    was built without it (`g_proj` None)."""
    return o if g_proj is None else o * torch.nn.functional.silu(split_heads(g_proj(x), n_heads))


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """The positive feature map `ELU(x) + 1` of the linear-attention and VLA papers."""
    return torch.nn.functional.elu(x) + 1
