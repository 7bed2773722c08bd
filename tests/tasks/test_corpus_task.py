"""Windows of a tokenised corpus (`linattn.tasks.corpus`) and the lm-compare experiment's preparation of one."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from linattn.data.tokenizer import FileTokenizer
from linattn.experiments import lm_compare
from linattn.tasks import generate
from linattn.tasks.batch import IGNORE
from linattn.tasks.corpus import data_root
from linattn.tasks.passkey import PasskeyConfig

# a corpus any test machine has: pluggy's own sources (a pytest dependency), a BPE of 400 ids
RECIPE = dataclasses.replace(
    lm_compare.RECIPES["quick"], name="tiny", installed=("pluggy",), vocab_size=400, lengths=(16, 64)
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LINATTN_DATA", str(root))
        cache = lm_compare.prepare(RECIPE, progress=False)
        yield root, cache


@pytest.fixture
def config(corpus, monkeypatch):
    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    [run] = lm_compare.plan_recipe(RECIPE, ("gated_deltanet",))
    return run.task


def test_packed_windows_are_cut_at_document_starts(config):
    batch = generate(config, 4, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == batch.targets.shape == (1, 4 * 16)
    cu = batch.cu_seqlens.tolist()
    assert cu[0] == 0 and cu[-1] == 64 and {16, 32, 48} <= set(cu)
    ends = [c - 1 for c in cu[1:] if c % 16]  # a sequence cut inside a window: its last target is another document's
    assert all(batch.targets[0, e] == IGNORE for e in ends)


def test_whole_windows_are_the_start_of_a_long_document(config):
    from linattn.tasks.corpus import packed_split

    long = dataclasses.replace(config, split="test", whole=True, seq_len=64)
    batch = generate(long, 3, torch.Generator().manual_seed(1))
    assert batch.inputs.shape == (3, 64) and batch.cu_seqlens is None and bool((batch.targets != IGNORE).all())
    shorter = generate(dataclasses.replace(long, seq_len=16, min_doc_tokens=64), 3, torch.Generator().manual_seed(1))
    assert torch.equal(shorter.inputs, batch.inputs[:, :16])  # the same documents at every length
    data = packed_split(str(long.cache), "test", long.fingerprint)
    starts = {tuple(data.tokens[int(s) : int(s) + 65].tolist()) for s in data.split.offsets[:-1]}
    assert all(tuple(row) in starts for row in torch.cat([batch.inputs, batch.targets[:, -1:]], 1).tolist())
    with pytest.raises(ValueError, match="seq_len: no document of the test split has"):
        generate(dataclasses.replace(long, seq_len=10**8), 1, torch.Generator())


def test_a_run_refuses_another_corpus_and_an_unprepared_one(config, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="not the corpus this run was planned on"):
        generate(dataclasses.replace(config, fingerprint="0" * 16), 1, torch.Generator())
    with pytest.raises(ValueError, match="batch_size"):
        generate(config, 0, torch.Generator())
    monkeypatch.setenv("LINATTN_DATA", str(tmp_path))
    with pytest.raises(ValueError, match="is not prepared yet; `linattn run lm-compare` makes it"):
        lm_compare.plan_recipe(RECIPE, ("kla",))
    with pytest.raises(ValueError, match=r"split: expected one of \['train', 'val', 'test'\], got 'dev'"):
        dataclasses.replace(config, split="dev")


def test_the_plan_trains_every_mixer_on_the_same_windows_and_tests_whole_documents(corpus, monkeypatch):
    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    runs = lm_compare.plan_recipe(RECIPE, lm_compare.MIXERS_COMPARED)
    assert [r.mixer for r in runs] == list(lm_compare.MIXERS_COMPARED)
    assert len({(r.task, r.train, r.val_task, r.test_task) for r in runs}) == 1  # same tokens, same order
    run = runs[0]
    assert (run.task.split, run.task.whole, run.val_task.split, run.test_task.split, run.test_task.whole) == (
        "train", False, "val", "test", True
    )  # fmt: skip
    assert [(x, t.seq_len, t.whole) for x, t in run.eval_at] == [(64, 64, True)] and run.select_on == "loss"
    assert {t.min_doc_tokens for t in (run.test_task, run.eval_at[0][1])} == {64}


def test_a_cache_without_its_corpus_is_used_as_it_is(corpus, tmp_path, monkeypatch):
    """As on a GPU machine that cannot reach the registries: the cache copied, not the corpus."""
    cache = corpus[1]
    copy = tmp_path / RECIPE.name
    shutil.copytree(cache, copy / "cache")
    monkeypatch.setenv("LINATTN_DATA", str(tmp_path))
    assert data_root() == tmp_path and lm_compare.prepare(RECIPE, progress=False) == copy / "cache"
    assert not (copy / "corpus").exists()


def test_a_compared_model_exports_to_the_auto_classes_generates_and_is_probed(corpus, tmp_path, monkeypatch):
    """`linattn export-hf` on a finished lm-compare run: its tested weights and its corpus's tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import linattn.models.hf  # noqa: F401  (registers the linattn model type with the Auto classes)
    from linattn.cli import main
    from linattn.experiments.runner import run_one

    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    [spec] = lm_compare.plan_recipe(RECIPE, ("kla",))
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, steps=4, warmup_steps=1, eval_every=2),
                               eval_batches=1)  # fmt: skip
    run_one(spec, tmp_path / "run", progress=False)
    assert main(["export-hf", str(tmp_path / "run"), str(tmp_path / "hf")]) == 0
    model, tokenizer = lm_compare.load_compared(tmp_path / "run")
    hf_model, hf_tokenizer = (auto.from_pretrained(tmp_path / "hf") for auto in (AutoModelForCausalLM, AutoTokenizer))
    ids = hf_tokenizer("def main():\n    return", return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == tokenizer.encode("def main():\n    return")
    with torch.no_grad():
        assert torch.equal(hf_model.eval()(ids).logits, model(ids)[0])
    out = hf_model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape == (1, ids.shape[1] + 5) and torch.equal(out[0, : ids.shape[1]], ids[0])
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / "checkpoint.pt").write_bytes(b"")
    assert lm_compare.is_compared(tmp_path / "unfinished")
    with pytest.raises(ValueError, match=r"not a finished run \(no result.json yet\)"):
        lm_compare.load_compared(tmp_path / "unfinished")
    monkeypatch.setenv("LINATTN_DATA", str(tmp_path))  # another data root: not the corpus the run trained on
    with pytest.raises(ValueError, match="is not the corpus .* trained on"):
        lm_compare.load_compared(tmp_path / "run")
    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    assert main(["probe", str(tmp_path / "run"), "--lengths", "100,200", "--split", "train", "--trials", "2",
                 "--json", str(tmp_path / "probe.json")]) == 0  # fmt: skip
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert probe["split"] == "train" and set(probe["loss"]) == set(probe["passkey"]) == {"100", "200"}
    (tmp_path / "weightless").mkdir()  # a run as the repository keeps it: its record, no weights
    shutil.copy(tmp_path / "run" / "result.json", tmp_path / "weightless")
    with pytest.raises(ValueError, match=r"weightless: no weights \(best.pt or checkpoint.pt\); train the run"):
        lm_compare.load_compared(tmp_path / "weightless")


