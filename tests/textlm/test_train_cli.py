"""From text files to a trained model and a HuggingFace folder by the command line: `linattn train` writes its
run folder, an interrupted run resumes to the same weights, `linattn tokenizer train` makes a BPE a run can use,
`linattn export-hf` writes what the Auto classes open with the run's logits; bad input is one line, exit 2."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import linattn.models.hf  # noqa: F401  (registers the linattn model type with the Auto classes)
from linattn.cli import main
from linattn.data.packing import PackedText
from linattn.io import _new_file_mode
from linattn.textlm.run import load_run, plan_run, read_run, train_text
from tests.data.corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

# the tiny preset made smaller still: a few seconds a run on a CPU
SMALL = ["--preset", "tiny", "--mixer", "kla", "--device", "cpu", "--no-tensorboard"]
SMALL += [f"--set={s}" for s in ("d_model=32", "mlp_hidden=64", "seq_len=64", "batch_size=4", "eval_tokens=512")]
SMALL += [f"--set={s}" for s in ("log_every=1", "eval_every=3", "checkpoint_every=2")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), count=40)


def timeless(path) -> list[dict]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records]


def test_train_writes_its_run_folder_and_resumes_exactly(corpus, tmp_path, monkeypatch, capsys):
    command = ["train", "--data", str(corpus), *SMALL, "--steps", "6"]
    assert main([*command, "--out", str(tmp_path / "straight")]) == 0
    summary = capsys.readouterr().out
    assert "straight: 6 steps; val_loss" in summary and "tokens/s" in summary
    straight = tmp_path / "straight"
    assert {p.name for p in straight.iterdir()} >= {"run.json", "checkpoint.pt", "metrics.jsonl", "cache"}
    assert sorted(p.name for p in (straight / "cache").iterdir()) == ["train.bin", "train.json", "val.bin", "val.json"]
    log = timeless(straight / "metrics.jsonl")
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5, 6]
    assert [set(r["eval"]) for r in log if "eval" in r] == [{"val_loss", "val_ppl"}] * 2
    run = read_run(straight)
    assert (run.model.vocab_size, run.model.d_model, run.train.steps, run.data_config.seq_len) == (256, 32, 6, 64)

    # killed while drawing the batch of update 6: the checkpoint of update 4 is where it resumes
    draws, batch = [], PackedText.batch
    monkeypatch.setattr(
        PackedText, "batch", lambda *a: draws.append(1) or (_interrupt() if len(draws) == 6 else batch(*a))
    )
    assert main([*command, "--out", str(tmp_path / "resumed")]) == 130
    monkeypatch.setattr(PackedText, "batch", batch)
    assert main([*command, "--out", str(tmp_path / "resumed")]) == 2  # a run is there: --resume or another --out
    assert "holds a run already" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "resumed"), "--resume", "--device", "cpu", "--no-tensorboard"]) == 0
    weights = [torch.load(tmp_path / r / "checkpoint.pt", weights_only=True)["model"] for r in ("straight", "resumed")]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert timeless(tmp_path / "resumed" / "metrics.jsonl") == log


def _interrupt():
    raise KeyboardInterrupt


def test_a_bpe_run_exported_opens_with_the_auto_classes(corpus, tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    assert main(["tokenizer", "train", "--data", str(corpus), "--vocab-size", "400", "--out", str(tokenizer)]) == 0
    run_dir, out = tmp_path / "run", tmp_path / "hf"
    train = ["train", "--data", str(corpus), "--tokenizer", str(tokenizer), *SMALL, "--steps", "2"]
    assert main([*train, "--out", str(run_dir)]) == 0
    assert (run_dir / "tokenizer.json").read_bytes() == tokenizer.read_bytes()  # the run folder is self-contained
    assert main(["export-hf", str(run_dir), str(out)]) == 0

    _, model, tok = load_run(run_dir)
    hf_model = AutoModelForCausalLM.from_pretrained(out).eval()
    hf_tokenizer = AutoTokenizer.from_pretrained(out)
    text = (corpus / "part0" / "assert.txt").read_text()[:300]
    ids = hf_tokenizer(text)["input_ids"]
    assert ids == tok.encode(text) and hf_tokenizer.decode(ids) == text
    assert hf_tokenizer.eos_token == "<|endoftext|>" and hf_model.config.eos_token_id == tok.eod_id == 0
    padded = hf_tokenizer([text[:5], text[:40]], padding=True, return_tensors="pt")  # a batch of prompts as is
    assert hf_tokenizer.padding_side == "left" and padded["input_ids"][0, 0] == hf_model.config.pad_token_id == 0
    greedy = {"max_new_tokens": 4, "do_sample": False}
    batch = hf_model.generate(**padded, **greedy)[0, -4:]
    alone = hf_model.generate(**hf_tokenizer([text[:5]], return_tensors="pt"), **greedy)[0, -4:]
    assert torch.equal(batch, alone)
    with torch.no_grad():
        assert torch.equal(hf_model(torch.tensor([ids])).logits, model(torch.tensor([ids]))[0])
    assert main(["export-hf", str(run_dir), str(out)]) == 2  # no silent overwrite
    assert main(["export-hf", str(run_dir), str(out), "--force"]) == 0
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {oct(_new_file_mode())}  # others may read it
    assert main(["export-hf", str(run_dir), str(corpus), "--force"]) == 2  # --force replaces an export only
    assert (corpus / "part0" / "assert.txt").exists()


def test_a_bytes_run_exports_a_byte_tokenizer(corpus, tmp_path):
    run_dir, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "--data", str(corpus / "part1"), *SMALL, "--steps", "1", "--out", str(run_dir)]) == 0
    assert main(["export-hf", str(run_dir), "/proc/linattn-export"]) == 2  # a folder the system refuses: one line
    assert main(["export-hf", str(run_dir), str(out)]) == 0
    hf_tokenizer = AutoTokenizer.from_pretrained(out)
    text = "héllo wörld\n"
    assert hf_tokenizer(text)["input_ids"] == list(text.encode()) and hf_tokenizer.decode(list(text.encode())) == text
    _, model, _ = load_run(run_dir)
    ids = torch.tensor([list(text.encode())])
    with torch.no_grad():
        assert torch.equal(AutoModelForCausalLM.from_pretrained(out)(ids).logits, model(ids)[0])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--out", "{tmp}/r"], "data: expected a corpus, --data FILE|DIR|GLOB"),
        (["train", "--data", "{tmp}/none", "--out", "{tmp}/r"], "data: '{tmp}/none' is no file, folder or glob"),
        (["train", "--data", "{corpus}", "--set", "lrr=1", "--out", "{tmp}/r"], "unknown key 'lrr'; did you mean lr?"),
        (["train", "--data", "{corpus}", "--preset", "huge", "--out", "{tmp}/r"], "preset: unknown preset 'huge'"),
        (["train", "--data", "{corpus}", "--tokenizer", "t.json", "--out", "{tmp}/r"], "tokenizer: expected 'bytes'"),
        (["train", "--out", "{tmp}", "--resume"], "resume: no run to resume in"),
        (["train", "--data", "{corpus}", "--device", "tpu", "--out", "{tmp}/r"], "--device: expected 'cpu'"),
        (["export-hf", "{tmp}", "{tmp}/hf"], "not a run folder of `linattn train` (no run.json)"),
        (["tokenizer", "train", "--data", "{corpus}", "--vocab-size", "9", "--out", "{tmp}/t"], "vocab_size: expected"),
        (
            ["train", "--data", "{corpus}", "--set", 'mixer_options={{"bogus": 1}}', "--out", "{tmp}/r"],
            "mixer_options: ['bogus'] not options of 'kla'",
        ),
        (
            ["train", "--data", "{corpus}", "--set", 'mixer_options={{"ccq": "false"}}', "--out", "{tmp}/r"],
            "'ccq' of 'kla' expected a bool, got str 'false'",
        ),
        (
            ["train", "--data", "{corpus}", "--mixer", "gla", "--set", "mixer=kla", "--out", "{tmp}/r"],
            "--set mixer=…: the mixer is --mixer's ('gla'); name it once",
        ),
        (
            ["train", "--data", "{corpus}", "--set", "early_stop_metric=val_acc", "--out", "{tmp}/r"],
            "--set early_stop_metric=val_acc: a text run's evals (val_loss, val_ppl) are lower-is-better",
        ),
        (
            ["train", "--data", "{corpus}", "--set", "positions=rope", "--out", "{tmp}/r"],
            "mixer_options={{'rope': True}}",
        ),
        (
            ["train", "--data", "{corpus}", "--steps", "0", "--out", "{tmp}/r"],
            "--steps: expected a positive int, got 0",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, corpus, tmp_path, capsys):
    fill = {"tmp": str(tmp_path), "corpus": str(corpus)}
    assert main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("linattn: error: ") and message.format(**fill) in err and err.count("\n") == 1


def test_resume_refuses_other_settings(corpus, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    assert main(["train", "--data", str(corpus), *SMALL, "--steps", "1", "--out", run_dir]) == 0
    for option, message in (
        (["--steps", "2"], "--steps 2: the run in"),
        (["--mixer", "gla"], "--mixer gla: the run in"),
        (["--data", str(tmp_path)], f"--data {tmp_path}: the run in"),
        (["--set", "lr=0.5"], "--set lr=0.5: differs from the run"),
    ):
        assert main(["train", "--out", run_dir, "--resume", *option]) == 2
        assert message in capsys.readouterr().err
    assert main(["train", "--data", str(corpus), *SMALL, "--steps", "1", "--out", run_dir, "--resume"]) == 0


def test_resume_refuses_a_changed_corpus(corpus, tmp_path, capsys):
    data, run_dir = tmp_path / "corpus", str(tmp_path / "run")
    shutil.copytree(corpus, data)
    assert main(["train", "--data", str(data), *SMALL, "--steps", "1", "--out", run_dir]) == 0
    (data / "part1" / "added.txt").write_text("text the run did not begin on\n" * 50)
    assert main(["train", "--out", run_dir, "--resume"]) == 2  # it would go on training on other text
    assert f"data: {data} changed since the run in {run_dir} began" in capsys.readouterr().err
    with pytest.raises(ValueError, match="changed since the run in"):  # the same from Python, with a new plan
        train_text(plan_run(data, steps=1), run_dir, progress=False, tensorboard=False)


def test_steps_bring_their_own_warmup(corpus):
    """`--steps N` warms up over 5% of N, as every preset does, so that a short run also decays."""
    assert [plan_run(corpus, steps=n).train.warmup_steps for n in (10, 20, 400)] == [1, 1, 20]


def test_prepare_only_tokenises_and_trains_nothing(corpus, tmp_path, capsys):
    run_dir, cache = tmp_path / "run", tmp_path / "shared-cache"
    command = ["train", "--data", str(corpus), *SMALL, "--steps", "1", "--out", str(run_dir), "--cache", str(cache)]
    assert main([*command, "--prepare-only"]) == 0
    assert f"into {cache}" in capsys.readouterr().out
    assert sorted(p.name for p in cache.iterdir()) == ["train.bin", "train.json", "val.bin", "val.json"]
    assert not (run_dir / "run.json").exists() and not (run_dir / "checkpoint.pt").exists()
    assert main(command) == 0  # the launch that follows finds the cache current and trains


def test_a_corpus_that_cannot_train_leaves_no_run_behind(corpus, tmp_path, capsys):
    run_dir, empty = str(tmp_path / "run"), tmp_path / "empty"
    empty.mkdir()
    for data in (tmp_path / "none", empty):
        assert main(["train", "--data", str(data), *SMALL, "--steps", "1", "--out", run_dir]) == 2
        assert "data: " in capsys.readouterr().err
        assert not (tmp_path / "run" / "run.json").exists()
    assert main(["train", "--data", str(corpus), *SMALL, "--steps", "1", "--out", run_dir]) == 0
