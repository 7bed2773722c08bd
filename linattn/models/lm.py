"""A decoder-only language model whose sequence mixer is chosen by name."""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from linattn.layers import build_layer
from linattn.layers.base import DECODE, State
from linattn.layers.gated_conv import GatedConv
from linattn.layers.padding import Unpadded, check_padding
from linattn.layers.positions import token_positions
from linattn.models.config import ModelConfig
from linattn.ops.checks import check_flag


class Block(nn.Module):
    """One residual block.

    `transformer`: `x + mixer(LN(x))`, then `x + MLP(LN(x))`; `zoology`: `x + conv(LN(x))`, then `x + mixer(LN(x))`.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.d_model
        self.conv = GatedConv(d) if config.block == "zoology" else None
        self.conv_norm = nn.LayerNorm(d) if self.conv is not None else None
        self.mixer_norm = nn.LayerNorm(d)
        self.mixer = build_layer(config.mixer, d, config.n_heads, **config.mixer_options)
        self.mlp = None
        if config.block == "transformer" and config.mlp_hidden > 0:
            self.mlp_norm = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, config.mlp_hidden), nn.GELU(), nn.Linear(config.mlp_hidden, d))
        self.drop = nn.Dropout(config.dropout)

    def init_state(self, batch_size: int) -> State:
        state = {"mixer": self.mixer.init_state(batch_size)}
        if self.conv is not None:
            state["conv"] = self.conv.init_state(batch_size)
        return state

    def forward(
        self,
        x: torch.Tensor,
        state: State | None,
        cu_seqlens: torch.Tensor | None,
        backend: str | None = None,
        attention_mask: torch.Tensor | Unpadded | None = None,
        output_state: bool = True,
    ) -> tuple[torch.Tensor, State | None]:
        """`x: [B, T, d]` -> `(x: [B, T, d], state)`; `attention_mask`: the LM's padding, checked and packed once
        (`check_padding`; a `[B, T]` mask each mixer checks itself), or None: the mixers skip the padded positions
        (per-token parts compute them, and nothing real reads them). `output_state=False`: no state (None), as
        `Mixer.forward` takes it."""
        state = state or {}
        new = {}
        if self.conv is not None:
            h, new["conv"] = self.conv(
                self.conv_norm(x), state.get("conv"), cu_seqlens, attention_mask=attention_mask, backend=backend,
                output_state=output_state,
            )  # fmt: skip
            x = x + self.drop(h)
        h, new["mixer"] = self.mixer(
            self.mixer_norm(x), state.get("mixer"), cu_seqlens, attention_mask=attention_mask, backend=backend,
            output_state=output_state,
        )  # fmt: skip
        x = x + self.drop(h)
        if self.mlp is not None:
            x = x + self.drop(self.mlp(self.mlp_norm(x)))
        return x, (new if output_state else None)


class DecoderLM(nn.Module):
    """Token embedding (+ learned positions) → blocks → LayerNorm → head (tied to the embedding by default).

    `forward(input_ids: [B, T], state=None, cu_seqlens=None) -> (logits: [B, T, vocab], state)`; with
    `attention_mask: [B, T]` (1 = a real token, 0 = padding, anywhere in a row) the padded positions reach no state
    and no real token, and positions count a row's real tokens only (their logits are computed but mean nothing);
    with `logits_at=mask` (bool `[B, T]`) the head runs only where `mask` holds, and the logits are `[N, vocab]` for
    its `N` true positions in row-major order (`logits[mask]` of the full call): a loss on a few supervised
    positions (MQAR) then skips the `[B, T, vocab]` logits; `logits_at=index` (int64 `[N]`, positions in the
    flattened `[B·T]`) does the same at those positions without reading the mask on the host (a CUDA graph's);
    `step(token: [B], state) -> (logits: [B, vocab], state)` decodes one token with fixed-size state
    (softmax attention: a KV cache). A state is `{"pos": [B] int64, "layers": [per-block states]}`, `"pos"` the
    next position of each sequence. `features` gives the normed hidden states instead of logits. `output_state=False`
    neither forms nor returns the state (None): a training step's choice, whose kernels then skip what only a
    returned state needs (`Mixer.forward`).
    With `gradient_checkpointing = True` (HuggingFace's `gradient_checkpointing_enable()` sets it) each block
    recomputes its activations in the backward pass while training.

    Example:
        >>> from linattn.models import preset
        >>> model = DecoderLM(preset("vla-tinylm", mixer="deltanet"))
        >>> logits, state = model(torch.randint(0, 128, (2, 20)))
        >>> next_logits, state = model.step(logits[:, -1].argmax(-1), state)
        >>> mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # a left-padded batch
        >>> logits, state = model(torch.randint(0, 128, (2, 5)), attention_mask=mask)
    """

    gradient_checkpointing = False

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos = nn.Embedding(config.max_seq_len, config.d_model) if config.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight
        # what a block runs under while checkpointing (HuggingFace replaces it with its own choice of arguments)
        self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def init_state(self, batch_size: int) -> State:
        device = self.embed.weight.device
        return {
            "pos": torch.zeros(batch_size, dtype=torch.long, device=device),
            "layers": [b.init_state(batch_size) for b in self.blocks],
        }

    def state_size(self, seq_len: int | None = None) -> int:
        """Floats of recurrent state per sequence, all layers (softmax attention: its KV cache at `seq_len`)."""
        total = 0
        for b in self.blocks:
            total += b.mixer.state_size(seq_len)
            if b.conv is not None:
                total += b.conv.state_size()
        return total

    def forward(
        self,
        input_ids: torch.Tensor,
        state: State | None = None,
        cu_seqlens: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        backend: str | None = None,
        logits_at: torch.Tensor | None = None,
        output_state: bool = True,
    ) -> tuple[torch.Tensor, State | None]:
        as_mask = logits_at is not None and logits_at.dtype == torch.bool and logits_at.shape == input_ids.shape
        as_index = logits_at is not None and logits_at.dtype == torch.long and logits_at.dim() == 1
        if logits_at is not None and not (as_mask or as_index):
            raise ValueError(
                f"logits_at: expected a bool tensor of input_ids' shape {list(input_ids.shape)} or an int64 [N] of "
                f"positions in the flattened [B·T], got {logits_at.dtype} {list(logits_at.shape)}"
            )
        # positions out of range: on CPU a clear error; on CUDA reading the answer would make the host wait
        if as_index and logits_at.device.type == "cpu" and logits_at.numel():
            low, high, size = int(logits_at.min()), int(logits_at.max()), input_ids.numel()
            if low < 0 or high >= size:
                raise ValueError(f"logits_at: expected positions in [0, B·T = {size}), got {low} – {high}")
        h, state, _ = self.features(
            input_ids, state, cu_seqlens, attention_mask=attention_mask, backend=backend, all_layers=False,
            output_state=output_state,
        )  # fmt: skip
        if as_mask:
            h = h[logits_at]  # [N, d]
        elif as_index:
            h = h.flatten(0, 1).index_select(0, logits_at)  # [N, d]; no host sync, unlike a mask (a CUDA graph's need)
        return self.head(h), state

    def features(
        self,
        input_ids: torch.Tensor,
        state: State | None = None,
        cu_seqlens: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        backend: str | None = None,
        all_layers: bool = False,
        output_state: bool = True,
    ) -> tuple[torch.Tensor, State | None, tuple[torch.Tensor, ...] | None]:
        """The final normed hidden states `[B, T, d]` (what the head reads), the new state and, with `all_layers`,
        HuggingFace's `hidden_states`: the embeddings, each block's output but the last, and the final normed
        states (`n_layers + 1` tensors `[B, T, d]`). Arguments as in `forward`.

        Example:
            >>> h, state, layers = model.features(torch.randint(0, 128, (2, 9)), all_layers=True)
        """
        if input_ids.dim() != 2 or input_ids.dtype != torch.long:
            raise ValueError(
                f"input_ids: expected an int64 tensor [B, T], got {input_ids.dtype} {list(input_ids.shape)}"
            )
        B, T = input_ids.shape
        # out-of-vocabulary ids: on CPU a clear error; on CUDA reading the answer would make the host wait each call
        V = self.config.vocab_size
        if input_ids.device.type == "cpu" and input_ids.numel() and not 0 <= input_ids.min() <= input_ids.max() < V:
            raise ValueError(
                f"input_ids: expected token ids in [0, vocab_size = {V}), "
                f"got min {input_ids.min().item()} max {input_ids.max().item()}"
            )
        check_flag("output_state", output_state)
        padding = check_padding(attention_mask, cu_seqlens, B, T)
        mask = None if padding is None else padding.mask
        if state is not None:
            self._check_state(state, B if cu_seqlens is None else cu_seqlens.numel() - 1)
        start = state["pos"] if state is not None else None
        positions = token_positions(B, T, start, cu_seqlens, mask, input_ids.device)  # [B, T]
        x = self.embed(input_ids)
        if self.pos is not None:
            # a call of at most max_seq_len tokens from position 0 fits (no device read); past a decoding state's start
            # the last position is read on CPU only: on CUDA the host would wait at each step, and a position past the
            # table trips the embedding's device-side assert instead
            if T > self.config.max_seq_len or (start is not None and positions.device.type == "cpu"):
                last = int(positions.max())
                if last >= self.config.max_seq_len:
                    raise ValueError(
                        f"input_ids: position {last} exceeds max_seq_len = {self.config.max_seq_len} of the learned "
                        "position embeddings"
                    )
            x = x + self.pos(positions)
        hidden = [x] if all_layers else None
        layer_states = state["layers"] if state is not None else [None] * len(self.blocks)
        checkpointing = self.gradient_checkpointing and self.training and torch.is_grad_enabled()
        new_layers = []
        for block, s in zip(self.blocks, layer_states):
            if checkpointing:
                x, s = self._gradient_checkpointing_func(block, x, s, cu_seqlens, backend, padding, output_state)
            else:
                x, s = block(x, s, cu_seqlens, backend, padding, output_state)
            new_layers.append(s)
            if all_layers:
                hidden.append(x)
        x = self.norm(x)
        if all_layers:
            hidden[-1] = x
        hidden = None if hidden is None else tuple(hidden)
        if not output_state:
            return x, None, hidden
        if cu_seqlens is not None:
            pos = positions[0, cu_seqlens[1:] - 1] + 1  # [N]
        elif mask is not None:
            pos = (0 if start is None else start) + mask.sum(dim=1)
        else:
            pos = positions[:, -1] + 1
        return x, {"pos": pos, "layers": new_layers}, hidden

    def _check_state(self, state: State, rows: int) -> None:
        """A state from `forward` or `init_state` for `rows` sequences (the batch's rows, or its packed sequences)."""
        if not isinstance(state, dict) or set(state) != {"pos", "layers"}:
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise TypeError(f"state: expected a dict with 'pos' and 'layers' (from forward or init_state), got {got}")
        pos = state["pos"]
        if not torch.is_tensor(pos) or pos.shape != (rows,):
            got = list(pos.shape) if torch.is_tensor(pos) else type(pos).__name__
            raise ValueError(f"state['pos']: expected shape [{rows}] (one position a sequence of the batch), got {got}")
        if len(state["layers"]) != len(self.blocks):
            raise ValueError(f"state['layers']: expected {len(self.blocks)} layers' states, got {len(state['layers'])}")

    def step(self, token: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Decode one token per sequence: `token: [B]` -> `(logits: [B, vocab], state)`."""
        if token.dim() != 1:
            raise ValueError(f"token: expected shape [B], got {list(token.shape)}")
        logits, state = self.forward(token[:, None], state, backend=DECODE)
        return logits[:, 0], state
