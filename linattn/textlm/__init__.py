"""A language model trained on your own text (`linattn train`, docs/train.md): presets of model, training and data
settings (`presets`), `--set key=value` overrides (`settings`), the run folder and the pipeline (`run`), and the
validation loss (`evaluate`).

Example:
    >>> run = plan_run("notes/", tokenizer="bytes", preset="tiny", mixer="kla", settings=["lr=1e-3"])
    >>> result = train_text(run, "runs/notes")
    >>> run, model, tokenizer = load_run("runs/notes")
"""

from linattn.textlm.evaluate import validation_loss
from linattn.textlm.presets import PRESETS, TextPreset, text_preset
from linattn.textlm.run import TextRun, load_run, plan_run, read_run, resolve_run, train_text
from linattn.textlm.settings import apply_settings

__all__ = [
    "PRESETS",
    "TextPreset",
    "TextRun",
    "apply_settings",
    "load_run",
    "plan_run",
    "read_run",
    "resolve_run",
    "text_preset",
    "train_text",
    "validation_loss",
]
