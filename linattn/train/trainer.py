"""The training loop of every experiment: AdamW with warmup + cosine, gradient clipping, bf16 autocast, evals with
early stopping, a JSONL metrics log, and atomic checkpoints from which an interrupted run resumes bit-identically.

Files in `out_dir`:
- `checkpoint.pt`: see `linattn.train.checkpoint`; written every `checkpoint_every` steps and at the end.
- `metrics.jsonl`: one JSON object a line, appended as training goes:
  `{"step", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}` every `log_every` steps (`loss` is the mean
  over those steps and ranks; `lr` and `grad_norm` are the last update's; `tokens_per_s` counts input tokens of
  all ranks, eval and checkpoint time excluded) and `{"step", "eval": {...}}` after each eval.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from linattn.extras import tqdm
from linattn.io import write_atomic
from linattn.models.lm import DecoderLM
from linattn.tasks.batch import IGNORE, Batch
from linattn.train import distributed
from linattn.train.checkpoint import CHECKPOINT_NAME, check_config, load_checkpoint, save_checkpoint
from linattn.train.config import TrainConfig
from linattn.train.distributed import DistInfo
from linattn.train.graph import GraphedStep
from linattn.train.lock import folder_lock
from linattn.train.schedule import warmup_cosine

METRICS_NAME = "metrics.jsonl"

TrainBatch = Callable[[int, torch.Generator], Batch]  # (step, data generator) -> the batch of that update
OnMetrics = Callable[[dict], None]  # a metrics-log record, as appended to metrics.jsonl
Evaluate = Callable[[nn.Module], dict[str, float]]  # model -> metrics, e.g. {"acc": 0.93, "acc/n_pairs=8": 0.71}
LossFn = Callable[[nn.Module, Batch], torch.Tensor]  # (model, batch) -> scalar loss


@dataclass
class TrainResult:
    """How a run ended. `last_eval` / `best_eval` / `best_step` are None when no eval ran."""

    step: int  # updates done
    stop_reason: str | None  # why training stopped before `config.steps`; None when it ran them all
    last_eval: dict[str, float] | None
    best_eval: dict[str, float] | None  # the eval with the highest `early_stop_metric` (the last one if unnamed)
    best_step: int | None
    wall_time_s: float  # training time summed over every invocation that worked on this run
    metrics_path: Path | None  # `out_dir/metrics.jsonl`; None without `out_dir`

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason is not None


@dataclass
class _Run:
    """The trainer's bookkeeping, stored in checkpoints as `run` (field names are `TrainResult`'s)."""

    step: int = 0
    stop_reason: str | None = None
    last_eval: dict[str, float] | None = None
    best_eval: dict[str, float] | None = None
    best_step: int | None = None
    evals_since_best: int = 0
    wall_time_s: float = 0.0

    def result(self, metrics_path: Path | None) -> TrainResult:
        return TrainResult(
            step=self.step,
            stop_reason=self.stop_reason,
            last_eval=self.last_eval,
            best_eval=self.best_eval,
            best_step=self.best_step,
            wall_time_s=self.wall_time_s,
            metrics_path=metrics_path,
        )


@dataclass
class _Window:
    """The steps since the last metrics-log line: summed loss `[]` (on the device, so adding does not sync),
    step and token counts, start time and the seconds spent on evals and checkpoints since."""

    loss: torch.Tensor
    steps: int = 0
    tokens: int = 0
    start: float = 0.0
    paused: float = 0.0

    def add(self, loss: torch.Tensor, tokens: int) -> None:
        self.loss += loss.float()
        self.steps += 1
        self.tokens += tokens

    def close(self, info: DistInfo, device: torch.device) -> dict[str, float]:
        """Mean loss and tokens/s over the window and all ranks; starts the next window."""
        totals = torch.tensor([self.loss.item(), self.steps, self.tokens], dtype=torch.float64, device=device)
        loss_sum, steps, tokens = distributed.all_reduce_sum(totals, info).tolist()
        now = time.perf_counter()
        rate = tokens / max(now - self.start - self.paused, 1e-9)
        self.loss.zero_()
        self.steps, self.tokens, self.start, self.paused = 0, 0, now, 0.0
        return {"loss": loss_sum / steps, "tokens_per_s": rate}


def token_cross_entropy(model: nn.Module, batch: Batch, **options) -> torch.Tensor:
    """Mean cross-entropy of the logits `[B, T, V]` of `model(batch.inputs)` (or element 0 of a returned tuple)
    over the supervised positions (`batch.targets != IGNORE`); computed in float32. A packed batch (with
    `cu_seqlens`) calls `model(batch.inputs, cu_seqlens=batch.cu_seqlens)`; `options`: more keywords of the call."""
    if batch.cu_seqlens is not None:
        options["cu_seqlens"] = batch.cu_seqlens
    out = model(batch.inputs, **options)
    logits = out[0] if isinstance(out, tuple) else out  # [B, T, V]
    return F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)


def lm_cross_entropy(model: nn.Module, batch: Batch) -> torch.Tensor:
    """`token_cross_entropy` of a `DecoderLM` called with `output_state=False`: the step forms no recurrent state
    (whose final value it would discard), and the mixers' kernels skip the work only a returned state needs."""
    return token_cross_entropy(model, batch, output_state=False)