def test_the_passkey_rows_ask_the_key_stated_in_their_text(corpus, monkeypatch):
    """RULER's passkey on the corpus's text: each row `seq_len` tokens, the key stated a tenth of the way in and
    asked at the end; only the key's tokens are targets; the same generator seed gives the same rows."""
    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    [run] = lm_compare.plan_recipe(RECIPE, ("gla",))
    config = PasskeyConfig(run.task.corpus, run.task.fingerprint, seq_len=200)
    tokenizer = FileTokenizer(corpus[1].parent / "tokenizer.json")
    batch = generate(config, 3, torch.Generator().manual_seed(1))
    assert batch.inputs.shape == batch.targets.shape == (3, 200)
    for row, target in zip(batch.inputs, batch.targets):
        key = tokenizer.decode(target[target != IGNORE].tolist()).strip()
        text = tokenizer.decode(row.tolist())
        assert len(key) == 5 and key.isdigit() and f"The pass key is {key}. Remember it." in text
        assert "What is the pass key? The pass key is" in text[-60:]
        assert (target != IGNORE).nonzero().min() > 180  # asked at the end only
    again = generate(config, 3, torch.Generator().manual_seed(1))
    assert torch.equal(again.inputs, batch.inputs) and torch.equal(again.targets, batch.targets)
    with pytest.raises(ValueError, match=r"^seq_len: 20 tokens leave -\d+ for the text around the passkey's"):
        generate(dataclasses.replace(config, seq_len=20), 1, torch.Generator())
    with pytest.raises(ValueError, match=r"^depth: expected a fraction in \[0, 1\], got 1.5"):
        dataclasses.replace(config, depth=1.5)


def test_lm_compare_reports_the_passkey_beside_the_loss(corpus, tmp_path, monkeypatch):
    """A run with a passkey probe records its recall (`probes`), and the experiment's table shows it by mixer."""
    from linattn.experiments.experiment import probes_markdown, summarize_probes
    from linattn.experiments.runner import run_one

    monkeypatch.setenv("LINATTN_DATA", str(corpus[0]))
    [spec] = lm_compare.plan_recipe(RECIPE, ("gla",))
    assert spec.probe_at == ()  # RECIPE's lengths are below PASSKEY_MIN
    probe = ("passkey 128", PasskeyConfig(spec.task.corpus, spec.task.fingerprint, 128))
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, steps=2, warmup_steps=1, eval_every=2),
                               eval_batches=1, probe_at=(probe,))  # fmt: skip
    record = run_one(spec, tmp_path / "run", progress=False)
    assert set(record["probes"]) == {"passkey 128"} and 0 <= record["probes"]["passkey 128"]["exact"] <= 1
    assert "probe:passkey 128" in record["tests_at"]
    summary = summarize_probes([record], {"gla": {str(spec.x): spec.train.lr}})
    table = "\n".join(probes_markdown({"mixers": ["gla", "kla"], "probes": summary}))
    assert "| probe | gla | kla |" in table and table.endswith(" | — |") and "| passkey 128 | 0." in table
