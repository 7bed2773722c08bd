"""Batches of packed documents: windows of a split's token stream back to back in one row, cut at document
boundaries by `cu_seqlens`, so that no token reads another document and no target is another document's token.

A window of `T` tokens at stream offset `s` has inputs `tokens[s : s + T]` and targets `tokens[s + 1 : s + T + 1]`;
a target that begins another document is `IGNORE` (with an end-of-document token the last target of a document is
that token, so the model learns where documents end). `B` windows make one row `[1, B·T]`; `cu_seqlens` starts a
sequence at every window and at every document start inside one, so each sequence is one document's stretch and
runs from a fresh state (its positions from 0).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from linattn.data.cache import TokenSplit, np
from linattn.tasks.batch import IGNORE, Batch


class PackedText:
    """Packed windows of one tokenised split.

    Example:
        >>> data = PackedText(cached_split("cache", "train", documents, ByteTokenizer()))
        >>> batch = data.batch(8, 256, torch.Generator().manual_seed(0))  # inputs, targets [1, 2048], cu_seqlens
    """

    def __init__(self, split: TokenSplit):
        self.split = split
        self.tokens = split.tokens
        # document starts inside the stream: where a window is cut
        self.boundaries = np.unique(split.offsets[1:-1])

    def __len__(self) -> int:
        return len(self.tokens)

    def batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> Batch:
        """`batch_size` windows of `seq_len` tokens at offsets drawn uniformly from `generator` (CPU tensors)."""
        if len(self) < seq_len + 1:
            raise ValueError(
                f"seq_len: the {self.split.name} split has {len(self)} tokens, fewer than a window of seq_len + 1 = "
                f"{seq_len + 1}; give more text or a smaller seq_len"
            )
        starts = torch.randint(0, len(self) - seq_len, (batch_size,), generator=generator)
        return self.windows(starts.tolist(), seq_len)

    def eval_batches(self, batch_size: int, seq_len: int, max_tokens: int) -> Iterator[Batch]:
        """The split's first windows in order, back to back, until about `max_tokens` inputs (at least one window):
        the same batches every time. A split shorter than a window gives one window of its whole length."""
        if len(self) < 2:
            raise ValueError(f"the {self.split.name} split has {len(self)} tokens; a target needs at least 2")
        seq_len = min(seq_len, len(self) - 1)
        starts = list(range(0, len(self) - seq_len, seq_len))[: max(1, -(-max_tokens // seq_len))]
        for i in range(0, len(starts), batch_size):
            yield self.windows(starts[i : i + batch_size], seq_len)

    def windows(self, starts: list[int], seq_len: int) -> Batch:
        """The windows at stream offsets `starts` packed into one row: `inputs, targets: [1, len(starts)·T]` int64,
        `cu_seqlens: [N + 1]` int64 for the `N` document stretches."""
        inputs, targets, cu = [], [], [0]
        for b, s in enumerate(starts):
            window = torch.from_numpy(self.tokens[s : s + seq_len + 1].astype(np.int64))  # [T + 1]
            target = window[1:].clone()
            first, last = np.searchsorted(self.boundaries, [s, s + seq_len], side="right")
            cuts = self.boundaries[first:last] - s  # positions in (0, T] where a document starts
            target[cuts - 1] = IGNORE
            cu += [b * seq_len + int(c) for c in cuts if c < seq_len] + [(b + 1) * seq_len]
            inputs.append(window[:-1])
            targets.append(target)
        return Batch(torch.cat(inputs)[None], torch.cat(targets)[None], cu_seqlens=torch.tensor(cu))
