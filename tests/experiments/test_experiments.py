"""Experiments end to end at toy size: runs, resume, lr selection, the written report."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from linattn.experiments import runner
from linattn.experiments.archive import FinishedRun
from linattn.experiments.experiment import (
    Experiment,
    edge_runs,
    loss_curves,
    plot,
    seed_runs,
    summarize,
    table_markdown,
)
from linattn.experiments.mixers import MIXERS, parse_mixers
from linattn.experiments.progress import progress
from linattn.experiments.registry import EXPERIMENTS
from linattn.experiments.runner import RunSpec, run_one, training_key
from linattn.experiments.tables import _without_device, zoology_tables
from linattn.models import DecoderLM, preset
from linattn.tasks import KLAMQARConfig, TextConfig, VLAMQARConfig
from linattn.train import TrainConfig


def tiny_plan(protocol, quick, mixers):
    train = TrainConfig(steps=6, batch_size=8, warmup_steps=1, eval_every=0, checkpoint_every=3, log_every=2)
    specs = []
    for mixer in mixers:
        m = MIXERS[mixer]
        model = preset("debug", mixer=m.layer, mixer_options=m.options, vocab_size=16)
        for lr in (1e-3, 3e-3):
            specs.append(
                RunSpec(
                    mixer,
                    2,
                    VLAMQARConfig(n_pairs=2, vocab_size=16),
                    model,
                    TrainConfig(**{**train.__dict__, "lr": lr}),
                    eval_batches=2,
                    eval_batch_size=4,
                )
            )
    return specs


TINY = Experiment("tiny", "a toy MQAR", "n_pairs", tiny_plan, ("vla", "softmax"), {"vla": {2: 1.0}})


def test_experiment_writes_report_and_keeps_it(tmp_path, capsys):
    torch.set_num_threads(1)
    out = TINY.run(
        "paper",
        quick=True,
        mixers=("vla", "softmax"),
        device="cpu",
        jobs=1,
        root=tmp_path,
        force=False,
        command="linattn run tiny",
    )
    assert out == tmp_path / "tiny" / "paper-quick"
    results = json.loads((out / "results.json").read_text())
    assert set(results["table"]) == {"vla", "softmax"} and set(results["table"]["vla"]) == {"2"}
    assert len(results["runs"]) == 4 and results["environment"]["date"]
    table = (out / "table.md").read_text()
    assert "| n_pairs | vla | softmax |" in table and "linattn run tiny" in table
    assert results["paper"] == {} and "parentheses" not in table  # the paper's numbers stand beside full runs only
    assert "(1.000)" in table_markdown({**results, "quick": False, "paper": {"vla": {"2": 1.0}}})
    assert (out / "plot.png").stat().st_size > 5_000
    # a second invocation keeps the result; --force runs again
    stamp = (out / "results.json").stat().st_mtime_ns
    TINY.run(
        "paper",
        quick=True,
        mixers=("vla", "softmax"),
        device="cpu",
        jobs=1,
        root=tmp_path,
        force=False,
        command="again",
    )
    assert "kept" in capsys.readouterr().out and (out / "results.json").stat().st_mtime_ns == stamp
    # results.json, which marks the folder complete, is written last: an interrupt before it leaves it absent
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("linattn.experiments.experiment.plot", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            TINY.run("paper", quick=True, mixers=("vla",), device="cpu", jobs=1, root=tmp_path / "cut", force=False,
                     command="cut")  # fmt: skip
    assert (tmp_path / "cut" / "tiny" / "paper-quick" / "table.md").exists()
    assert not (tmp_path / "cut" / "tiny" / "paper-quick" / "results.json").exists()
    # asking for a mixer not in it extends the result (earlier runs are read back, not retrained)
    TINY.run(
        "paper", quick=True, mixers=("linear",), device="cpu", jobs=1, root=tmp_path, force=False, command="extend"
    )
    extended = json.loads((out / "results.json").read_text())
    assert extended["mixers"] == ["vla", "softmax", "linear"] and extended["table"]["vla"] == results["table"]["vla"]
    assert "| linear, 2 |" in progress(TINY, "paper", True, tmp_path)  # a mixer run beside the experiment's own
    # its command line says what made the earlier columns, then the new one; tables drop each one's device
    assert extended["command"] == f"{results['command']}` then `extend"
    assert (
        _without_device("run x --device cpu` then `run x --mixers y --device cuda --jobs 4")
        == "run x` then `run x --mixers y"
    )
    TINY.run("paper", quick=True, mixers=("softmax",), device="cpu", jobs=1, root=tmp_path, force=True, command="force")
    assert json.loads((out / "results.json").read_text())["command"] == "force"
    # extending keeps the experiment's column order, whatever order the mixers were run in
    TINY.run("paper", quick=True, mixers=("vla",), device="cpu", jobs=1, root=tmp_path, force=False, command="x")
    assert json.loads((out / "results.json").read_text())["mixers"] == ["vla", "softmax"]
    # more seeds extend it too, for the mixers asked for only: the first replicate's runs are read back, the second
    # trained at the lr the first chose; softmax keeps its one seed
    TINY.run("paper", quick=True, mixers=("vla",), device="cpu", jobs=1, root=tmp_path, force=False, command="s",
             seeds=2)  # fmt: skip
    seeded = json.loads((out / "results.json").read_text())
    assert seeded["seeds"] == 2 and seeded["seeds_by_mixer"] == {"vla": 2, "softmax": 1}
    chosen = seeded["chosen_lr"]["vla"]["2"]
    assert sorted((r["mixer"], r["replicate"], r["lr"]) for r in seeded["runs"]) == sorted(
        [("vla", 0, 1e-3), ("vla", 0, 3e-3), ("vla", 1, chosen), ("softmax", 0, 1e-3), ("softmax", 0, 3e-3)]
    )
    assert (out / "runs" / f"vla-x2-lr{chosen:g}-s1" / "result.json").exists()
    assert "the median of each mixer's training seeds (vla 2, softmax 1)" in (out / "table.md").read_text()
    shown = progress(TINY, "paper", True, tmp_path)  # each mixer's seeds, as run
    assert "vla, 2, seed 1" in shown and "softmax, 2, seed 1" not in shown
    (out / "runs" / "softmax-x2-lr0.001-s1").mkdir()  # a replicate begun beyond the result's count shows too
    assert "| softmax, 2, seed 1 | – |" in progress(TINY, "paper", True, tmp_path)
    # every mixer at two seeds: one count again
    TINY.run("paper", quick=True, mixers=("vla", "softmax"), device="cpu", jobs=1, root=tmp_path, force=False,
             command="t", seeds=2)  # fmt: skip
    both = json.loads((out / "results.json").read_text())
    assert both["seeds"] == 2 and "seeds_by_mixer" not in both and len(both["runs"]) == 6  # 2 lrs, then 1 seed


def test_the_lr_grid_is_extended_below_where_its_lowest_was_best(tmp_path, capsys):
    """`lr_below`: one more run for each mixer and setting whose best lr is the grid's lowest, once."""
    specs = tiny_plan("fair", False, ("vla", "softmax"))  # lr 1e-3 then 3e-3 per mixer
    records = [
        {"mixer": s.mixer, "x": s.x, "lr": s.train.lr, "best_val": {"acc": v}, "val": None, "test": {"acc": v}}
        for s, v in zip(specs, (0.9, 0.5, 0.4, 0.6))
    ]
    edge = edge_runs(specs, records, 3e-4, "acc")
    assert [(s.id, s.train.lr) for s in edge] == [("vla-x2-lr0.0003", 3e-4)]
    with pytest.raises(ValueError, match="lr_below: expected below the grid's lowest lr 0.001, got 0.001"):
        edge_runs(specs, records, 1e-3, "acc")
    # a result made without it is extended: the grid's runs read back, the edge's trained, the table's lr from all
    torch.set_num_threads(1)
    run = dict(quick=False, mixers=("vla",), device="cpu", jobs=1, root=tmp_path, force=False)
    first = json.loads((TINY.run("fair", command="a", **run) / "results.json").read_text())
    out = replace(TINY, lr_below=3e-4).run("fair", command="b", **run)
    assert 'extending it with ["lr 0.0003 at the grid\'s lower edge"]' in capsys.readouterr().out
    extended = json.loads((out / "results.json").read_text())
    at_edge = first["chosen_lr"]["vla"]["2"] == 1e-3
    assert extended["lr_below"] == 3e-4 and len(extended["runs"]) == 2 + at_edge
    assert (3e-4 in {r["lr"] for r in extended["runs"]}) == at_edge


