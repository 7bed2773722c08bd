"""Tasks: typed configs and pure generators (a local `torch.Generator`, never global RNG) of the synthetic tasks,
of byte-level text (`text.py`), of a tokenised corpus (`corpus.py`) and RULER's passkey on its text (`passkey.py`).

`generate(config, batch_size, generator) -> Batch` and `seq_len_of(config)` work for every task config; each module
also has its own `generate` (`linattn.tasks.mqar.generate_vla`, … for a single MQAR format). Accuracy per slice and
the mean loss: `accuracy`, `AccuracyMeter`.
"""

from __future__ import annotations

import torch

from linattn.tasks import copy, corpus, mqar, passkey, sniah, stack, text
from linattn.tasks.batch import IGNORE, Batch
from linattn.tasks.copy import CopyConfig
from linattn.tasks.corpus import CorpusConfig
from linattn.tasks.metrics import AccuracyMeter, accuracy
from linattn.tasks.mqar import (
    KLA_EVAL_SEQ_LENS,
    VLA_LONG_SEQ_LENS,
    VLA_N_PAIRS,
    ZOOLOGY_TEST_MIX,
    ZOOLOGY_TRAIN_MIX,
    ZOOLOGY_TRAIN_WEIGHTS,
    KLAMQARConfig,
    MQARConfig,
    MQARMixtureConfig,
    VLAMQARConfig,
    ZoologyMQARConfig,
    generate_mixture,
    zoology_mix,
)
from linattn.tasks.passkey import PasskeyConfig
from linattn.tasks.sniah import SNIAH_EVAL_SEQ_LENS, SNIAHConfig
from linattn.tasks.stack import StackConfig
from linattn.tasks.text import TextConfig

TaskConfig = (
    MQARConfig | MQARMixtureConfig | CopyConfig | SNIAHConfig | StackConfig | TextConfig | CorpusConfig | PasskeyConfig
)


def seq_len_of(config: TaskConfig) -> int:
    """The sequence length `T` of the batches a task config generates (an MQAR mixture's: its longest setting's)."""
    return mqar.seq_len_of(config) if isinstance(config, MQARConfig | MQARMixtureConfig) else config.seq_len


def generate(config: TaskConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """One batch of the task `config` describes, drawn from `generator` only, on `generator.device`.

    Example: `generate(CopyConfig(), 32, torch.Generator().manual_seed(0)).inputs.shape == (32, 63)`.
    """
    if isinstance(config, CopyConfig):
        return copy.generate(config, batch_size, generator)
    if isinstance(config, SNIAHConfig):
        return sniah.generate(config, batch_size, generator)
    if isinstance(config, StackConfig):
        return stack.generate(config, batch_size, generator)
    if isinstance(config, TextConfig):
        return text.generate(config, batch_size, generator)
    if isinstance(config, CorpusConfig):
        return corpus.generate(config, batch_size, generator)
    if isinstance(config, PasskeyConfig):
        return passkey.generate(config, batch_size, generator)
    return mqar.generate(config, batch_size, generator)


__all__ = [
    "IGNORE",
    "KLA_EVAL_SEQ_LENS",
    "SNIAH_EVAL_SEQ_LENS",
    "VLA_LONG_SEQ_LENS",
    "VLA_N_PAIRS",
    "ZOOLOGY_TEST_MIX",
    "ZOOLOGY_TRAIN_MIX",
    "ZOOLOGY_TRAIN_WEIGHTS",
    "AccuracyMeter",
    "Batch",
    "CopyConfig",
    "CorpusConfig",
    "KLAMQARConfig",
    "MQARConfig",
    "MQARMixtureConfig",
    "PasskeyConfig",
    "SNIAHConfig",
    "StackConfig",
    "TaskConfig",
    "TextConfig",
    "VLAMQARConfig",
    "ZoologyMQARConfig",
    "accuracy",
    "generate",
    "generate_mixture",
    "seq_len_of",
    "zoology_mix",
]
