"""The trainer on a toy copy task (`targets = inputs`): learning, bit-identical resume, early stopping, the metrics
log, config checks, and that a finished run is not trained again."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from torch import nn

from linattn.tasks import IGNORE, Batch
from linattn.train import TrainConfig, lm_cross_entropy, supervised_cross_entropy, token_cross_entropy, train
from linattn.train import distributed as train_distributed

V, T, B = 16, 12, 32  # vocabulary, sequence length, batch rows


pytestmark = pytest.mark.usefixtures("one_thread")


def copy_batch(step: int, gen: torch.Generator) -> Batch:
    """Random tokens to copy; position 0 carries no loss, so `IGNORE` is exercised."""
    x = torch.randint(0, V, (B, T), generator=gen)
    targets = x.clone()
    targets[:, 0] = IGNORE
    return Batch(x, targets)


def toy_model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Embedding(V, 32), nn.Dropout(dropout), nn.Linear(32, V))


def accuracy(model: nn.Module) -> dict[str, float]:
    batch = copy_batch(0, torch.Generator().manual_seed(1234))
    hit = model(batch.inputs).argmax(-1) == batch.targets
    return {"acc": hit[batch.supervised].float().mean().item()}


def config(**overrides) -> TrainConfig:
    base = dict(steps=20, batch_size=B, lr=1e-2, warmup_steps=2, log_every=1, eval_every=0, checkpoint_every=0)
    return TrainConfig(**(base | overrides))


def read_log(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Crash(Exception):
    """Stands for a run killed mid-way."""


def crash_at(crash_step: int):
    def train_batch(step: int, gen: torch.Generator) -> Batch:
        if step == crash_step:
            raise Crash
        return copy_batch(step, gen)

    return train_batch


def never_called(step: int, gen: torch.Generator) -> Batch:
    raise AssertionError("a finished run must not draw batches")


def test_loss_falls_on_the_copy_task(tmp_path, capsys):
    cfg = config(steps=100, warmup_steps=10, log_every=10)
    result = train(toy_model(), cfg, copy_batch, accuracy, tmp_path, progress=True)
    losses = [r["loss"] for r in read_log(result.metrics_path) if "loss" in r]
    assert losses[0] > 1.5 and losses[-1] < 0.1 * losses[0], losses
    assert result.step == 100 and not result.stopped_early and result.last_eval == {"acc": 1.0}
    assert "loss=" in capsys.readouterr().err, "the progress bar shows the loss"


def drop_timing(log: list[dict]) -> list[dict]:
    """A metrics log without its wall-clock fields, which differ between two runs of the same training."""
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in log]


def test_resume_after_a_crash_is_bit_identical(tmp_path):
    cfg = config(checkpoint_every=5, eval_every=5)
    straight = toy_model(dropout=0.1)  # dropout draws from torch's RNG, which the checkpoint carries
    torch.manual_seed(7)
    done = train(straight, cfg, copy_batch, accuracy, tmp_path / "straight", progress=False)

    torch.manual_seed(7)
    with pytest.raises(Crash):  # after step 13; the last checkpoint is step 10
        train(toy_model(dropout=0.1), cfg, crash_at(13), accuracy, tmp_path / "resumed", progress=False)
    assert max(r["step"] for r in read_log(tmp_path / "resumed" / "metrics.jsonl")) == 13
    resumed = toy_model(seed=1, dropout=0.1)  # other weights: the checkpoint must replace them
    again = train(resumed, cfg, copy_batch, accuracy, tmp_path / "resumed", progress=False)

    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert (again.step, again.last_eval, again.best_step) == (done.step, done.last_eval, done.best_step)
    assert drop_timing(read_log(again.metrics_path)) == drop_timing(read_log(done.metrics_path))


def test_resume_mid_log_window_keeps_the_mean_loss(tmp_path):
    cfg = config(log_every=4, checkpoint_every=3)
    done = train(toy_model(), cfg, copy_batch, None, tmp_path / "straight", progress=False)
    with pytest.raises(Crash):  # checkpoint at step 9, in the middle of the window 8..12
        train(toy_model(), cfg, crash_at(10), None, tmp_path / "resumed", progress=False)
    again = train(toy_model(), cfg, copy_batch, None, tmp_path / "resumed", progress=False)
    losses = lambda result: [(r["step"], r["loss"]) for r in read_log(result.metrics_path)]
    assert losses(again) == losses(done)


def test_a_resumed_run_restores_a_lost_log_from_its_checkpoint(tmp_path):
    """A run folder that kept its checkpoint but lost its log (copied to another machine without it) resumes with
    the whole log, restored from the checkpoint."""
    cfg = config(log_every=2, checkpoint_every=4, eval_every=4)
    done = train(toy_model(), cfg, copy_batch, accuracy, tmp_path / "straight", progress=False)
    with pytest.raises(Crash):  # the last checkpoint is step 8
        train(toy_model(), cfg, crash_at(10), accuracy, tmp_path / "resumed", progress=False)
    (tmp_path / "resumed" / "metrics.jsonl").unlink()
    again = train(toy_model(), cfg, copy_batch, accuracy, tmp_path / "resumed", progress=False)
    assert drop_timing(read_log(again.metrics_path)) == drop_timing(read_log(done.metrics_path))
    assert read_log(again.metrics_path)[0]["step"] == 2
    # and a finished run read back restores its whole log
    (tmp_path / "resumed" / "metrics.jsonl").unlink()
    train(toy_model(), cfg, never_called, accuracy, tmp_path / "resumed", progress=False)
    assert drop_timing(read_log(again.metrics_path)) == drop_timing(read_log(done.metrics_path))


def test_a_finished_run_is_returned_not_retrained(tmp_path):
    cfg = config(eval_every=10)
    trained = toy_model()
    done = train(trained, cfg, copy_batch, accuracy, tmp_path, progress=False)
    log = (tmp_path / "metrics.jsonl").read_text()

    fresh = toy_model(seed=1)
    again = train(fresh, cfg, never_called, accuracy, tmp_path, progress=False)
    assert again == done
    assert all(torch.equal(a, b) for a, b in zip(trained.parameters(), fresh.parameters())), "final weights loaded"
    assert (tmp_path / "metrics.jsonl").read_text() == log


def test_early_stop_on_threshold(tmp_path):
    cfg = config(steps=300, eval_every=5, early_stop_metric="acc", early_stop_threshold=1.0)
    result = train(toy_model(), cfg, copy_batch, accuracy, tmp_path, progress=False)
    assert result.stopped_early and result.step < 300 and result.step % 5 == 0
    assert result.last_eval["acc"] == 1.0 and "acc=1 >= early_stop_threshold=1" in result.stop_reason
    log = read_log(result.metrics_path)
    assert log[-2]["step"] == log[-1]["step"] == result.step, "the stopping step is logged, then its eval"
    assert train(toy_model(), cfg, never_called, accuracy, tmp_path, progress=False) == result


def test_early_stop_on_patience(tmp_path):
    evals = iter([0.2, 0.5, 0.4, 0.5, 0.3, 0.9])
    cfg = config(steps=100, eval_every=5, early_stop_metric="acc", patience=3)
    result = train(toy_model(), cfg, copy_batch, lambda m: {"acc": next(evals)}, tmp_path, progress=False)
    assert result.step == 25 and result.stopped_early and "for 3 evals" in result.stop_reason
    assert result.best_eval == {"acc": 0.5} and result.best_step == 10 and result.last_eval == {"acc": 0.3}


def test_a_diverged_run_stops_with_its_last_finite_weights(tmp_path):
    """A non-finite loss (here at the fourth update) is not applied: the run stops, says why, keeps finite weights,
    and its checkpoint returns that result without training again."""
    calls = iter(range(100))

    def blows_up(model, batch):
        loss = nn.functional.cross_entropy(
            model(batch.inputs).flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE
        )
        return loss * float("nan") if next(calls) == 3 else loss

    model = toy_model()
    result = train(model, config(eval_every=5), copy_batch, accuracy, tmp_path, progress=False, loss_fn=blows_up)
    assert result.step == 3 and result.stop_reason == "diverged: non-finite loss or gradient at update 4, not applied"
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert math.isnan(read_log(result.metrics_path)[-1]["loss"])
    assert train(toy_model(seed=1), config(eval_every=5), never_called, accuracy, tmp_path, progress=False) == result


def test_a_nan_eval_is_never_the_best(tmp_path):
    evals = iter([float("nan"), 0.1, 0.2, 0.3])  # NaN: an eval with nothing supervised
    cfg = config(steps=20, eval_every=5, early_stop_metric="acc", patience=2)
    result = train(toy_model(), cfg, copy_batch, lambda m: {"acc": next(evals)}, tmp_path, progress=False)
    assert result.step == 20 and not result.stopped_early and result.best_eval == {"acc": 0.3}


def test_metrics_log_lines(tmp_path):
    cfg = config(log_every=5, eval_every=10)
    result = train(toy_model(), cfg, copy_batch, accuracy, tmp_path, progress=False)
    log = read_log(result.metrics_path)
    assert [(r["step"], "eval" in r) for r in log] == [
        (5, False), (10, False), (10, True), (15, False), (20, False), (20, True)
    ]  # fmt: skip
    train_line = log[0]
    assert set(train_line) == {"step", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}
    assert all(math.isfinite(v) and v > 0 for v in train_line.values())
    assert train_line["lr"] == pytest.approx(cfg.lr * math.cos(math.pi * 2 / 18 / 2) ** 2)  # update 4 of the cosine
    assert set(log[2]["eval"]) == {"acc"}


def test_a_changed_config_names_the_fields_that_differ(tmp_path):
    train(toy_model(), config(), copy_batch, None, tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"lr: checkpoint 0.01, now 0.02; seed: checkpoint 42, now 1"):
        train(toy_model(), config(lr=2e-2, seed=1), copy_batch, None, tmp_path, progress=False)


def test_without_out_dir_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = train(toy_model(), config(), copy_batch, accuracy, None, progress=False)
    assert result.metrics_path is None and result.step == 20 and list(tmp_path.iterdir()) == []


def test_one_process_never_calls_torch_distributed(tmp_path, monkeypatch):
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"torch.distributed.{name} used by a single-process run")

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(train_distributed, "dist", Untouchable())
    cfg = config(checkpoint_every=5, eval_every=5)
    assert train(toy_model(), cfg, copy_batch, accuracy, tmp_path, progress=False).step == 20


def test_a_batch_of_the_wrong_size_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"shape \(32, 12\); expected config.batch_size=8"):
        train(toy_model(), config(batch_size=8), copy_batch, None, tmp_path, progress=False)


def packed_copy_batch(step: int, gen: torch.Generator) -> Batch:
    """`B` windows of `T` tokens in one row, cut into sequences at random points."""
    x = torch.randint(0, V, (1, B * T), generator=gen)
    cuts = torch.randperm(B * T - 1, generator=gen)[: B - 1] + 1
    return Batch(x, x.clone(), cu_seqlens=torch.cat([torch.tensor([0]), cuts.sort().values, torch.tensor([B * T])]))


def test_packed_batches_reach_the_model_with_their_cu_seqlens(tmp_path):
    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = toy_model()

        def forward(self, inputs, cu_seqlens=None):
            seen.append(cu_seqlens)
            return self.inner(inputs)

    result = train(Recorder(), config(steps=3), packed_copy_batch, None, tmp_path, progress=False)
    assert result.step == 3 and len(seen) == 3 and all(c is not None and c[-1] == B * T for c in seen)
    assert read_log(result.metrics_path)[0]["tokens_per_s"] > 0
    with pytest.raises(ValueError, match=r"packed inputs of shape \(1, 384\); expected one row of config.batch_size=5"):
        train(Recorder(), config(batch_size=5), packed_copy_batch, None, tmp_path / "b", progress=False)


def test_on_metrics_gets_every_record_of_the_log(tmp_path):
    records = []
    cfg = config(log_every=5, eval_every=10)
    result = train(toy_model(), cfg, copy_batch, accuracy, tmp_path, progress=False, on_metrics=records.append)
    assert records == read_log(result.metrics_path) and len(records) == 6


def test_sharding_is_ddp_or_fsdp(tmp_path):
    with pytest.raises(ValueError, match=r"^sharding: expected one of \('ddp', 'fsdp'\), got 'zero'"):
        train(toy_model(), config(), copy_batch, None, tmp_path, progress=False, sharding="zero")
    # one process has nothing to shard: a plain run, whose checkpoint any sharding resumes
    assert train(toy_model(), config(), copy_batch, None, tmp_path, progress=False, sharding="fsdp").step == 20


def test_early_stopping_needs_an_evaluate_function(tmp_path):
    with pytest.raises(ValueError, match="early_stop_metric='acc' needs an evaluate"):
        train(toy_model(), config(early_stop_metric="acc"), copy_batch, None, tmp_path, progress=False)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(steps=0), "steps must be >= 1, got 0"),
        (dict(warmup_steps=30), "warmup_steps must be <= steps=20, got 30"),
        (dict(amp="fp16"), "amp must be one of"),
        (dict(patience=2), "patience=2 needs an early_stop_metric"),
        (dict(min_lr_ratio=1.5), "min_lr_ratio must be in"),
        (dict(clip=float("nan")), "clip must be a finite number, got nan"),
        (dict(lr=float("inf")), "lr must be a finite number"),
        (dict(weight_decay=float("nan")), "weight_decay must be a finite number"),
        (dict(early_stop_threshold=float("nan")), "early_stop_threshold must be a finite number"),
        (dict(betas=(0.9, float("nan"))), r"betas\[1\] must be a finite number"),
        (dict(steps=5.5), "steps must be an int, got 5.5"),
        (dict(seed=1.5), "seed must be an int"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        config(**overrides)


def test_debug_preset_learns_mqar(tmp_path):
    """The real backbone (`debug` preset, a delta-rule mixer) on real MQAR batches: the loss goes down."""
    from linattn.models import DecoderLM, preset
    from linattn.tasks import VLAMQARConfig, generate

    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="gated_deltanet", vocab_size=16))
    task = VLAMQARConfig(n_pairs=2, vocab_size=16)
    config = TrainConfig(steps=150, batch_size=32, lr=3e-3, warmup_steps=10, eval_every=0, log_every=10)
    train(model, config, lambda step, gen: generate(task, 32, gen), None, tmp_path, progress=False)
    losses = [
        json.loads(line)["loss"]
        for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
        if "loss" in json.loads(line)
    ]
    assert losses[-1] < 0.75 * losses[0], losses


@pytest.mark.parametrize("mixture", [False, True])
def test_the_supervised_losses_are_token_cross_entropy(mixture):
    """The loss at the supervised positions only (`logits_at`), of a mixture's rows without their padding
    (`Batch.by_length`), in the form a CUDA graph replays (`indexed_cross_entropy`, run eagerly here: the padded
    rows whole, the positions as an index; a causal model's outputs before a row's padding do not depend on it), and
    without the model's state (`lm_cross_entropy`) has the full call's value and gradients."""
    from linattn.models import DecoderLM, preset
    from linattn.tasks import MQARMixtureConfig, ZoologyMQARConfig, generate, zoology_mix
    from linattn.train.graph import indexed_cross_entropy, supervised_positions

    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="gla", block="zoology", vocab_size=32)).double()
    task = MQARMixtureConfig(tuple(zoology_mix(((8, 1), (12, 2), (16, 3)), vocab_size=32)))
    task = task if mixture else ZoologyMQARConfig(n_pairs=3, seq_len=16, vocab_size=32)
    batch = generate(task, 6, torch.Generator().manual_seed(0))
    assert (len(batch.by_length()) > 1) == mixture
    index, targets = supervised_positions(batch)
    indexed = lambda m, b: indexed_cross_entropy(m, b.inputs, index, targets)
    losses, grads = [], []
    for loss_fn in (token_cross_entropy, supervised_cross_entropy, indexed, lm_cross_entropy):
        model.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        losses.append(loss.detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    # all take the cross-entropy in float32 (over B·T rows or N), so they agree to its rounding
    for loss, grad in zip(losses[1:], grads[1:]):
        assert abs(losses[0] - loss) <= 1e-6 * losses[0]
        assert (grads[0] - grad).norm() <= 1e-6 * grads[0].norm()


def test_one_writer_a_run_folder(tmp_path):
    """A second training into a folder that another one is writing is refused with the holder's name; once the first
    ends (however it ends) the folder is free again."""
    import subprocess
    import sys

    from linattn.train.lock import RunFolderLocked, folder_lock

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from linattn.train.lock import folder_lock\n"
         f"with folder_lock({str(tmp_path)!r}):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderLocked, match=f"is being written by pid {holder.pid} on "):
            train(toy_model(), config(), copy_batch, None, tmp_path, progress=False)
        assert not (tmp_path / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    train(toy_model(), config(steps=2), copy_batch, None, tmp_path, progress=False)  # killed: the lock went with it
    with folder_lock(tmp_path), pytest.raises(RunFolderLocked):
        train(toy_model(), config(steps=2), copy_batch, None, tmp_path, progress=False)


def test_checkpoints_by_time_too_and_resume_exactly(tmp_path):
    """With no step-based checkpoints a run still saves every `checkpoint_seconds` of its time (here: as often as
    its saves' cost allows), and resuming from such a checkpoint gives what an uninterrupted run gives."""
    cfg = config(checkpoint_every=0)
    straight = train(toy_model(), cfg, copy_batch, None, tmp_path / "straight", progress=False)
    with pytest.raises(Crash):
        train(toy_model(), cfg, crash_at(7), None, tmp_path / "resumed", progress=False, checkpoint_seconds=1e-9)
    from linattn.train.checkpoint import load_checkpoint

    assert 1 <= load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["run"]["step"] <= 7
    again = train(toy_model(seed=1), cfg, copy_batch, None, tmp_path / "resumed", progress=False)
    assert drop_timing(read_log(again.metrics_path)) == drop_timing(read_log(straight.metrics_path))
    with pytest.raises(ValueError, match="checkpoint_seconds: expected a positive number"):
        train(toy_model(), cfg, copy_batch, None, tmp_path / "x", progress=False, checkpoint_seconds=0)


def test_a_damaged_checkpoint_names_itself(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"\x80\x02 not a checkpoint")
    with pytest.raises(ValueError, match=r"checkpoint.pt: not a readable checkpoint .*remove it to train the run"):
        train(toy_model(), config(), copy_batch, None, tmp_path, progress=False)


def test_timed_checkpoints_leave_room_for_a_slow_save():
    """A checkpoint every `checkpoint_seconds`, and no sooner than 50 saves' time: saving costs at most 2%."""
    from linattn.train.trainer import _time_to_save

    info, now = train_distributed.env_info(), time.perf_counter()
    assert _time_to_save(60.0, now - 61, 0.5, info)
    assert not _time_to_save(60.0, now - 61, 2.0, info)  # a 2 s save: 100 s apart
    assert _time_to_save(60.0, now - 101, 2.0, info)
    assert not _time_to_save(None, now - 1e6, 0.0, info)