def test_finished_runs_are_read_back_and_interrupted_runs_resume(tmp_path):
    spec = tiny_plan("paper", True, ("gated_deltanet",))[0]
    first = run_one(spec, tmp_path / spec.id, progress=False)
    again = run_one(spec, tmp_path / spec.id, progress=False)
    assert first["test"] == again["test"] and first["wall_time_s"] == again["wall_time_s"]  # read back, not retrained
    # an interrupted run (checkpoint, no result) resumes to the same weights as an uninterrupted one
    (tmp_path / spec.id / "result.json").unlink()
    resumed = run_one(spec, tmp_path / spec.id, progress=False)
    assert resumed["test"] == first["test"]
    # a finished run of another training (its spec changed since) is an error, not read back as this one's
    record = json.loads((tmp_path / spec.id / "result.json").read_text())
    (tmp_path / spec.id / "result.json").write_text(json.dumps({**record, "key": "0123456789abcdef"}))
    with pytest.raises(ValueError, match="its result is of another training"):
        run_one(spec, tmp_path / spec.id, progress=False)


def test_a_result_trained_on_another_corpus_says_so():
    from linattn.tasks.corpus import CorpusConfig

    spec = tiny_plan("paper", True, ("gated_deltanet",))[0]
    spec = replace(spec, task=CorpusConfig("short/cache", "aaaa000011112222", 64))
    record = {"key": "0123456789abcdef", "task": {"fingerprint": "bbbb000011112222"}}
    with pytest.raises(ValueError, match="trained on another tokenised corpus .fingerprint bbbb000011112222, this "
                       "machine's aaaa000011112222"):  # fmt: skip
        runner._read_back(record, spec, Path("runs.jsonl.gz"))


def test_summarize_takes_the_lr_with_the_best_validation():
    def record(lr, val, test):
        return {"mixer": "vla", "x": 4, "lr": lr, "best_val": {"acc": val}, "val": None, "test": {"acc": test}}

    summary = summarize([record(1e-3, 0.5, 0.9), record(3e-3, 0.8, 0.7), record(1e-2, 0.6, 1.0)])
    assert summary == {"acc": {"vla": {"4": 0.7}}, "lr": {"vla": {"4": 3e-3}}, "spread": {}}


def test_replicates_give_their_median_and_range():
    """With several seeds per run the lr is chosen on the replicates' mean validation score and its test score is
    their median (what the report's rules judge); the table shows the range beside the median and says which."""

    def record(lr, val, test, replicate):
        return {"mixer": "vla", "x": 4, "lr": lr, "replicate": replicate, "best_val": {"acc": val}, "val": None,
                "test": {"acc": test}}  # fmt: skip

    records = [record(1e-3, 0.9, 0.5, 0), record(1e-3, 0.3, 0.5, 1), record(1e-3, 0.3, 0.5, 2)]
    records += [record(3e-3, 0.7, 0.4, 0), record(3e-3, 0.7, 0.9, 1), record(3e-3, 0.7, 0.5, 2)]
    summary = summarize(records)
    assert summary["lr"] == {"vla": {"4": 3e-3}}  # mean validation 0.7 against 0.5: not the best single run's lr
    assert summary["acc"]["vla"]["4"] == 0.5 and summary["spread"] == {"vla": {"4": [0.4, 0.9]}}  # the mean: 0.6
    results = {"experiment": "e", "description": "d", "protocol": "paper", "quick": False, "command": "c",
               "environment": {"cpu": "cpu", "torch": "t", "date": "today"}, "x_name": "n_pairs", "mixers": ["vla"],
               "table": summary["acc"], "seeds": 3, "spread": summary["spread"], "paper": {}}  # fmt: skip
    table = table_markdown(results)
    assert "| 4 | 0.500 [0.400 – 0.900] |" in table and "the median of 3 training seeds" in table


