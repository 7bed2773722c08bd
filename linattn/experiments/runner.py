"""Training runs as data: a `RunSpec` is one (mixer, setting, learning rate, replicate) model trained and evaluated.

`run_one` trains a fresh model on a task, resuming from its run folder, evaluates it on a held-out test set of that
task (and, for length extrapolation, on test sets of other tasks, `eval_at`), and writes the run's `result.json`
(a run already in its experiment's archive, `archive.py`, is read back from there); `run_all` runs many specs, in
this process or as concurrent worker processes (`jobs > 1`: independent small trainings share one GPU or many CPU
cores better than they run one after another).

A run another experiment already finished is not trained again: given the results root, `run_one` looks there for
a finished run of the same training (`training_key`: task, model, training config, validation and test sets) whose
tests at other lengths include this spec's, and copies its record and metrics (`reused_from` names it). KLA's
ablation and the CCQ experiments share their GDN and KLA runs with `kla-mqar` and `kla-sniah` so.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import torch

from linattn.bench.environment import describe, mps_running
from linattn.experiments.archive import (
    ARCHIVE_NAME,
    RESULT_NAME,
    FinishedRun,
    finished_under,
    read_archive,
    read_folder,
)
from linattn.extras import tqdm
from linattn.io import write_atomic
from linattn.models import DecoderLM, ModelConfig
from linattn.tasks import AccuracyMeter, Batch, generate, seq_len_of
from linattn.tasks.corpus import data_root
from linattn.train import TrainConfig, supervised_cross_entropy, supervised_logits, train
from linattn.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from linattn.train.trainer import METRICS_NAME

VAL_SEED_OFFSET, TEST_SEED_OFFSET = 1_000, 2_000  # eval sets are drawn from their own seeds
BEST_NAME = "best.pt"  # a run's weights at its best validation (`RunSpec.select_on`)
# a checkpoint this often (besides the recipe's steps, which in a quick run may fall at its end only), so that
# Ctrl-C or a job's time limit costs about a minute of a run; the trainer spaces them further for a model whose
# save takes longer than a second (lm-compare's 0.1B-parameter one, 1.4 GB with AdamW's moments)
CHECKPOINT_SECONDS = 60.0


@dataclass(frozen=True)
class RunSpec:
    mixer: str  # display name (see `mixers.MIXERS`)
    x: int  # the swept setting: n_pairs, or seq_len
    task: object  # a task config of `linattn.tasks`
    model: ModelConfig
    train: TrainConfig
    eval_batches: int = 20
    eval_batch_size: int = 32
    eval_at: tuple[tuple[int, object], ...] = ()  # (setting, task): test sets beyond the trained task's, e.g. longer
    # (name, task): other tests of the trained model, reported apart from the metric's table (a passkey's recall)
    probe_at: tuple[tuple[str, object], ...] = ()
    # the validation and test sets' tasks where they are not the trained one's (a corpus's held-out splits)
    val_task: object | None = None
    test_task: object | None = None
    # another draw of the initial weights and the training batches (`train.seed + replicate`); the validation and
    # test sets stay those of `train.seed`, so that replicates are scored on the same examples
    replicate: int = 0
    # test the weights of the evaluation with the best validation value of this metric (the lowest "loss", the highest
    # "acc"), not the last
    select_on: str | None = None

    @property
    def id(self) -> str:
        return f"{self.mixer}-x{self.x}-lr{self.train.lr:g}" + (f"-s{self.replicate}" if self.replicate else "")

    @property
    def training(self) -> TrainConfig:
        """The training config this replicate runs: `train` with its seed moved by `replicate`."""
        return replace(self.train, seed=self.train.seed + self.replicate)


def _digest(value: object) -> str:
    """A short hex digest of `repr(value)` (a dataclass's repr names its class and every field)."""
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def training_key(spec: RunSpec) -> str:
    """What makes two specs the same run: the trained task, the model, the training config, the validation and test
    sets, the replicate and the model selection, not the display name, the swept setting's value or `eval_at`. The
    last two, unset, leave the digest they had before they existed, so that finished runs keep their keys."""
    sets = (spec.task, spec.model, spec.train, spec.eval_batches, spec.eval_batch_size, spec.val_task, spec.test_task)
    later = tuple((n, v) for n, v in (("replicate", spec.replicate), ("select_on", spec.select_on)) if v)
    return _digest((*sets, *later))


def _tests_at(spec: RunSpec) -> dict[str, str]:
    """`eval_at`'s tasks by setting, and `probe_at`'s by `probe:` and name, as digests."""
    return {str(x): _digest(task) for x, task in spec.eval_at} | {
        f"probe:{name}": _digest(task) for name, task in spec.probe_at
    }


def find_same_run(root: Path, spec: RunSpec, own: Path) -> FinishedRun | None:
    """A finished run under `root` (in an experiment's archive or working folders; not `own`, not itself a copy)
    that trained what `spec` trains and was tested on at least `spec.eval_at`'s tasks, or None."""
    key, wanted, own = training_key(spec), _tests_at(spec).items(), Path(own).resolve()
    for run in finished_under(root):
        record = run.record
        if (Path(root) / run.where).resolve() == own:
            continue
        if record.get("key") == key and "reused_from" not in record and wanted <= record.get("tests_at", {}).items():
            return run
    return None


def _reuse(spec: RunSpec, source: FinishedRun, run_dir: Path) -> dict:
    """`spec`'s record from the finished run `source`: its training and tests, under `spec`'s name, written to
    `run_dir` with its metrics log."""
    record = dict(source.record)
    mine = _tests_at(spec)
    record.update(id=spec.id, mixer=spec.mixer, x=spec.x, replicate=spec.replicate, tests_at=mine)
    record["reused_from"] = source.where
    if spec.eval_at:
        record["test_at"] = {str(x): record["test_at"][str(x)] for x, _ in spec.eval_at}
    else:
        record.pop("test_at", None)
    if spec.probe_at:
        record["probes"] = {name: record["probes"][name] for name, _ in spec.probe_at}
    else:
        record.pop("probes", None)
    run_dir.mkdir(parents=True, exist_ok=True)
    if source.metrics:
        write_atomic(run_dir / METRICS_NAME, "".join(json.dumps(row) + "\n" for row in source.metrics))
    write_atomic(run_dir / RESULT_NAME, json.dumps(record, indent=2))
    return record


def _read_back(record: dict, spec: RunSpec, where: Path) -> dict:
    """A finished run's record, checked to be `spec`'s training (`training_key`)."""
    key = training_key(spec)
    # a record from before runs had keys has none, and is read back as it is
    if record.get("key", key) != key:
        task = record.get("task", {})
        trained_on, here = task.get("fingerprint"), getattr(spec.task, "fingerprint", None)
        if trained_on != here:
            cache = data_root() / task.get("corpus", "")
            raise ValueError(
                f"{where}: its result was trained on another tokenised corpus (fingerprint {trained_on}, this "
                f"machine's {here}: other sources, versions or tokenizer); copy the cache it trained on (with its "
                f"tokenizer.json beside it) to {cache} (LINATTN_DATA sets the root), or remove the result to train "
                "the run again on this one"
            )
        raise ValueError(
            f"{where}: its result is of another training (key {record['key']}, this run's {key}: the task, model or "
            "training config changed); remove it to train the run again"
        )
    return record


LOWER_IS_BETTER = ("loss",)  # metrics a run selects on by their lowest value; the others by their highest


class BestWeights:
    """The weights of the evaluation with the best `metric` so far (`RunSpec.select_on`: the lowest loss, the highest
    accuracy), in `path`, written atomically; a resumed run reads it back (its evaluations, bit-identical to the first
    ones, do not replace it)."""

    def __init__(self, path: Path, metric: str):
        self.path, self.metric = path, metric
        self.metrics = load_checkpoint(path)["metrics"] if path.exists() else None

    def offer(self, model: torch.nn.Module, metrics: dict[str, float]) -> None:
        """Keep `model`'s weights if `metrics` is the best `metric` yet (a NaN never is)."""
        value = metrics[self.metric]
        if math.isnan(value):
            return
        if self.metrics is not None:
            best = self.metrics[self.metric]
            if (value >= best) if self.metric in LOWER_IS_BETTER else (value <= best):
                return
        self.metrics = metrics
        weights = {name: t.detach().cpu() for name, t in model.state_dict().items()}
        save_checkpoint(self.path, {"model": weights, "metrics": metrics})

    def restore(self, model: torch.nn.Module) -> dict[str, float] | None:
        """Load the kept weights into `model`; their validation metrics (None, and the model left, if none kept)."""
        if self.metrics is not None:
            model.load_state_dict(load_checkpoint(self.path)["model"])
        return self.metrics


def eval_set(spec: RunSpec, seed: int, task: object | None = None) -> list[Batch]:
    """`spec.eval_batches` batches of `task` (the trained task by default), drawn from `seed` alone."""
    gen = torch.Generator().manual_seed(seed)
    task = spec.task if task is None else task
    return [generate(task, spec.eval_batch_size, gen) for _ in range(spec.eval_batches)]


# tokens evaluated at once: a language model's logits at 4 × 16K positions and 16K ids are 4 GiB in float32, too
# much beside eight other models on one GPU (`linattn run lm-compare --protocol short --jobs 9`)
EVAL_TOKENS = 16384


@torch.no_grad()
def evaluate_on(model: torch.nn.Module, batches: list[Batch], device: torch.device) -> dict[str, float]:
    """Accuracy of `model` (a `DecoderLM`, its logits at the supervised positions only) over `batches` (eval mode,
    bf16 autocast on CUDA as in training), `EVAL_TOKENS` tokens of a batch at a time."""
    was_training = model.training
    model.eval()
    meter = AccuracyMeter()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for batch in batches:
            for rows in batch.to(device).row_groups(EVAL_TOKENS):
                for logits, part in supervised_logits(model, rows):  # a test mix's rows without padding
                    meter.update(logits.float(), part)  # [n, V]
    model.train(was_training)
    return meter.compute()


class NotStarted(RuntimeError):
    """A run that was neither finished nor begun when its command's start-by time (`time.time()`) had passed."""


def run_one(
    spec: RunSpec,
    run_dir: Path,
    device: str = "cpu",
    progress: bool = True,
    reuse_root: Path | None = None,
    start_by: float | None = None,
) -> dict:
    """Train `spec`'s model (resuming from `run_dir`; its loss at the supervised positions only,
    `supervised_cross_entropy`, its steps replayed from CUDA graphs on a GPU), evaluate it on a held-out test set,
    write `result.json`; a finished run is read back (an error if it trained something else than `spec`,
    `training_key`).

    With `spec.eval_at` the record also holds `test_at: {setting: metrics}`, and with `spec.probe_at` `probes:
    {name: metrics}`: the same model on each of those tasks' test sets (drawn from the same seed as the trained
    task's). With `reuse_root`, a finished run of the same training found there (`find_same_run`) is copied instead
    of trained. Past `start_by` (a `time.time()`), a run that would train (or resume) raises `NotStarted` instead;
    finished and copied ones are still read back."""
    if (finished := read_folder(run_dir)) is not None:
        return _read_back(finished.record, spec, run_dir / RESULT_NAME)
    archive = run_dir.parent.parent / ARCHIVE_NAME  # `<experiment>/<variant>/runs/<id>`: the variant's archive
    if (archived := read_archive(archive).get(spec.id)) is not None:
        return _read_back(archived.record, spec, archive)
    if reuse_root is not None and (source := find_same_run(reuse_root, spec, run_dir)) is not None:
        return _reuse(spec, source, run_dir)
    if start_by is not None and time.time() > start_by:
        raise NotStarted(spec.id)
    device = torch.device(device)
    training = spec.training
    torch.manual_seed(training.seed)
    model = DecoderLM(spec.model)
    val = eval_set(spec, spec.train.seed + VAL_SEED_OFFSET, spec.val_task)
    test = eval_set(spec, spec.train.seed + TEST_SEED_OFFSET, spec.test_task)
    bs = spec.train.batch_size
    best = None if spec.select_on is None else BestWeights(run_dir / BEST_NAME, spec.select_on)
    if best is not None and best.metrics is None and (run_dir / CHECKPOINT_NAME).exists():
        # a checkpoint past a validation, but no best weights: trained without `select_on`, whose earlier
        # validations' weights are gone; resuming would select among the later ones only
        step = load_checkpoint(run_dir / CHECKPOINT_NAME)["run"]["step"]
        if spec.train.eval_every and step >= spec.train.eval_every:
            raise ValueError(
                f"{run_dir}: its checkpoint (step {step}) was written without select_on={spec.select_on!r}'s best "
                "weights; remove the folder to train the run again"
            )

    def validate(m: torch.nn.Module) -> dict[str, float]:
        metrics = evaluate_on(m, val, device)
        if best is not None:
            best.offer(m, metrics)
        return metrics

    outcome = train(
        model,
        training,
        lambda step, gen: generate(spec.task, bs, gen),
        validate,
        run_dir,
        device=device,
        progress=progress,
        loss_fn=supervised_cross_entropy,
        checkpoint_seconds=CHECKPOINT_SECONDS,
        cuda_graph=device.type == "cuda",  # these models' eager steps are the host's launches
    )
    selected = None if best is None else best.restore(model)
    record = {
        "id": spec.id,
        "mixer": spec.mixer,
        "x": spec.x,
        "replicate": spec.replicate,
        "key": training_key(spec),
        "tests_at": _tests_at(spec),
        "lr": spec.train.lr,
        "steps": outcome.step,
        "stop_reason": outcome.stop_reason,
        "val": outcome.last_eval,
        "best_val": outcome.best_eval if selected is None else selected,
        **({"selected_on": spec.select_on} if spec.select_on else {}),
        "test": evaluate_on(model, test, device),
        **({"test_at": _test_at(spec, model, device)} if spec.eval_at else {}),
        **({"probes": _probes(spec, model, device)} if spec.probe_at else {}),
        "wall_time_s": outcome.wall_time_s,
        "params": sum(p.numel() for p in model.parameters()),
        "hardware": torch.cuda.get_device_name(device) if device.type == "cuda" else describe("cpu")["cpu"],
        "task": {"type": type(spec.task).__name__, **asdict(spec.task)},
        "model": asdict(spec.model),
        "train": asdict(training),
    }
    write_atomic(run_dir / RESULT_NAME, json.dumps(record, indent=2))
    return record


def _test_at(spec: RunSpec, model: torch.nn.Module, device: torch.device) -> dict[str, dict[str, float]]:
    """The trained model's metrics on the test set of each task in `spec.eval_at`, by setting."""
    seed = spec.train.seed + TEST_SEED_OFFSET
    return {str(x): evaluate_on(model, eval_set(spec, seed, task), device) for x, task in spec.eval_at}


def _probes(spec: RunSpec, model: torch.nn.Module, device: torch.device) -> dict[str, dict[str, float]]:
    """The trained model's metrics on each task of `spec.probe_at` (drawn from the test sets' seed), by name."""
    seed = spec.train.seed + TEST_SEED_OFFSET
    return {name: evaluate_on(model, eval_set(spec, seed, task), device) for name, task in spec.probe_at}


def _die_with_parent() -> None:
    """Pool initializer. On Linux a worker is sent SIGTERM when the command that started it dies, also when that
    command is killed alone (`kill PID`, not Ctrl-C, which reaches the whole process group): otherwise an orphaned
    worker trains on, into the same run folder as the re-run command's worker."""
    if sys.platform == "linux":
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _worker(
    spec: RunSpec, run_dir: Path, device: str, threads: int, reuse_root: Path | None, start_by: float | None
) -> dict:
    torch.set_num_threads(threads)
    if device.startswith("cuda:"):
        torch.cuda.set_device(device)  # Triton launches on the current device
    return run_one(spec, run_dir, device, progress=False, reuse_root=reuse_root, start_by=start_by)


def training_work(spec: RunSpec) -> int:
    """A run's work, to start the longest first: the tokens it trains on (its early stop unknown) times its model's
    width² and depth; the order only, so that the last runs of a pool are short ones and the pool ends together."""
    model = spec.model
    return spec.train.steps * spec.train.batch_size * seq_len_of(spec.task) * model.d_model**2 * model.n_layers


def threads_per_job(jobs: int) -> int:
    """The CPU threads each of `jobs` processes running at once gets: the cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // jobs)


def _devices(device: str, n: int) -> list[str]:
    """The device of each of `n` runs: a bare "cuda" on a machine with several GPUs deals them out in turn."""
    count = torch.cuda.device_count() if device == "cuda" else 0
    return [f"cuda:{i % count}" for i in range(n)] if count > 1 else [device] * n


class RunsFailed(RuntimeError):
    """Some training runs raised or were not started (`NotStarted`); the others finished (and are kept), so a re-run
    does only the rest."""


def run_all(
    specs: list[RunSpec],
    runs_dir: Path,
    *,
    device: str = "cpu",
    jobs: int = 1,
    reuse_root: Path | None = None,
    metric: str = "acc",
    start_by: float | None = None,
) -> list[dict]:
    """Run every spec (finished ones are read back, interrupted ones resume, with `reuse_root` ones another
    experiment finished there are copied), `jobs` at a time, the longest first (`training_work`); the progress bar
    shows each finished run's test `metric`. A run that raises does not stop the others: its error is printed, and
    `RunsFailed` names every failed run at the end. Past `start_by` (a `time.time()`) no run begins to train: those
    that began finish, and `RunsFailed` counts the others (for a job of limited time, which then ends with whole
    runs)."""
    records: dict[str, dict] = {}
    failures: dict[str, str] = {}
    not_started: list[str] = []

    def collect(spec: RunSpec, outcome: Callable[[], dict], say: Callable[[str], None]) -> None:
        try:
            records[spec.id] = outcome()
        except NotStarted:
            not_started.append(spec.id)
        except Exception as e:
            failures[spec.id] = f"{type(e).__name__}: {e}"
            say(f"run {spec.id} failed: {failures[spec.id]}")

    if jobs <= 1:
        for i, s in enumerate(specs, 1):
            print(f"run {i} of {len(specs)}: {s.id}")  # each run's bar shows its own steps only
            collect(s, partial(run_one, s, runs_dir / s.id, device, True, reuse_root, start_by), print)
    else:
        if device.startswith("cuda") and len(set(_devices(device, jobs))) < jobs and not mps_running():
            print(f"note: {jobs} runs share a GPU by turns; with an MPS daemon (`nvidia-cuda-mps-control -d`, before "
                  "this command) their kernels run side by side, faster for small models")  # fmt: skip
        threads = threads_per_job(jobs)
        context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_die_with_parent) as pool:
            longest_first = sorted(specs, key=training_work, reverse=True)
            devices = _devices(device, len(specs))
            futures = {
                pool.submit(_worker, s, runs_dir / s.id, d, threads, reuse_root, start_by): s
                for s, d in zip(longest_first, devices)
            }
            with tqdm(total=len(specs), desc="runs", unit="run") as bar:
                for future in as_completed(futures):
                    spec = futures[future]
                    collect(spec, future.result, bar.write)
                    if spec.id in records:
                        value = records[spec.id]["test"].get(metric, float("nan"))
                        bar.set_postfix_str(f"{spec.id}: test {metric} {value:.3f}")
                    bar.update()
    said = []
    if failures:
        named = "; ".join(f"{k} ({v})" for k, v in failures.items())
        said.append(f"{len(failures)} of {len(specs)} runs failed: {named}")
    if not_started:
        said.append(f"{len(not_started)} of {len(specs)} runs not started (the start-by time had passed)")
    if said:
        raise RunsFailed("; ".join(said))
    return [records[s.id] for s in specs]