def supervised_logits(model: nn.Module, batch: Batch) -> Iterator[tuple[torch.Tensor, Batch]]:
    """A causal model's (`DecoderLM`'s) logits at the supervised positions only, `[n, V]`, with the part of `batch`
    they belong to: one call per row length without the padding (`Batch.by_length`; a causal model's outputs
    before a row's padding do not depend on it), the head only where a target is (`logits_at`)."""
    for part in batch.by_length():
        yield model(part.inputs, cu_seqlens=part.cu_seqlens, logits_at=part.supervised, output_state=False)[0], part


def supervised_cross_entropy(model: nn.Module, batch: Batch) -> torch.Tensor:
    """`token_cross_entropy` for causal models that take `logits_at` (`DecoderLM`), the same loss with less work
    (`supervised_logits`): MQAR supervises 2 – 25% of its tokens, so the `[B, T, V]` logits are not made, and a
    mixture's rows run without their padding."""
    total, count = 0.0, 0
    for logits, part in supervised_logits(model, batch):
        targets = part.targets[part.supervised]  # [n]
        total = total + F.cross_entropy(logits.float(), targets, reduction="sum")
        count = count + targets.numel()
    return total / count


def build_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, decaying the ≥2-D ones (weight matrices and embeddings, as nanoGPT
    does) and not the 1-D ones (biases, norm gains, per-channel scales and gates); fused kernel on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=config.lr, betas=config.betas, fused=device.type == "cuda"
    )