def test_later_seeds_train_at_the_rate_the_first_chose():
    """The first seed sweeps the rates and chooses; the others train at its choice alone, and their scores, however
    they fall, do not move the choice (the rate is compared on the seeds every rate has)."""

    def record(lr, val, test, replicate):
        return {"mixer": "vla", "x": 2, "lr": lr, "replicate": replicate, "best_val": {"acc": val}, "val": None,
                "test": {"acc": test}}  # fmt: skip

    specs = tiny_plan("paper", True, ("vla",))  # lr 1e-3 and 3e-3
    first = [record(1e-3, 0.6, 0.6, 0), record(3e-3, 0.8, 0.8, 0)]
    later = seed_runs(specs, first, {"vla": 3}, "acc")
    assert [(s.train.lr, s.replicate) for s in later] == [(3e-3, 1), (3e-3, 2)]
    # a seed that finished at another rate before (an earlier result swept every seed) is kept, not dropped
    kept = seed_runs(specs, first, {"vla": 3}, "acc", frozenset({"vla-x2-lr0.001-s1"}))
    assert [(s.train.lr, s.replicate) for s in kept] == [(1e-3, 1), (3e-3, 1), (3e-3, 2)]
    records = [*first, record(3e-3, 0.1, 0.2, 1), record(3e-3, 0.1, 0.7, 2)]
    summary = summarize(records)
    assert summary["lr"] == {"vla": {"2": 3e-3}} and summary["acc"]["vla"]["2"] == 0.7
    assert summary["spread"] == {"vla": {"2": [0.2, 0.8]}}


def test_a_replicate_trains_from_the_next_seed_and_is_tested_on_the_same_examples(tmp_path):
    spec = tiny_plan("paper", True, ("gated_deltanet",))[0]
    second = replace(spec, replicate=1)
    assert second.id == spec.id + "-s1" and second.training.seed == spec.train.seed + 1
    # the first replicate keeps the key its finished runs were written with before replicates existed
    sets = (spec.task, spec.model, spec.train, spec.eval_batches, spec.eval_batch_size, spec.val_task, spec.test_task)
    assert training_key(spec) == runner._digest(sets) != training_key(second)
    first, other = (run_one(s, tmp_path / s.id, progress=False) for s in (spec, second))
    assert other["train"]["seed"] == spec.train.seed + 1 and other["replicate"] == 1
    assert other["test"] != first["test"] or other["val"] != first["val"]
    assert runner.eval_set(spec, 7)[0].inputs.equal(runner.eval_set(second, 7)[0].inputs)


def test_a_run_is_tested_at_other_lengths_too(tmp_path):
    """`eval_at`: the trained model on the test sets of longer tasks; `summarize` puts them in the mixer's row."""
    task = KLAMQARConfig(n_pairs=2, seq_len=16, vocab_size=16, min_query_pos=4)
    longer = KLAMQARConfig(n_pairs=2, seq_len=64, vocab_size=16, min_query_pos=4)
    train = TrainConfig(steps=2, batch_size=4, warmup_steps=0, eval_every=0, checkpoint_every=2)
    model = preset("debug", mixer="gated_deltanet", vocab_size=16, positions="none")
    spec = RunSpec("kla", 16, task, model, train, eval_batches=1, eval_batch_size=4, eval_at=((64, longer),))
    record = run_one(spec, tmp_path / spec.id, progress=False)
    assert set(record["test_at"]) == {"64"} and 0 <= record["test_at"]["64"]["acc"] <= 1
    assert summarize([record])["acc"]["kla"] == {"16": record["test"]["acc"], "64": record["test_at"]["64"]["acc"]}


def test_summarize_fills_every_tested_length_from_the_chosen_run():
    def record(lr, val, tests):
        return {"mixer": "kla", "x": 256, "lr": lr, "best_val": {"acc": val}, "val": None,
                "test": {"acc": tests[0]}, "test_at": {"2048": {"acc": tests[1]}}}  # fmt: skip

    summary = summarize([record(1e-3, 0.9, (0.95, 0.6)), record(3e-3, 0.5, (0.5, 0.9))])
    assert summary["acc"] == {"kla": {"256": 0.95, "2048": 0.6}} and summary["lr"]["kla"]["2048"] == 1e-3


def test_a_language_model_is_validated_and_tested_on_held_out_text(tmp_path):
    """`val_task`, `test_task`: a corpus's held-out splits, not the training windows; the record has the loss."""
    train = TrainConfig(steps=2, batch_size=2, warmup_steps=0, eval_every=0, checkpoint_every=2)
    model = preset("debug", mixer="gla", vocab_size=256, positions="none")
    held_out = {"val_task": TextConfig(seq_len=16, split="val"), "test_task": TextConfig(seq_len=16, split="test")}
    spec = RunSpec("gla", 16, TextConfig(seq_len=16), model, train, eval_batches=1, eval_batch_size=2, **held_out)
    drawn = []
    with pytest.MonkeyPatch.context() as patch:
        real = runner.generate
        patch.setattr(runner, "generate", lambda task, *a: drawn.append(task.split) or real(task, *a))
        record = run_one(spec, tmp_path / spec.id, progress=False)
    assert drawn == ["val", "test", "train", "train"] and 0 < record["test"]["loss"] < 10


