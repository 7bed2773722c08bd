"""A language model trained on your own text: a run's settings, its folder, and the pipeline from a corpus to a
trained `DecoderLM` (`linattn train`).

Files in a run folder:
- `run.json`: the run's settings (`TextRun`): corpus (and its documents' fingerprint), tokenizer, preset, and its
  model, training and data configs;
- `tokenizer.json`: a copy of the tokenizer file (none for `bytes`), so that the folder is self-contained;
- `cache/`: the tokenised train and val splits (`linattn.data.cache`), unless the cache is put elsewhere;
- `checkpoint.pt`, `metrics.jsonl`: the trainer's (`linattn.train.trainer`; evals log `val_loss`, `val_ppl`);
- `tensorboard/`: the TensorBoard log, when the `tensorboard` package is installed.

Under torchrun every process trains on the same run folder: process 0 reads the corpus and makes the cache while
the others wait, then each opens the cache and draws its own windows (the trainer seeds its data generator
`seed + rank`), so the ranks see different batches of one corpus.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from linattn.data.cache import cached_split, open_split
from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.data.packing import PackedText
from linattn.data.tokenizer import ByteTokenizer, FileTokenizer, Tokenizer, load_tokenizer
from linattn.io import write_atomic
from linattn.models.config import ModelConfig
from linattn.models.lm import DecoderLM
from linattn.textlm.evaluate import validation_loss
from linattn.textlm.presets import text_preset, warmup_steps
from linattn.textlm.settings import apply_settings
from linattn.train import distributed
from linattn.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from linattn.train.config import TrainConfig
from linattn.train.tensorboard import open_tensorboard
from linattn.train.trainer import TrainResult, train

RUN_NAME = "run.json"
TOKENIZER_NAME = "tokenizer.json"
CACHE_NAME = "cache"
TRAINED_SPLITS = ("train", "val")  # tokenised for a run; `test` stays untouched


@dataclass(frozen=True)
class TextRun:
    """What decides a text run's result, kept in `run.json`."""

    data: str  # the corpus, FILE | DIR | GLOB, as an absolute path or pattern
    tokenizer: str  # "bytes", or the absolute path of the tokenizer file the run started from
    tokenizer_fingerprint: str  # "bytes", or that file's SHA-256
    preset: str
    model: ModelConfig
    train: TrainConfig
    data_config: DataConfig
    # SHA-256 of the train and val documents (names, sizes, hashes) when the run first read them: a resumed run
    # refuses a corpus changed since, which would train it on other text than it began on
    corpus_fingerprint: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TextRun:
        fields = json.loads(text)
        configs = {"model": ModelConfig, "train": TrainConfig, "data_config": DataConfig}
        return cls(**{k: configs[k](**v) if k in configs else v for k, v in fields.items()})


def plan_run(
    data: str | os.PathLike,
    tokenizer: str = "bytes",
    preset: str = "tiny",
    mixer: str | None = None,
    settings: list[str] | tuple[str, ...] = (),
    steps: int | None = None,
) -> TextRun:
    """The settings of a new run: the preset, its vocabulary the tokenizer's, then `mixer` (default `"kla"`),
    `steps` (with the presets' 5% warmup), and last the `--set` `settings`.

    Example: `plan_run("notes/", "bytes", "tiny", "kla", ["lr=1e-3"], steps=100)`.
    """
    tok = load_tokenizer(tokenizer)
    recipe = text_preset(preset)
    model = recipe.model.replace(vocab_size=tok.vocab_size, mixer=mixer or "kla")
    train_config = recipe.train
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"--steps: expected a positive int, got {steps!r}")
        train_config = dataclasses.replace(train_config, steps=steps, warmup_steps=warmup_steps(steps))
    if mixer is not None and any(s.partition("=")[0].strip() in ("mixer", "model.mixer") for s in settings):
        raise ValueError(f"--set mixer=…: the mixer is --mixer's ({mixer!r}); name it once")
    model, train_config, data_config = apply_settings((model, train_config, recipe.data), list(settings))
    if train_config.early_stop_metric is not None:  # it stops at a high value; val_loss and val_ppl fall
        raise ValueError(
            f"--set early_stop_metric={train_config.early_stop_metric}: a text run's evals (val_loss, val_ppl) are "
            "lower-is-better and it trains all its steps; leave it unset"
        )
    if model.vocab_size < tok.vocab_size:
        raise ValueError(f"vocab_size: expected at least the tokenizer's {tok.vocab_size} ids, got {model.vocab_size}")
    if model.positions == "learned" and model.max_seq_len < data_config.seq_len:
        raise ValueError(
            f"max_seq_len: expected >= seq_len = {data_config.seq_len} with learned positions, got {model.max_seq_len}"
        )
    return TextRun(
        data=os.path.abspath(data),
        tokenizer=tok.name if isinstance(tok, ByteTokenizer) else os.path.abspath(tok.path),
        tokenizer_fingerprint=tok.fingerprint,
        preset=preset,
        model=model,
        train=train_config,
        data_config=data_config,
    )