def autocast_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of `TrainConfig.amp` on `device`: bf16, or None for full precision."""
    if amp == "off" or (amp == "auto" and device.type != "cuda"):
        return None
    return torch.bfloat16


def train(
    model: nn.Module,
    config: TrainConfig,
    train_batch: TrainBatch,
    evaluate: Evaluate | None,
    out_dir: str | Path | None,
    *,
    device: str | torch.device = "cpu",
    progress: bool = True,
    loss_fn: LossFn | None = None,
    sharding: str = "ddp",
    checkpoint_seconds: float | None = 300.0,
    on_metrics: OnMetrics | None = None,
    cuda_graph: bool = False,
) -> TrainResult:
    """Train `model` for `config.steps` AdamW updates on `train_batch(step, generator)`, resuming from
    `out_dir/checkpoint.pt` when it exists.

    - `train_batch(step, generator)`: the `Batch` of update `step` (0-based), `config.batch_size` rows, drawn from
      the trainer's CPU `torch.Generator` (seeded `config.seed + rank`, checkpointed with the run); or packed (with
      `cu_seqlens`): one row of `config.batch_size` windows of equal length back to back.
    - `evaluate(model)`: metrics of the (unwrapped) model, called in eval mode under `torch.no_grad()` and the
      training autocast every `config.eval_every` steps and at the end; None skips evals (and early stopping).
    - `out_dir`: where the checkpoint and the metrics log go; None writes nothing and cannot resume.
    - `device`: moves `model` there; under torchrun on CUDA each process uses `cuda:LOCAL_RANK`.
    - `progress`: a tqdm bar (loss, lr and the last eval's `early_stop_metric`, or its first metric).
    - `loss_fn(model, batch)`: the scalar loss; default `lm_cross_entropy` for a `DecoderLM` (no state formed), else
      `token_cross_entropy`.
    - `sharding`: under torchrun, `"ddp"` (a whole model a rank) or `"fsdp"` (parameters, gradients and optimizer
      state sharded over the ranks; the model stays sharded after training, so every rank calls it together;
      `linattn.train.distributed`). A checkpoint resumes under the sharding that wrote it.
    - `checkpoint_seconds`: a checkpoint also whenever this much training time has passed since the last one
      (and 50 times what the last one took to save: at most 2% of the time goes to saving), besides every
      `config.checkpoint_every` steps and at the end, so that an interrupted run loses about that much (the
      clock is read at logging steps); None: by steps only. Where a checkpoint falls does not change the result
      (resume is exact).
    - `on_metrics(record)`: called on rank 0 with each record appended to the metrics log (e.g. a TensorBoard
      writer, `linattn.train.tensorboard`); a resumed run passes the steps after its checkpoint again.
    - `cuda_graph`: replay each batch shape's forward + backward from a CUDA graph (`linattn.train.graph`): for
      small models, whose eager step is the host's launches. One CUDA process, `loss_fn=supervised_cross_entropy`
      (the graph replays its value) and a `train_batch` drawn on the host; packed batches run eagerly, as do
      shapes past the first few (which ones, a resume can change: then the resume is exact to rounding only).

    A non-finite loss or gradient stops the run without applying that update (`stop_reason` "diverged: …"), so
    `model` keeps its last finite weights: a diverging configuration (the KLA paper's ablation) is a result, not a
    crash. A run whose checkpoint is finished (all steps done, or stopped early) loads the final weights into
    `model` and returns its result without training. Launched by torchrun (`WORLD_SIZE > 1`), the model is wrapped in
    DDP (or sharded, `sharding`), rank `r` draws its own data stream, and only rank 0 writes files; every rank
    must get the same arguments. The ranks' gradients are averaged, so each rank's loss (the mean over its own
    targets) weighs the same: batches whose rows carry different numbers of targets (a task mixture) train as one
    process with the global batch only up to that weighting.

    While it trains, `out_dir` is locked (`linattn.train.lock`): a second process training into it gets an error
    naming the first.

    Example: `train(model, TrainConfig(steps=500, warmup_steps=50), task_batch, evaluate, Path("runs/x"))`.
    """
    writes = out_dir is not None and distributed.env_info().is_main  # only rank 0 writes files
    with folder_lock(out_dir) if writes else nullcontext():
        return _train(
            model, config, train_batch, evaluate, out_dir,
            device=device, progress=progress, loss_fn=loss_fn, sharding=sharding,
            checkpoint_seconds=checkpoint_seconds, on_metrics=on_metrics, cuda_graph=cuda_graph,
        )  # fmt: skip


def _train(
    model: nn.Module,
    config: TrainConfig,
    train_batch: TrainBatch,
    evaluate: Evaluate | None,
    out_dir: str | Path | None,
    *,
    device: str | torch.device,
    progress: bool,
    loss_fn: LossFn | None,
    sharding: str,
    checkpoint_seconds: float | None,
    on_metrics: OnMetrics | None,
    cuda_graph: bool,
) -> TrainResult:
    """`train`, its output folder locked."""
    if checkpoint_seconds is not None and not checkpoint_seconds > 0:
        raise ValueError(f"checkpoint_seconds: expected a positive number of seconds or None, got {checkpoint_seconds}")
    if config.early_stop_metric is not None and evaluate is None:
        raise ValueError(f"config.early_stop_metric={config.early_stop_metric!r} needs an evaluate function, got None")
    if sharding not in distributed.SHARDINGS:
        raise ValueError(f"sharding: expected one of {distributed.SHARDINGS}, got {sharding!r}")
    info, device = distributed.init(device)
    if cuda_graph and (device.type != "cuda" or info.enabled):
        where = f"{info.world_size} processes" if info.enabled else f"device {device}"
        raise ValueError(f"cuda_graph: needs one process on a CUDA device, got {where}")
    if cuda_graph and loss_fn is not supervised_cross_entropy:
        name = "None (the default)" if loss_fn is None else getattr(loss_fn, "__name__", loss_fn)
        raise ValueError(f"cuda_graph: replays supervised_cross_entropy, got loss_fn={name}")
    sharding = sharding if info.enabled else "ddp"  # one process: nothing to spread, a plain checkpoint
    loss_fn = loss_fn or (lm_cross_entropy if isinstance(model, DecoderLM) else token_cross_entropy)
    model.to(device)
    data_rng = torch.Generator().manual_seed(config.seed + info.rank)
    window = _Window(torch.zeros((), device=device))
    run = _Run()

    out_dir = Path(out_dir) if out_dir is not None else None
    checkpoint_path = out_dir / CHECKPOINT_NAME if out_dir is not None else None
    metrics_path = out_dir / METRICS_NAME if out_dir is not None else None
    checkpoint = None
    if checkpoint_path is not None and checkpoint_path.exists():
        checkpoint = load_checkpoint(checkpoint_path)
        check_config(checkpoint["config"], config, checkpoint_path)
        if checkpoint["world_size"] != info.world_size:
            raise ValueError(
                f"cannot resume {checkpoint_path}: written by {checkpoint['world_size']} processes, "
                f"resumed by {info.world_size}"
            )
        if checkpoint.get("sharding", "ddp") != sharding:
            raise ValueError(
                f"cannot resume {checkpoint_path}: written with sharding={checkpoint.get('sharding', 'ddp')!r}, "
                f"resumed with {sharding!r}"
            )
        model.load_state_dict(checkpoint["model"])
        run = _Run(**checkpoint["run"])
        if info.is_main and "metrics_log" in checkpoint:
            write_atomic(metrics_path, checkpoint["metrics_log"])
        if run.step >= config.steps or run.stop_reason is not None:
            return run.result(metrics_path)
    if metrics_path is not None and info.is_main:
        _truncate_metrics(metrics_path, run.step)

    ddp_model = distributed.wrap_model(model, info, device, sharding)
    optimizer = build_optimizer(model, config, device)  # after wrapping: a sharded model's parameters are new
    schedule = partial(
        warmup_cosine, warmup_steps=config.warmup_steps, total_steps=config.steps, min_ratio=config.min_lr_ratio
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    if checkpoint is not None:
        distributed.load_optimizer_state(model, optimizer, checkpoint["optimizer"], info, sharding)
        scheduler.load_state_dict(checkpoint["scheduler"])
        _restore_rank_state(checkpoint["ranks"][info.rank], data_rng, window, device)
    amp = autocast_dtype(config.amp, device)
    autocast = partial(torch.autocast, device.type, dtype=amp, enabled=amp is not None)
    graphed = GraphedStep(model, autocast, device) if cuda_graph else None
    started, wall_before = time.perf_counter(), run.wall_time_s
    last_saved, save_cost = started, 0.0
    window.start = started
    postfix: dict[str, str] = {}
    model.train()
    bar = tqdm(total=config.steps, initial=run.step, desc="train", unit="step", disable=not (progress and info.is_main))
    with bar:
        while run.step < config.steps and run.stop_reason is None:
            batch = train_batch(run.step, data_rng)
            _check_batch_size(batch, config.batch_size, run.step)
            loss = graphed(batch) if graphed is not None else None
            if loss is None:
                batch = batch.to(device)
                with autocast():
                    loss = loss_fn(ddp_model, batch)
                loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip or math.inf)
            lr = optimizer.param_groups[0]["lr"]  # the rate of this update
            # a diverged run (a non-finite loss makes a non-finite norm) stops with its last finite weights: the
            # update is not applied, and the reason is kept (one host sync a step, as a loss scaler's check)
            if torch.isfinite(distributed.local(grad_norm)):
                optimizer.step()
                scheduler.step()
                run.step += 1
                bar.update()
            else:
                run.stop_reason = f"diverged: non-finite loss or gradient at update {run.step + 1}, not applied"
            optimizer.zero_grad(set_to_none=True)
            window.add(loss.detach(), batch.inputs.numel())

            metrics = None
            if (
                evaluate is not None
                and run.stop_reason is None
                and (run.step == config.steps or (config.eval_every and run.step % config.eval_every == 0))
            ):
                paused_at = time.perf_counter()
                metrics = _evaluate(model, evaluate, autocast, info)
                _update_best(run, metrics, config)
                window.paused += time.perf_counter() - paused_at
            if run.step % config.log_every == 0 or run.step == config.steps or run.stop_reason is not None:
                grad_norm = distributed.local(grad_norm).item()
                record = {"step": run.step, **window.close(info, device), "lr": lr, "grad_norm": grad_norm}
                record["elapsed_s"] = wall_before + time.perf_counter() - started
                postfix.update(loss=f"{record['loss']:.4f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.3g}")
                if metrics_path is not None and info.is_main:
                    _append_metrics(metrics_path, record)
                if on_metrics is not None and info.is_main:
                    on_metrics(record)
            if metrics is not None:
                name = config.early_stop_metric or next(iter(metrics), None)
                if name is not None:
                    postfix[name] = f"{metrics[name]:.4f}"
                if metrics_path is not None and info.is_main:
                    _append_metrics(metrics_path, {"step": run.step, "eval": metrics})
                if on_metrics is not None and info.is_main:
                    on_metrics({"step": run.step, "eval": metrics})
            bar.set_postfix(postfix, refresh=False)
            run.wall_time_s = wall_before + time.perf_counter() - started

            if checkpoint_path is not None and (
                run.step == config.steps
                or run.stop_reason is not None
                or (config.checkpoint_every and run.step % config.checkpoint_every == 0)
                # the clock is read (one broadcast under DDP) at log steps only, off the hot path
                or (run.step % config.log_every == 0 and _time_to_save(checkpoint_seconds, last_saved, save_cost, info))
            ):
                paused_at = time.perf_counter()
                ranks = distributed.gather_objects(_rank_state(data_rng, window, device), info)
                model_state, optimizer_state = distributed.whole_state_dicts(model, optimizer, info, sharding)
                if info.is_main:
                    checkpoint = {
                        "config": dataclasses.asdict(config),
                        "model": model_state,
                        "optimizer": optimizer_state,
                        "scheduler": scheduler.state_dict(),
                        "run": dataclasses.asdict(run),
                        "world_size": info.world_size,
                        "sharding": sharding,
                        "ranks": ranks,
                        # the log so far travels with the weights: a resumed run restores it whole even where the
                        # folder lost it (a run resumed on another machine has only what was copied there)
                        "metrics_log": metrics_path.read_text() if metrics_path.exists() else "",
                    }
                    save_checkpoint(checkpoint_path, checkpoint)
                distributed.barrier(info)  # no rank may go on to read an older checkpoint than this one
                last_saved = time.perf_counter()
                save_cost = last_saved - paused_at
                window.paused += save_cost
    return run.result(metrics_path)


def _check_batch_size(batch: Batch, batch_size: int, step: int) -> None:
    """`batch_size` rows, or packed: one row of `batch_size` windows of one length."""
    shape = tuple(batch.inputs.shape)
    if batch.cu_seqlens is None and shape[0] != batch_size:
        raise ValueError(
            f"train_batch(step={step}) returned inputs of shape {shape}; expected config.batch_size={batch_size} rows"
        )
    if batch.cu_seqlens is not None and (len(shape) != 2 or shape[0] != 1 or shape[1] % batch_size):
        raise ValueError(
            f"train_batch(step={step}) returned packed inputs of shape {shape}; expected one row of "
            f"config.batch_size={batch_size} windows, [1, {batch_size}·T]"
        )


def _time_to_save(seconds: float | None, last_saved: float, save_cost: float, info: DistInfo) -> bool:
    """Whether `seconds` have passed since the last checkpoint, and at least 50 times what that one took (saving a
    large model then costs at most 2% of the run), by rank 0's clock (every rank must agree: saving is collective
    under DDP and FSDP)."""
    if seconds is None:
        return False
    return distributed.broadcast_from_main(time.perf_counter() - last_saved >= max(seconds, 50 * save_cost), info)


def _rank_state(data_rng: torch.Generator, window: _Window, device: torch.device) -> dict:
    """What differs between ranks and must survive a restart: RNG states and the open logging window."""
    return {
        "data_rng": data_rng.get_state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "window_loss": window.loss.item(),
        "window_steps": window.steps,
    }


def _restore_rank_state(state: dict, data_rng: torch.Generator, window: _Window, device: torch.device) -> None:
    data_rng.set_state(state["data_rng"])
    torch.set_rng_state(state["torch_rng"])
    if device.type == "cuda" and state["cuda_rng"] is not None:
        torch.cuda.set_rng_state(state["cuda_rng"], device)
    window.loss, window.steps = torch.tensor(state["window_loss"], device=device), state["window_steps"]


def _evaluate(model: nn.Module, evaluate: Evaluate, autocast: Callable, info: DistInfo) -> dict[str, float]:
    """Rank 0's `evaluate(model)` (every rank computes it, so none waits on a collective meanwhile) as floats."""
    model.eval()
    with torch.no_grad(), autocast():
        metrics = {name: float(value) for name, value in evaluate(model).items()}
    model.train()
    return distributed.broadcast_from_main(metrics, info)


def _update_best(run: _Run, metrics: dict[str, float], config: TrainConfig) -> None:
    """Record an eval: the best one so far, the patience count, and whether to stop (only before the last step)."""
    run.last_eval, name = metrics, config.early_stop_metric
    if name is None:
        run.best_eval, run.best_step = metrics, run.step
        return
    if name not in metrics:
        raise KeyError(f"config.early_stop_metric={name!r} is not among the eval metrics {sorted(metrics)}")
    value = metrics[name]
    best = None if run.best_eval is None else run.best_eval[name]
    if best is None or math.isnan(best) or value > best:  # a NaN eval (nothing supervised) is never the best
        run.best_eval, run.best_step, run.evals_since_best = metrics, run.step, 0
    else:
        run.evals_since_best += 1
    if run.step >= config.steps:
        return
    if value >= config.early_stop_threshold:
        run.stop_reason = f"{name}={value:.4g} >= early_stop_threshold={config.early_stop_threshold:g}"
    elif config.patience and run.evals_since_best >= config.patience:
        best = run.best_eval[name]
        run.stop_reason = f"{name} not above its best {best:.4g} (step {run.best_step}) for {config.patience} evals"


def _append_metrics(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def _truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics-log lines of steps ≤ `step`, the checkpoint being resumed: the resumed run logs the later
    steps again. Also drops a line torn by a crash mid-write. A fresh run (`step = 0`) starts an empty log."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record["step"] <= step:
            kept.append(line + "\n")
    write_atomic(path, "".join(kept))