def test_the_weights_with_the_lowest_validation_loss_are_tested(tmp_path):
    """`select_on="loss"`: the run keeps the weights of its best evaluation (`best.pt`) and tests those; a resumed run
    reads them back. The record's `best_val` is theirs."""
    train = TrainConfig(steps=6, batch_size=2, lr=3e-2, warmup_steps=0, eval_every=2, checkpoint_every=2)
    model = preset("debug", mixer="gla", vocab_size=256, positions="none")
    held_out = {"val_task": TextConfig(seq_len=16, split="val"), "test_task": TextConfig(seq_len=16, split="test")}
    spec = RunSpec("gla", 16, TextConfig(seq_len=16), model, train, 1, 2, **held_out, select_on="loss")
    assert training_key(spec) != training_key(replace(spec, select_on=None))
    record = run_one(spec, tmp_path / spec.id, progress=False)
    evals = [json.loads(line) for line in (tmp_path / spec.id / "metrics.jsonl").read_text().splitlines()]
    losses = [e["eval"]["loss"] for e in evals if "eval" in e]
    assert len(losses) == 3 and record["best_val"]["loss"] == min(losses) and record["selected_on"] == "loss"
    best = runner.BestWeights(tmp_path / spec.id / runner.BEST_NAME, "loss")
    assert best.metrics == record["best_val"]
    restored = DecoderLM(model)
    best.restore(restored)
    val = runner.eval_set(spec, spec.train.seed + runner.VAL_SEED_OFFSET, spec.val_task)
    assert runner.evaluate_on(restored, val, torch.device("cpu"))["loss"] == pytest.approx(min(losses), rel=1e-6)
    test = runner.eval_set(spec, spec.train.seed + runner.TEST_SEED_OFFSET, spec.test_task)
    assert runner.evaluate_on(restored, test, torch.device("cpu")) == pytest.approx(record["test"], rel=1e-6)
    # resumed from its last checkpoint with best.pt in place, the run tests the same weights
    (tmp_path / spec.id / "result.json").unlink()
    assert run_one(spec, tmp_path / spec.id, progress=False)["test"] == record["test"]
    # a checkpoint past a validation without best.pt (trained without select_on) is refused, not resumed
    (tmp_path / spec.id / "result.json").unlink()
    (tmp_path / spec.id / runner.BEST_NAME).unlink()
    with pytest.raises(ValueError, match="written without select_on='loss'"):
        run_one(spec, tmp_path / spec.id, progress=False)


def test_the_weights_with_the_highest_validation_accuracy_are_tested(tmp_path):
    """`select_on="acc"` (the KLA authors' protocol): the best evaluation is the one of the highest accuracy."""
    best = runner.BestWeights(tmp_path / runner.BEST_NAME, "acc")
    model = DecoderLM(preset("debug", mixer="gla"))
    for acc in (0.2, 0.9, 0.5, float("nan")):
        best.offer(model, {"acc": acc, "loss": 1.0})
    assert best.metrics["acc"] == 0.9
    assert runner.BestWeights(tmp_path / runner.BEST_NAME, "acc").metrics["acc"] == 0.9  # read back on resume
    # a run: the record's best_val is the evaluation of the highest accuracy, whose weights were tested
    train = TrainConfig(steps=6, batch_size=4, lr=3e-2, warmup_steps=0, eval_every=2, checkpoint_every=2,
                        min_lr_ratio=1.0)  # fmt: skip
    task = KLAMQARConfig(n_pairs=2, seq_len=24, vocab_size=16, min_query_pos=8)
    spec = RunSpec("gla", 24, task, preset("debug", mixer="gla", vocab_size=16), train, 1, 4, select_on="acc")
    record = run_one(spec, tmp_path / "run", progress=False)
    evals = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    accs = [e["eval"]["acc"] for e in evals if "eval" in e]
    assert len(accs) == 3 and record["best_val"]["acc"] == max(accs) and record["selected_on"] == "acc"


def test_summarize_and_table_by_loss():
    """A language-modelling experiment chooses its lr on the lowest validation loss and reports the test loss."""

    def record(lr, val, test):
        return {"mixer": "gla", "x": 512, "lr": lr, "best_val": {"loss": val}, "val": None, "test": {"loss": test}}

    summary = summarize([record(1e-3, 1.2, 1.3), record(3e-3, 1.1, 1.25)], "loss")
    assert summary == {"loss": {"gla": {"512": 1.25}}, "lr": {"gla": {"512": 3e-3}}, "spread": {}}
    results = {"experiment": "lm", "protocol": "paper", "quick": False, "metric": "loss", "mixers": ["gla"],
               "table": summary["loss"], "paper": {}, "description": "", "command": "c",
               "environment": {"cpu": "x", "torch": "2", "date": "d"}, "x_name": "seq_len"}  # fmt: skip
    assert "Test loss in nats a token" in table_markdown(results) and "| 512 | 1.250 |" in table_markdown(results)