def resolve_run(
    out_dir: str | os.PathLike,
    *,
    resume: bool,
    data: str | None = None,
    tokenizer: str | None = None,
    preset: str | None = None,
    mixer: str | None = None,
    settings: list[str] | tuple[str, ...] = (),
    steps: int | None = None,
) -> TextRun:
    """The run to train into `out_dir`: a new one (`plan_run`; an error if the folder holds a run), or with
    `resume` the folder's own, where every option given must agree with it (those left out are taken from it)."""
    path = Path(out_dir) / RUN_NAME
    if not resume:
        if path.exists():
            raise ValueError(f"out: {out_dir} holds a run already ({path}); add --resume to continue it, or train "
                             "into another --out")  # fmt: skip
        if data is None:
            raise ValueError("data: expected a corpus, --data FILE|DIR|GLOB")
        return plan_run(data, tokenizer or "bytes", preset or "tiny", mixer, settings, steps)
    if not path.exists():
        raise ValueError(f"resume: no run to resume in {out_dir} (no {RUN_NAME})")
    run = read_run(out_dir)
    given = {
        "data": (data, lambda: os.path.abspath(data) == run.data, run.data),
        "tokenizer": (tokenizer, lambda: load_tokenizer(tokenizer).fingerprint == run.tokenizer_fingerprint,
                      run.tokenizer),
        "preset": (preset, lambda: preset == run.preset, run.preset),
        "mixer": (mixer, lambda: mixer == run.model.mixer, run.model.mixer),
        "steps": (steps, lambda: steps == run.train.steps, run.train.steps),
    }  # fmt: skip
    for option, (value, agrees, stored) in given.items():
        if value is not None and not agrees():
            raise ValueError(f"--{option} {value}: the run in {out_dir} has {stored!r}; a resumed run keeps its "
                             "settings (leave the option out, or train into another --out)")  # fmt: skip
    configs = (run.model, run.train, run.data_config)
    for setting in settings:
        if apply_settings(configs, [setting]) != configs:
            raise ValueError(f"--set {setting}: differs from the run in {out_dir} ({path}); a resumed run keeps its "
                             "settings")  # fmt: skip
    return run


