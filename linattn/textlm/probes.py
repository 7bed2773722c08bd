"""What a trained text LM does with its context: its loss at lengths past the training window, and passkey recall.

- `loss_at_lengths`: the first `windows` documents of a split long enough for the largest length, in order (the
  same documents for every length and every model on the same cache); at each length `L` their first `L + 1`
  tokens. Reported: the mean next-token loss (nats a token) over all `L` positions and over the last quarter
  (tokens with at least `3L/4` of context). A model that uses a long context keeps the second at or below the
  first; one that breaks past its training length shows it there first.
- `passkey_recall`: RULER's passkey on real text. A random five-digit key is stated at `depth · L` into `L` tokens
  of the split's text (`The pass key is 71432. Remember it. 71432 is the pass key.`) and asked at the end
  (`What is the pass key? The pass key is`); each trial is one teacher-forced forward, scored on the key's
  tokens: `exact` (every token the model's top choice) and `token` (the fraction that are), both means over trials.
  The text around it is the split's token stream without its end-of-document tokens: training resets the state at
  every document start, so a model never sees text after one. The key is asked as it was stated, after a space
  (`is 71432`), so that a GPT-2-style BPE gives it the same tokens both times.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from linattn.data.cache import TokenSplit, cached_split
from linattn.data.corpus import SPLITS, read_corpus
from linattn.data.tokenizer import Tokenizer
from linattn.tasks.batch import IGNORE
from linattn.tasks.passkey import passkey_row, passkey_text
from linattn.textlm.run import CACHE_NAME, load_run

HEAD_ROWS = 4096  # positions whose logits are formed at once: [4096, vocab] float32 stays far below the model's size


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def token_losses(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """`ids: [L + 1]` int64: the next-token losses `[L]` (float32) of one sequence, the head run `HEAD_ROWS` rows at a
    time so that a long window never holds `[L, vocab]` logits."""
    ids = ids.to(_device(model))
    h, _, _ = model.features(ids[None, :-1])  # [1, L, d]
    targets = ids[1:]
    losses = [
        F.cross_entropy(model.head(h[0, i : i + HEAD_ROWS]).float(), targets[i : i + HEAD_ROWS], reduction="none")
        for i in range(0, targets.numel(), HEAD_ROWS)
    ]
    return torch.cat(losses).cpu()


def _at_least_one(**counts: int) -> None:
    for name, value in counts.items():
        if value < 1:
            raise ValueError(f"{name}: expected at least 1, got {value}")


def loss_at_lengths(model: nn.Module, split: TokenSplit, lengths: list[int], windows: int = 8) -> dict[int, dict]:
    """`{L: {"loss", "tail_loss", "windows"}}` (nats a token) over up to `windows` documents of at least
    `max(lengths) + 1` tokens, at each `L` their first `L + 1`. `ValueError` when no document is that long."""
    _at_least_one(windows=windows)
    sizes = np.diff(split.offsets)
    docs = [int(d) for d in np.flatnonzero(sizes > max(lengths))[:windows]]
    if not docs:
        raise ValueError(
            f"lengths: no document of the {split.name} split is longer than {max(lengths)} tokens (a loss at length L "
            f"reads L + 1; the longest has {int(sizes.max(initial=0))}): probe shorter lengths (documents are cut at "
            "the run's max_doc_bytes)"
        )
    out = {}
    for L in lengths:
        all_, tail = [], []
        for d in docs:
            start = int(split.offsets[d])
            losses = token_losses(model, torch.from_numpy(split.tokens[start : start + L + 1].astype(np.int64)))
            all_.append(losses.mean().item())
            tail.append(losses[-(L // 4) or None :].mean().item())
        out[L] = {"loss": float(np.mean(all_)), "tail_loss": float(np.mean(tail)), "windows": len(docs)}
    return out


@torch.no_grad()
def passkey_recall(
    model: nn.Module,
    tokenizer: Tokenizer,
    split: TokenSplit,
    lengths: list[int],
    trials: int = 20,
    depth: float = 0.1,
    seed: int = 0,
) -> dict[int, dict]:
    """`{L: {"exact", "token", "trials"}}`: the passkey asked after `L` tokens of the split's text (its token stream
    from a random offset, the same for every model given the seed; `tasks.passkey.passkey_row`, as lm-compare's)."""
    if not 0 <= depth <= 1:
        raise ValueError(f"depth: expected a fraction in [0, 1], got {depth}")
    _at_least_one(trials=trials)
    text = passkey_text(split.tokens, tokenizer)
    rng = np.random.default_rng(seed)
    out = {}
    for L in lengths:
        keys = [f"{k:05d}" for k in rng.integers(10_000, 100_000, trials)]
        exact, token = [], []
        for key in keys:
            inputs, targets = passkey_row(
                tokenizer, text, key, depth, L, lambda n: int(rng.integers(0, len(text) - n + 1)),
                split.name,
            )  # fmt: skip
            at = targets != IGNORE  # [L] the positions that predict the key's tokens
            logits, _ = model(inputs[None].to(_device(model)), logits_at=at[None].to(_device(model)))
            hits = logits.argmax(-1).cpu() == targets[at]
            exact.append(bool(hits.all()))
            token.append(hits.float().mean().item())
        out[L] = {"exact": float(np.mean(exact)), "token": float(np.mean(token)), "trials": trials}
    return out


def probes_table(losses: dict[int, dict], passkey: dict[int, dict]) -> str:
    """Markdown: one row a length."""
    lines = [
        "Loss in nats a token, over the same documents at every length; passkey: the fraction of trials recalled "
        "exactly, and of the key's tokens.",
        "",
        "| L | loss | last quarter | windows | passkey exact | passkey tokens |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for L in sorted(set(losses) | set(passkey)):
        lo, pk = losses.get(L), passkey.get(L)
        cells = [f"{lo['loss']:.3f}", f"{lo['tail_loss']:.3f}", str(lo["windows"])] if lo else ["–"] * 3
        cells += [f"{pk['exact']:.3f}", f"{pk['token']:.3f}"] if pk else ["–"] * 2
        lines.append(f"| {L:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def probe_run(
    run_dir: str | os.PathLike,
    lengths: list[int],
    *,
    split: str = "val",
    windows: int = 8,
    trials: int = 20,
    cache_dir: str | os.PathLike | None = None,
    device: str = "cpu",
) -> dict:
    """Both probes on the trained run in `run_dir`, on its corpus's `split` (tokenised into the run's cache once:
    `test`, which training never reads, included). Returns `{"split", "lengths", "loss": …, "passkey": …}`."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    run, model, tokenizer = load_run(run_dir)
    documents = read_corpus(run.data, run.data_config).split(run.data_config)[split]
    if not documents:
        raise ValueError(f"split: the run's corpus has no {split} documents (its {split}_fraction is 0)")
    tokens = cached_split(Path(cache_dir or Path(run_dir) / CACHE_NAME), split, documents, tokenizer)
    return probe_model(model, tokenizer, tokens, lengths, windows=windows, trials=trials, device=device)


def probe_model(
    model: nn.Module, tokenizer: Tokenizer, tokens: TokenSplit, lengths: list[int], *, windows: int = 8,
    trials: int = 20, device: str = "cpu",
) -> dict:  # fmt: skip
    """Both probes of `model` on the tokenised split `tokens`: `{"split", "lengths", "loss": …, "passkey": …}`."""
    model = model.to(device)
    return {
        "split": tokens.name,
        "lengths": list(lengths),
        "loss": loss_at_lengths(model, tokens, lengths, windows),
        "passkey": passkey_recall(model, tokenizer, tokens, lengths, trials),
    }