def test_learning_curves_of_the_chosen_runs_are_plotted_beside_the_scores(tmp_path):
    """A language-modelling result carries each replicate's training and validation loss at the chosen lr."""

    def run(lr, replicate, losses):
        record = {"mixer": "gla", "x": 512, "lr": lr, "replicate": replicate}
        metrics = [
            {"step": 10, "loss": losses[0]},
            {"step": 20, "loss": losses[1]},
            {"step": 20, "eval": {"loss": losses[2]}},
        ]
        return FinishedRun(record, tuple(metrics), f"lm/paper/runs/{lr}-{replicate}")

    runs = {"b": run(1e-3, 1, (4.0, 3.0, 3.1)), "a": run(1e-3, 0, (5.0, 3.5, 3.6)), "c": run(3e-3, 0, (9.0, 9.0, 9.0))}
    curves = loss_curves(runs, {"gla": {"512": 1e-3, "1024": 1e-3}})
    assert curves == {"gla": [{"train": [[10, 5.0], [20, 3.5]], "val": [[20, 3.6]]},
                              {"train": [[10, 4.0], [20, 3.0]], "val": [[20, 3.1]]}]}  # fmt: skip
    results = {"experiment": "lm", "protocol": "paper", "quick": False, "metric": "loss", "mixers": ["gla"],
               "table": {"gla": {"512": 3.3}}, "paper": {}, "x_name": "seq_len", "curves": curves}  # fmt: skip
    plot(results, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 5_000


def test_lm_length_plan():
    experiment = EXPERIMENTS["ccq-lm-length"]
    runs = experiment.plan("paper", False, experiment.mixers)
    assert experiment.metric == "loss" and [r.mixer for r in runs] == list(experiment.mixers)
    assert {(r.task, r.val_task, r.test_task) for r in runs} == {
        (TextConfig(512), TextConfig(512, "val"), TextConfig(512, "test"))
    }
    assert {x: t.split for r in runs for x, t in r.eval_at} == {1024: "test", 2048: "test", 4096: "test"}
    assert {(r.model.vocab_size, r.model.positions, r.model.max_seq_len) for r in runs} == {(256, "none", 4096)}


def test_kla_plans():
    """The KLA paper's recipe, as the paper states it: trained once at 256 (S-NIAH 1K), tested up to 8× that."""
    for name, lengths in (("kla-mqar", (256, 512, 1024, 2048)), ("kla-sniah", (1024, 2048, 4096, 8192))):
        experiment = EXPERIMENTS[name]
        runs = experiment.plan("paper", False, experiment.mixers)
        assert [r.mixer for r in runs] == ["kla", "gated_deltanet", "mamba2"]
        assert {(r.x, r.task.seq_len, tuple(x for x, _ in r.eval_at)) for r in runs} == {
            (lengths[0], lengths[0], lengths[1:])
        }
        assert {t.seq_len for r in runs for x, t in r.eval_at} == set(lengths[1:])
        assert {(r.model.d_model, r.model.n_layers, r.model.n_heads, r.model.mlp_hidden, r.model.vocab_size)
                for r in runs} == {(256, 2, 4, 1024, 8192)}  # fmt: skip
        assert all(r.model.max_seq_len >= lengths[-1] for r in runs)
        train = {(r.train.steps, r.train.batch_size, r.train.lr, r.train.betas, r.train.weight_decay, r.train.clip)
                 for r in runs}  # fmt: skip
        assert train == {(10_000, 32, 1e-3, (0.9, 0.95), 0.1, 1.0)} and experiment.protocols[:2] == ("paper", "fair")
    assert EXPERIMENTS["kla-mqar"].plan("paper", False, ("kla",))[0].task == KLAMQARConfig()
    ablation = EXPERIMENTS["kla-ablation"].plan("paper", False, ("gated_deltanet-raw_keys",))
    assert ablation[0].eval_at == () and ablation[0].model.mixer_options == {"raw_keys": True}
    # the fair protocol tries three rates per mixer; its run at the paper's rate is the paper protocol's
    fair = EXPERIMENTS["kla-mqar"].plan("fair", False, ("kla",))
    assert sorted(r.train.lr for r in fair) == [3e-4, 1e-3, 3e-3]
    paper_run = EXPERIMENTS["kla-mqar"].plan("paper", False, ("kla",))[0]
    assert [training_key(r) for r in fair if r.train.lr == 1e-3] == [training_key(paper_run)]
    assert len(EXPERIMENTS["kla-sniah"].plan("fair", True, ("kla",))) == 3
    # the runs these experiments share train the same (runner.training_key), so each is trained once
    for quick in (False, True):
        keys = {}
        for name in ("kla-mqar", "kla-ablation", "ccq-mqar", "kla-sniah", "ccq-sniah"):
            for run in EXPERIMENTS[name].plan("paper", quick, ("kla", "gated_deltanet")):
                keys.setdefault((name.endswith("sniah"), run.mixer), set()).add(training_key(run))
        assert all(len(shared) == 1 for shared in keys.values()), keys
    ccq = EXPERIMENTS["ccq-sniah"].plan("paper", False, EXPERIMENTS["ccq-sniah"].mixers)
    options = [(r.model.mixer, r.model.mixer_options.get("short_conv", False), r.model.mixer_options.get("ccq", False))
               for r in ccq]  # fmt: skip
    bases = (("gla", False), ("gla", True), ("gated_deltanet", False), ("kla", False))
    assert options == [(base, conv, with_ccq) for base, conv in bases for with_ccq in (False, True)]
    quick = EXPERIMENTS["kla-mqar"].plan("paper", True, ("kla",))[0]
    assert quick.train.steps == 1000 and quick.model.d_model == 64 and [x for x, _ in quick.eval_at] == [96, 192, 384]
    for experiment in (EXPERIMENTS[n] for n in ("kla-mqar", "kla-sniah", "kla-ablation")):  # no paper number beside
        for run in experiment.plan("paper", True, experiment.mixers):  # a quick one
            tested = {run.x, *(x for x, _ in run.eval_at)}
            assert not tested & {x for row in experiment.paper.values() for x in row}


def test_the_authors_protocols():
    """KLA's authors: a constant lr and the best validation checkpoint, the rest the paper's recipe; the VLA long
    budget: a constant lr up to 20,000 steps, stopping on solving (its steps are the steps to solve)."""
    authors = EXPERIMENTS["kla-mqar"].plan("authors", False, ("kla",))
    paper_run = EXPERIMENTS["kla-mqar"].plan("paper", False, ("kla",))[0]
    assert [(r.train.warmup_steps, r.train.min_lr_ratio, r.train.lr, r.select_on) for r in authors] == [
        (0, 1.0, 1e-3, "acc")
    ]
    assert replace(authors[0].train, warmup_steps=500, min_lr_ratio=0.0) == paper_run.train
    assert training_key(authors[0]) != training_key(paper_run) and paper_run.select_on is None
    assert EXPERIMENTS["kla-mqar"].plan("authors", True, ("kla",))[0].train.warmup_steps == 0
    long = EXPERIMENTS["vla-mqar-capacity"].plan("long", False, ("softmax",))
    assert sorted({r.train.lr for r in long}) == [3e-4, 1e-3] and {r.x for r in long} == {4, 8, 12, 16, 24}
    assert {(r.train.steps, r.train.batch_size, r.train.min_lr_ratio, r.train.early_stop_threshold) for r in long} == {
        (20_000, 64, 1.0, 0.995)
    }
    assert "long" in EXPERIMENTS["vla-mqar-capacity"].protocols and "fair" in EXPERIMENTS["ccq-sniah"].protocols
    # S-NIAH's long budget: the KLA recipe at a constant lr after its warmup, stopped once solved, never for patience
    (sniah,) = EXPERIMENTS["ccq-sniah"].plan("long", False, ("gla",))
    paper_run = EXPERIMENTS["ccq-sniah"].plan("paper", False, ("gla",))[0]
    assert (sniah.train.steps, sniah.train.min_lr_ratio, sniah.train.early_stop_threshold, sniah.train.patience) == (
        20_000, 1.0, 0.99, 0
    )  # fmt: skip
    assert replace(sniah.train, steps=10_000, min_lr_ratio=0.0, early_stop_threshold=1.0, patience=4,
                   checkpoint_every=500) == paper_run.train  # fmt: skip


def test_the_authors_tasks():
    """The VLA authors' long-context task fills the tail with queries; their copy scores each token against itself."""
    runs = EXPERIMENTS["vla-mqar-length-queries"].plan("paper", False, ("vla",))
    assert [(r.x, r.task.length, r.task.queries, r.task.filler_len) for r in runs] == [
        (T, T, T - 17, 0) for T in (49, 64, 128, 256, 512)
    ]
    copy, identity = (EXPERIMENTS[n].plan("paper", False, ("vla",))[0] for n in ("vla-copy", "vla-copy-identity"))
    assert not copy.task.identity and identity.task.identity and identity.train == copy.train


def test_state_tracking_plans():
    stack = EXPERIMENTS["kla-stack"].plan("paper", False, EXPERIMENTS["kla-stack"].mixers)
    assert [r.mixer for r in stack] == ["kla", "gated_deltanet", "mamba2"]
    assert {(r.x, r.task.seq_len, tuple(x for x, _ in r.eval_at)) for r in stack} == {(128, 128, (256, 512))}
    palindrome = EXPERIMENTS["kla-palindrome"].plan("paper", False, ("kla",))[0]
    assert palindrome.task.reverse and palindrome.x == 32 and [x for x, _ in palindrome.eval_at] == [64, 128]
    assert palindrome.model.max_seq_len >= 2 * 128 + 1 and palindrome.train.steps == 10_000
    quick = EXPERIMENTS["kla-palindrome"].plan("paper", True, ("kla",))[0]
    assert quick.task.vocab_size == 128 and quick.model.d_model == 64


def test_registry_plans():
    capacity = EXPERIMENTS["vla-mqar-capacity"]
    paper_runs = capacity.plan("paper", False, capacity.mixers)
    assert len(paper_runs) == 7 * 5
    assert {(r.train.steps, r.train.batch_size, r.train.lr, r.train.warmup_steps) for r in paper_runs} == {
        (3000, 64, 3e-4, 300)
    }
    assert {r.task.length for r in paper_runs} == {13, 25, 37, 49, 73}
    fair_runs = capacity.plan("fair", False, ("softmax",))
    assert sorted({r.train.lr for r in fair_runs}) == [3e-4, 1e-3, 3e-3]
    quick_runs = capacity.plan("paper", True, ("vla",))
    assert [r.x for r in quick_runs] == [4, 8] and quick_runs[0].train.steps == 500
    for name, filler in (("vla-mqar-length", "between"), ("vla-mqar-length-after", "after")):
        runs = EXPERIMENTS[name].plan("paper", False, ("vla",))
        assert {r.task.length for r in runs} == {49, 64, 128, 256, 512}
        assert {r.task.filler for r in runs} == {filler}
        assert {(r.train.steps, r.train.batch_size, r.train.lr, r.train.warmup_steps) for r in runs} == {
            (2000, 64, 3e-4, 200)
        }
    copy = EXPERIMENTS["vla-copy"].plan("paper", False, ("vla",))
    assert {(r.train.steps, r.train.batch_size, r.train.lr, r.train.warmup_steps) for r in copy} == {
        (1500, 32, 3e-4, 150)
    }
    assert [r.task.n_tokens for r in copy] == [31]
    ccq = next(r for r in paper_runs if r.mixer == "ccq-gated_deltanet")
    assert ccq.model.mixer == "gated_deltanet" and ccq.model.mixer_options == {"ccq": True}


def test_parse_mixers():
    assert parse_mixers(None, ("vla",)) == ("vla",)
    assert parse_mixers("softmax, vla", ("vla",)) == ("softmax", "vla")
    with pytest.raises(ValueError, match="^--mixers: unknown mixer"):
        parse_mixers("vla,transformer", ())
    with pytest.raises(ValueError, match="^--mixers: expected comma-separated names"):
        parse_mixers("", ("vla",))  # an empty list is a mistake, not "the default"


def test_overload_plans_split_the_model_into_heads_of_d_h():
    for name, d_h in (("vla-mqar-overload", 32), ("vla-mqar-overload-dh16", 16)):
        runs = EXPERIMENTS[name].plan("paper", False, ("vla",))
        assert [r.x for r in runs] == [d_h // 4, d_h // 2, 3 * d_h // 4, d_h, 5 * d_h // 4, 3 * d_h // 2, 2 * d_h]
        assert {r.model.d_model // r.model.n_heads for r in runs} == {d_h}
        assert max(r.task.length for r in runs) == 6 * d_h + 1 <= runs[0].model.max_seq_len
        assert EXPERIMENTS[name].paper == {"vla": {d_h: 0.62}}


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_pool_workers_die_with_the_command(tmp_path):
    """A command killed alone (SIGKILL to it, not to its group) takes its training workers with it."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from linattn.experiments.runner import _die_with_parent\n"
        "if __name__ == '__main__':\n"
        "    context = multiprocessing.get_context('spawn')\n"
        "    pool = ProcessPoolExecutor(1, mp_context=context, initializer=_die_with_parent)\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    pool.submit(time.sleep, 60)\n"
        "    time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        if not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"worker {worker} outlived its parent")


def test_a_failed_run_does_not_stop_the_others(tmp_path):
    """One run raises (its model's position table is shorter than its sequences); the other finishes and is
    kept, and the failure is named at the end."""
    from linattn.experiments.runner import RunsFailed, run_all

    good = tiny_plan("paper", True, ("vla",))[0]
    bad = RunSpec(
        "softmax", 3, good.task, preset("debug", mixer="softmax", vocab_size=16, max_seq_len=4), good.train, 2, 4
    )
    for jobs, where in ((1, tmp_path / "one"), (2, tmp_path / "two")):
        with pytest.raises(RunsFailed, match=r"1 of 2 runs failed: softmax-x3-lr0\.001"):
            run_all([bad, good], where, jobs=jobs)
        assert (where / good.id / "result.json").exists() and not (where / bad.id / "result.json").exists()


def test_past_the_start_by_time_no_run_begins(tmp_path):
    """A finished run is read back after the start-by time; one that would train is not begun, and the count of
    those is named at the end; a later call without the limit trains it."""
    from linattn.experiments.runner import RunsFailed, run_all

    first, second = tiny_plan("paper", True, ("vla",))[:2]
    for jobs, where in ((1, tmp_path / "one"), (2, tmp_path / "two")):
        run_all([first], where, jobs=jobs)
        with pytest.raises(RunsFailed, match=r"^1 of 2 runs not started \(the start-by time had passed\)$"):
            run_all([first, second], where, jobs=jobs, start_by=time.time() - 1)
        assert not (where / second.id).exists()
        assert [r["id"] for r in run_all([first, second], where, jobs=jobs)] == [first.id, second.id]


def test_the_longest_runs_start_first():
    """A pool's order: longer sequences, more steps or a wider model first; equal work keeps the plan's order."""
    from linattn.experiments.runner import training_work
    from linattn.tasks import MQARMixtureConfig, VLAMQARConfig

    spec = tiny_plan("paper", True, ("vla",))[0]
    longer = replace(spec, task=replace(spec.task, seq_len=4 * spec.task.length))
    more_steps = replace(spec, train=replace(spec.train, steps=2 * spec.train.steps))
    wider = replace(spec, model=replace(spec.model, d_model=2 * spec.model.d_model))
    assert training_work(longer) == 4 * training_work(spec)
    assert training_work(more_steps) == training_work(wider) // 2 == 2 * training_work(spec)
    mixture = MQARMixtureConfig((VLAMQARConfig(n_pairs=2), VLAMQARConfig(n_pairs=2, seq_len=64)))
    assert training_work(replace(spec, task=mixture)) == training_work(spec) * 64 // spec.task.length
    order = [spec, more_steps, longer, replace(spec, replicate=1)]
    assert sorted(order, key=training_work, reverse=True) == [longer, more_steps, spec, order[-1]]


def test_progress_reads_the_run_folders(tmp_path):
    """Finished runs show their test metric, a begun one its checkpoint's step (and the log's where it is ahead),
    the others a dash; `mixers` picks the rows as `run --mixers` did."""
    from linattn.experiments.progress import progress
    from linattn.experiments.runner import run_all
    from linattn.train.checkpoint import save_checkpoint

    specs = tiny_plan("paper", True, TINY.mixers)
    runs = TINY.output_dir(tmp_path, "paper", True) / "runs"
    record = run_all(specs[:1], runs)[0]
    (runs / specs[1].id).mkdir()
    (runs / specs[1].id / "metrics.jsonl").write_text('{"step": 2, "loss": 1.0}\n{"step": 4, "loss": 0.5}\n')
    lines = progress(TINY, "paper", True, tmp_path).splitlines()
    assert lines[0] == "tiny — protocol `paper` (quick): 1 of 4 runs finished, 1 begun; test `acc` by learning rate"
    assert lines[2:] == [
        "| mixer, n_pairs | lr 0.001 | lr 0.003 |",
        "|---|---:|---:|",
        f"| vla, 2 | {record['test']['acc']:.3f} | step 0 (log 4) |",
        "| softmax, 2 | – | – |",
    ]
    save_checkpoint(runs / specs[1].id / "checkpoint.pt", {"run": {"step": 2}})
    (runs / specs[2].id).mkdir()
    (runs / specs[2].id / "checkpoint.pt").write_bytes(b"cut off")
    lines = progress(TINY, "paper", True, tmp_path, mixers=("vla",)).splitlines()
    assert lines[0].startswith("tiny — protocol `paper` (quick): 1 of 2 runs finished, 1 begun")
    assert lines[4:] == [f"| vla, 2 | {record['test']['acc']:.3f} | step 2 (log 4) |"]
    assert progress(TINY, "paper", True, tmp_path).splitlines()[5] == (
        "| softmax, 2 | step ? (log 0; unreadable checkpoint) | – |"
    )
    # below the grid's edge (`lr_below`): the runs that began, none for the others
    below = replace(TINY, lr_below=3e-4)
    edge = below.output_dir(tmp_path, "paper", False) / "runs" / "vla-x2-lr0.0003"
    edge.mkdir(parents=True)
    (edge / "metrics.jsonl").write_text('{"step": 2, "loss": 1.0}\n')
    assert progress(below, "paper", False, tmp_path).splitlines()[2:] == [
        "| mixer, n_pairs | lr 0.0003 | lr 0.001 | lr 0.003 |",
        "|---|---:|---:|---:|",
        "| vla, 2 | step 0 (log 2) | – | – |",
        "| softmax, 2 |  | – | – |",
    ]


def test_a_run_another_experiment_finished_is_copied_not_trained(tmp_path, monkeypatch):
    """Same training (task, model, config, validation and test sets) under another name and with fewer tests at
    other lengths: the record and metrics are copied, `reused_from` names the source (never a copy); a different
    training is not."""
    task = KLAMQARConfig(n_pairs=2, seq_len=16, vocab_size=16, min_query_pos=4)
    longer = KLAMQARConfig(n_pairs=2, seq_len=32, vocab_size=16, min_query_pos=4)
    train = TrainConfig(steps=2, batch_size=4, warmup_steps=0, eval_every=0, checkpoint_every=2)
    model = preset("debug", mixer="gated_deltanet", vocab_size=16, positions="none")
    source = RunSpec("gdn", 16, task, model, train, eval_batches=1, eval_batch_size=4, eval_at=((32, longer),))
    first = run_one(source, tmp_path / "a" / "paper" / "runs" / source.id, progress=False, reuse_root=tmp_path)

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(runner, "train", no_training)
    same = RunSpec("gated_deltanet", 16, task, model, train, eval_batches=1, eval_batch_size=4)
    where = tmp_path / "0" / "paper" / "runs" / same.id  # "0" sorts before "a"
    copy = run_one(same, where, progress=False, reuse_root=tmp_path)
    assert copy["test"] == first["test"] and copy["mixer"] == "gated_deltanet" and "test_at" not in copy
    assert copy["reused_from"] == f"a/paper/runs/{source.id}" and (where / "metrics.jsonl").exists()
    assert json.loads((where / "result.json").read_text()) == copy
    again = run_one(same, tmp_path / "b" / "paper" / "runs" / same.id, progress=False, reuse_root=tmp_path)
    assert again["reused_from"] == f"a/paper/runs/{source.id}"  # the run trained, not the copy found first
    for other in (
        RunSpec("gdn", 16, task, model, TrainConfig(**{**train.__dict__, "lr": 2e-3}), 1, 4),  # another lr
        RunSpec("gdn", 16, task, model, train, 1, 4, eval_at=((64, longer),)),  # a test the source lacks
    ):
        with pytest.raises(AssertionError, match="trained again"):
            run_one(other, tmp_path / "c" / "paper" / "runs" / other.id, progress=False, reuse_root=tmp_path)


def test_zoology_plan():
    """Zoology's data (the training mix weighted as its example counts, the test mix uniform, validation on it too),
    its model at four widths in heads of 64, the learning rate chosen from three; quick: two small widths, one lr."""
    from linattn.experiments import zoology
    from linattn.tasks import ZOOLOGY_TEST_MIX, ZOOLOGY_TRAIN_WEIGHTS, MQARMixtureConfig

    experiment = EXPERIMENTS["zoology-mqar"]
    runs = experiment.plan("fair", False, ("gated_deltanet",))
    assert [(r.x, r.model.n_heads, r.train.lr) for r in runs[::3]] == [(64, 1, 3e-4), (128, 2, 3e-4), (256, 4, 3e-4),
                                                                       (512, 8, 3e-4)]  # fmt: skip
    assert {r.train.lr for r in runs} == {3e-4, 1e-3, 3e-3} and runs[0].model.block == "zoology"
    task, test = runs[0].task, runs[0].test_task
    assert isinstance(task, MQARMixtureConfig) and task.weights == ZOOLOGY_TRAIN_WEIGHTS
    assert [(c.seq_len, c.n_pairs) for c in test.configs] == list(ZOOLOGY_TEST_MIX) and runs[0].val_task == test
    quick = experiment.plan("fair", True, ("deltanet",))
    assert [r.x for r in quick] == list(zoology.QUICK_WIDTHS) and quick[0].train.steps == 500
    assert experiment.protocols == ("fair",) and experiment.metric == "acc_example_mean"


def test_accuracy_against_state_size_end_to_end(tmp_path):
    """A state-size experiment writes each run's state size, a table of them, the reference points, and a plot."""
    from linattn.experiments import zoology

    def plan(protocol, quick, mixers):
        short = TrainConfig(steps=4, batch_size=4, warmup_steps=1, eval_every=2, checkpoint_every=4, log_every=2)
        return [replace(s, train=replace(short, lr=s.train.lr), eval_batches=1, eval_batch_size=4)
                for s in zoology.plan(protocol, True, mixers)]  # fmt: skip

    experiment = replace(EXPERIMENTS["zoology-mqar"], plan=plan)
    out = experiment.run(
        "fair", quick=True, mixers=("deltanet", "softmax"), device="cpu", jobs=1, root=tmp_path, force=False, command=""
    )
    results = json.loads((out / "results.json").read_text())
    sizes = results["state_size"]
    assert 2 * 32 * 32 <= sizes["deltanet"]["32"] < 2 * 64 * 64 <= sizes["deltanet"]["64"]  # 2 layers, one head
    assert sizes["softmax"]["64"] >= 2 * 2 * 64 * 128  # keys and values of 2 layers at the longest test, T = 128
    assert set(results["table"]["deltanet"]) == {"32", "64"}
    table = (out / "table.md").read_text()
    assert "State size (floats" in table and (out / "plot.png").exists()
    assert results["paper"] == {} and "Reference points" not in table  # a quick run is not the paper's run
    full = {**results, "quick": False, "paper": {"deltanet": {"9000": 0.79}}}
    assert "Reference points (accuracy at a state size): deltanet 0.79 at 9,000 floats." in table_markdown(full)
    # the README's block: the chosen lr's accuracy with the state size, then every run's accuracy by lr
    with pytest.raises(FileNotFoundError, match="--results: no .*zoology-mqar/fair/results.json"):
        zoology_tables(tmp_path)
    (tmp_path / "zoology-mqar" / "fair").mkdir()
    (tmp_path / "zoology-mqar" / "fair" / "results.json").write_text(json.dumps(full))
    block = zoology_tables(tmp_path).splitlines()
    assert block[2:4] == ["| mixer | d 32 | d 64 |", "|---|---:|---:|"]
    accuracy = {(r["mixer"], r["x"]): r["test"]["acc_example_mean"] for r in results["runs"]}
    chosen = [f"{results['table']['deltanet'][str(d)]:.3f} ({sizes['deltanet'][str(d)]:,})" for d in (32, 64)]
    assert block[4] == "| deltanet | " + " | ".join(chosen) + " |"
    assert block[6:] == [
        "",
        "Every run's test accuracy, lr 0.003:",
        "",
        "| mixer | d 32 | d 64 |",
        "|---|---:|---:|",
        *(f"| {m} | {accuracy[m, 32]:.3f} | {accuracy[m, 64]:.3f} |" for m in ("deltanet", "softmax")),
    ]
