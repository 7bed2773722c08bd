"""A training step's forward and backward as a CUDA graph: captured once for each batch shape, replayed at every step.

A small model's step on a GPU is bound by the host: each of its many small kernels (the chunked ops' stages, the
layers' element-wise ops, autograd's bookkeeping) costs more to launch than to run. Replaying a graph launches them
all at once. The optimizer's update, gradient clipping and the finite check stay outside the graph (a handful of
launches), so a graphed step updates the weights as an eager one does.

A graph replays fixed shapes and cannot read a device value on the host, so the loss it replays is
`supervised_cross_entropy`'s in a form with neither: the supervised positions are found on the host, in the batch as
`train_batch` drew it (on the CPU), and the model's head runs at those flat positions (`DecoderLM`'s
`logits_at=index`), their count rounded up to a power of two with unsupervised fillers so that a mixture of tasks
gives a few shapes, not one a step. Packed batches (whose `cu_seqlens` the ops read on the host) run eagerly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from linattn import cuda_graph
from linattn.tasks.batch import IGNORE, Batch

MAX_SHAPES = 4  # graphs kept (each holds its activations); a batch of a further shape runs eagerly


@dataclass
class _Capture:
    graph: torch.cuda.CUDAGraph
    inputs: torch.Tensor  # [B, T] the graph reads
    index: torch.Tensor  # [N] supervised positions in the flattened [B·T] (fillers at 0)
    targets: torch.Tensor  # [N] their targets (IGNORE at the fillers)
    loss: torch.Tensor  # [] the graph writes
    grads: list[torch.Tensor | None]  # each parameter's gradient, written by the graph (None: the loss never uses it)


def supervised_positions(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """`(index, targets)`, both `[N]` int64 on the batch's (host) device: the supervised positions of `batch` in the
    flattened `[B·T]`, row-major, and their targets; `N` their count rounded up to a power of two, the fillers at
    position 0 with target `IGNORE`."""
    flat = batch.targets.flatten()
    index = (flat != IGNORE).nonzero().squeeze(1)  # [n]
    size = 1 << max(index.numel() - 1, 0).bit_length()
    fill = size - index.numel()
    return F.pad(index, (0, fill)), F.pad(flat[index], (0, fill), value=IGNORE)


def indexed_cross_entropy(
    model: nn.Module, inputs: torch.Tensor, index: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """`supervised_cross_entropy`'s value from `supervised_positions`' `(index, targets)` of the batch `inputs`:
    the mean float32 cross-entropy of the logits at `index`, the `IGNORE` fillers left out."""
    logits = model(inputs, logits_at=index, output_state=False)[0]  # [N, V]
    return F.cross_entropy(logits.float(), targets, ignore_index=IGNORE)


class GraphedStep:
    """Forward and backward of a `DecoderLM`'s supervised cross-entropy (`supervised_cross_entropy`'s value) under
    `autocast()`, replayed from a CUDA graph per batch shape on `device`.

    Called on a batch (on the host, as drawn; the first batch of a shape captures its graph, in the model's current
    train or eval mode), it copies the batch to the GPU, replays, sets each trainable parameter's `.grad` to its
    gradient (replaced, not accumulated) and returns the loss `[]`, both the graph's own memory, rewritten by the
    next replay: clip and update before that. Or it returns None, having done nothing, for a batch to run eagerly:
    packed, or of a shape past the first `MAX_SHAPES` (said once). The graph reads the parameters where they are:
    update them in place (as an optimizer does), never replace them (`.to()`, `load_state_dict(assign=True)`).
    A capture draws no random numbers: a model with dropout replays from the generator's state as it stood.

    Example: `step = GraphedStep(model, partial(torch.autocast, "cuda", dtype=torch.bfloat16), torch.device("cuda"))`,
    then at every update `loss = step(batch)` in place of `supervised_cross_entropy(model, batch).backward()`.
    """

    def __init__(self, model: nn.Module, autocast: Callable, device: torch.device):
        self.model, self.autocast, self.device = model, autocast, device
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.captures: dict[tuple, _Capture] = {}
        self.said_eager = False

    def __call__(self, batch: Batch) -> torch.Tensor | None:
        if batch.cu_seqlens is not None:
            return None
        index, targets = supervised_positions(batch)
        key = (tuple(batch.inputs.shape), index.numel())
        if key not in self.captures and len(self.captures) >= MAX_SHAPES:
            if not self.said_eager:
                warnings.warn(f"cuda_graph: batches of shapes past the first {MAX_SHAPES} run eagerly", stacklevel=2)
                self.said_eager = True
            return None
        capture = self.captures.get(key) or self._capture(key)
        capture.inputs.copy_(batch.inputs)
        capture.index.copy_(index)
        capture.targets.copy_(targets)
        capture.graph.replay()
        for p, grad in zip(self.params, capture.grads):
            p.grad = grad
        return capture.loss

    def _capture(self, key: tuple) -> _Capture:
        shape, n = key
        inputs = torch.zeros(shape, dtype=torch.long, device=self.device)  # token 0 and position 0: valid everywhere
        index = torch.zeros(n, dtype=torch.long, device=self.device)
        targets = torch.zeros(n, dtype=torch.long, device=self.device)

        def warm_up() -> None:
            self._forward_backward(inputs, index, targets)
            self._drop_grads()  # so that the captured backward allocates each gradient in the graph's memory

        graph, loss = cuda_graph.capture(
            warm_up, lambda: self._forward_backward(inputs, index, targets), self.device, "train with cuda_graph=False"
        )
        capture = _Capture(graph, inputs, index, targets, loss, [p.grad for p in self.params])
        self._drop_grads()
        self.captures[key] = capture
        return capture

    def _forward_backward(self, inputs: torch.Tensor, index: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with self.autocast(cache_enabled=False):  # autocast's cast cache would outlive the capture
            loss = indexed_cross_entropy(self.model, inputs, index, targets)
        loss.backward()
        return loss.detach()

    def _drop_grads(self) -> None:
        for p in self.params:
            p.grad = None
