"""The CCQ paper's long-context language-modelling claim at our scale: a small byte-level LM's test loss against the
context length, trained at one length and tested up to 8× longer, GLA and GDN without and with CCQ; and the KLA
paper's language-modelling comparison (KLA against GDN, 0.4B / 1B tokens there) as its small-scale analogue on the
same corpus and model (`kla-lm`: GDN's run is `ccq-lm-length`'s, copied).

The paper (GLA and GDN at 500M / 1.3B parameters): "lower perplexity from 4K to 20K context". Here the corpus is
`linattn.tasks.text` (the Python manual's topics as bytes: 373 KB to train on, 47 KB held out to test), the model a
4-layer LM (d 256 in 4 heads, MLP 1024, dropout 0.1, no position embeddings, so longer windows need nothing new),
trained at T = 512 and tested on windows of the test split at T = 512, 1K, 2K and 4K. The table reports the test
loss in nats a byte, the mean over every position of a window (a longer window adds positions with more context
before them): lower is better. Recipe: AdamW (0.9, 0.95), wd 0.1, lr 1e-3, 200 warmup steps then cosine, batch 32,
1,500 steps (about 65 passes over the training text), clip 1, validation every 250 steps; the weights with the
lowest validation loss are tested (`RunSpec.select_on`): by the last step every model has overfit the 373 KB,
validation loss rising from step 250 – 500 on (the runs' metrics logs: GLA 1.02 at step 500, 1.39 at 1,500, training
loss 0.24; GDN 1.05 at 250, 1.73 at 1,500, training 0.13), so the last weights would measure overfitting more than
context.
`--quick`: d 64 in 2 heads, 2 layers, T = 128 … 1024, 400 steps at lr 3e-3 (minutes on a CPU).
"""

from __future__ import annotations

from linattn.experiments.experiment import Experiment
from linattn.experiments.mixers import MIXERS
from linattn.experiments.runner import RunSpec
from linattn.models import ModelConfig
from linattn.tasks import TextConfig
from linattn.tasks.text import VOCAB_SIZE
from linattn.train import TrainConfig

MIXERS_COMPARED = ("gla", "ccq-gla", "gated_deltanet", "ccq-gated_deltanet")
KLA_MIXERS = ("kla", "gated_deltanet")
LENGTHS = {False: (512, 1024, 2048, 4096), True: (128, 256, 512, 1024)}  # quick -> trained at the first


def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
    """One run per mixer: trained on the train split at the first length, validated on the val split, tested on the
    test split at every length."""
    lengths = LENGTHS[is_quick]
    size = {"d_model": 64, "n_heads": 2, "n_layers": 2, "mlp_hidden": 256} if is_quick else {}
    train = TrainConfig(
        steps=400 if is_quick else 1500,
        batch_size=16 if is_quick else 32,
        lr=3e-3 if is_quick else 1e-3,
        weight_decay=0.1,
        betas=(0.9, 0.95),
        warmup_steps=40 if is_quick else 200,
        clip=1.0,
        seed=42,
        eval_every=100 if is_quick else 250,
        checkpoint_every=400 if is_quick else 500,
    )
    T = lengths[0]
    sets = {
        "val_task": TextConfig(seq_len=T, split="val"),
        "test_task": TextConfig(seq_len=T, split="test"),
        "eval_at": tuple((L, TextConfig(seq_len=L, split="test")) for L in lengths[1:]),
        "eval_batches": 4 if is_quick else 20,
        "eval_batch_size": 16,
    }
    shape = {"vocab_size": VOCAB_SIZE, "d_model": 256, "n_layers": 4, "n_heads": 4, "mlp_hidden": 1024, **size}
    specs = []
    for mixer in mixers:
        m = MIXERS[mixer]
        model = ModelConfig(**shape, mixer=m.layer, mixer_options=m.options, positions="none",
                            max_seq_len=lengths[-1], dropout=0.1)  # fmt: skip
        specs.append(RunSpec(mixer, T, TextConfig(seq_len=T), model, train, **sets, select_on="loss"))
    return specs


EXPERIMENTS = [
    Experiment(
        "ccq-lm-length",
        "Byte-level LM on the Python manual's topics, trained at T = 512, test loss at 512 – 4096: GLA and GDN "
        "without and with CCQ",
        "seq_len",
        plan,
        MIXERS_COMPARED,
        {},  # the paper gives no numbers at this scale
        protocols=("paper",),
        metric="loss",
    ),
    Experiment(
        "kla-lm",
        "Byte-level LM on the Python manual's topics, trained at T = 512, test loss at 512 – 4096: KLA against GDN "
        "(the KLA paper's language modelling, at our scale)",
        "seq_len",
        plan,
        KLA_MIXERS,
        {},  # the paper's perplexities (8.09 vs 8.50) are at 0.4B parameters and 1B tokens (claims.py)
        protocols=("paper",),
        metric="loss",
    ),
]
