"""Validation loss and perplexity of a language model over packed batches of held-out text."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from linattn.tasks.batch import IGNORE, Batch


def validation_loss(model: nn.Module, batches: Iterable[Batch]) -> dict[str, float]:
    """`{"val_loss": nats a token, "val_ppl": exp(val_loss)}`: the mean next-token cross-entropy over every
    supervised position of `batches` (packed: a `DecoderLM`'s `model(inputs, cu_seqlens=…, output_state=False)`),
    computed in float32 on the device of `model`'s parameters. Call it under `torch.no_grad()` (the trainer's evals
    do).

    Example: `validation_loss(model, PackedText(val).eval_batches(8, 256, 65536))`.
    """
    device = next(model.parameters()).device
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    for batch in batches:
        batch = batch.to(device)
        logits = model(batch.inputs, cu_seqlens=batch.cu_seqlens, output_state=False)[0]  # [1, N, V]
        total += F.cross_entropy(
            logits.flatten(0, 1).float(), batch.targets.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        count += int(batch.supervised.sum())
    if count == 0:
        raise ValueError("batches: no supervised position to evaluate")
    loss = total.item() / count
    return {"val_loss": loss, "val_ppl": math.exp(min(loss, 700.0))}  # exp overflows a float past ~709