def read_run(run_dir: str | os.PathLike) -> TextRun:
    """The settings of the run in `run_dir` (its `run.json`)."""
    path = Path(run_dir) / RUN_NAME
    try:
        return TextRun.from_json(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{run_dir}: not a run folder of `linattn train` (no {RUN_NAME})") from None
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{path}: not a readable run description ({e})") from None


def run_tokenizer(run: TextRun, run_dir: str | os.PathLike) -> Tokenizer:
    """The run's tokenizer: `bytes`, or its copy in the run folder (the file it started from before the copy)."""
    if run.tokenizer == ByteTokenizer.name:
        return ByteTokenizer()
    copy = Path(run_dir) / TOKENIZER_NAME
    tok = FileTokenizer(copy if copy.exists() else run.tokenizer)
    if tok.fingerprint != run.tokenizer_fingerprint:
        raise ValueError(f"tokenizer: {tok.path} is not the file the run was started with ({run_dir}/{RUN_NAME})")
    return tok


def train_text(
    run: TextRun,
    out_dir: str | os.PathLike,
    *,
    cache_dir: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    progress: bool = True,
    sharding: str = "ddp",
    tensorboard: bool = True,
    prepare_only: bool = False,
) -> TrainResult | None:
    """Train (or resume) `run` into `out_dir`: write its settings, tokenise its corpus into the cache (default
    `out_dir/cache`, reused while corpus and tokenizer stay the same), train a `DecoderLM` on packed windows of
    the train split with evals on the val split. With `prepare_only` it stops after the cache (None): a large
    corpus tokenised on one process before a torchrun launch, whose process group would time out waiting.

    Example: `train_text(plan_run("notes/", steps=100), "runs/notes", device="cuda")`.
    """
    out_dir = Path(out_dir)
    cache_dir = Path(cache_dir) if cache_dir is not None else out_dir / CACHE_NAME
    info, _ = distributed.init(device)
    failure = None
    if info.is_main:
        try:
            _prepare(run, out_dir, cache_dir, progress=progress, write_run=not prepare_only)
        except (ValueError, OSError) as e:
            failure = e
    message = distributed.broadcast_from_main(None if failure is None else str(failure), info)
    if failure is not None:
        raise failure
    if message is not None:
        raise ValueError(f"process 0 could not prepare the data: {message}")
    if prepare_only:
        return None

    train_data, val_data = (PackedText(open_split(cache_dir, split)) for split in TRAINED_SPLITS)
    B, T, eval_tokens = run.train.batch_size, run.data_config.seq_len, run.data_config.eval_tokens

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        return validation_loss(model, val_data.eval_batches(B, T, eval_tokens))

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(run.train.seed)
        model = DecoderLM(run.model)
    log = open_tensorboard(out_dir / "tensorboard") if tensorboard and info.is_main else None
    try:
        return train(
            model, run.train, lambda step, generator: train_data.batch(B, T, generator),
            evaluate if len(val_data) > 1 else None, out_dir,  # a target needs two tokens
            device=device, progress=progress, sharding=sharding, on_metrics=log,
        )  # fmt: skip
    finally:
        if log is not None:
            log.close()


def _prepare(run: TextRun, out_dir: Path, cache_dir: Path, *, progress: bool, write_run: bool) -> None:
    """Process 0's part: the train and val splits tokenised into the cache, then the run's files. Written last, so
    that a corpus that cannot train leaves no run behind that the next command would refuse to start over."""
    tok = run_tokenizer(run, out_dir)
    corpus = read_corpus(run.data, run.data_config, progress=progress)
    documents = corpus.split(run.data_config)
    described = {split: [d.describe() for d in documents[split]] for split in TRAINED_SPLITS}
    fingerprint = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
    began_on = read_run(out_dir).corpus_fingerprint if (out_dir / RUN_NAME).exists() else run.corpus_fingerprint
    if began_on not in (None, fingerprint):
        raise ValueError(
            f"data: {run.data} changed since the run in {out_dir} began (its train / val documents differ): "
            "resumed, it would go on training on other text; restore the corpus, or train into another --out"
        )
    run = dataclasses.replace(run, corpus_fingerprint=fingerprint)
    for split in TRAINED_SPLITS:
        tokens = cached_split(cache_dir, split, documents[split], tok, progress=progress).tokens
        if split == "train" and len(tokens) <= run.data_config.seq_len:
            raise ValueError(
                f"seq_len: the train split of {run.data} has {len(tokens)} tokens, too few for one window of "
                f"seq_len + 1 = {run.data_config.seq_len + 1}; give more text or --set seq_len=…"
            )
    if write_run:
        write_atomic(out_dir / RUN_NAME, run.to_json())
        if isinstance(tok, FileTokenizer) and tok.path != out_dir / TOKENIZER_NAME:
            write_atomic(out_dir / TOKENIZER_NAME, tok.path.read_bytes())


def load_run(run_dir: str | os.PathLike) -> tuple[TextRun, DecoderLM, Tokenizer]:
    """A run's settings, its model with the weights of its latest checkpoint (in eval mode, on the CPU) and its
    tokenizer.

    Example: `run, model, tokenizer = load_run("runs/notes")`.
    """
    run = read_run(run_dir)
    path = Path(run_dir) / CHECKPOINT_NAME
    if not path.exists():
        raise ValueError(f"{run_dir}: no {CHECKPOINT_NAME} yet; train the run first")
    model = DecoderLM(run.model)
    model.load_state_dict(load_checkpoint(path)["model"])
    return run, model.eval(), run_tokenizer(run, run_dir)
