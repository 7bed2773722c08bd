"""`linattn probe`: the loss at lengths equals the full logits' cross-entropy; the passkey scorer gives a model that
recalls the key 1 and one that does not 0; the command runs on a trained run's held-out split."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from linattn.cli import main
from linattn.data.cache import TokenSplit
from linattn.data.tokenizer import ByteTokenizer
from linattn.models.config import ModelConfig
from linattn.models.lm import DecoderLM
from linattn.tasks.passkey import passkey_prompt
from linattn.textlm import probes
from tests.data.corpus import write_corpus
from tests.textlm.test_train_cli import SMALL

pytestmark = pytest.mark.usefixtures("one_thread")


def split_of(texts: list[str]) -> TokenSplit:
    ids = [np.frombuffer(t.encode(), dtype=np.uint8).astype(np.uint16) for t in texts]
    offsets = np.cumsum([0, *map(len, ids)]).astype(np.int64)
    return TokenSplit("val", np.concatenate(ids), offsets)


class Induction(nn.Module):
    """Predicts the token that followed the last earlier occurrence of the preceding 12 tokens (or token 0): it
    recalls a key stated after the same words as the question."""

    def __init__(self, vocab: int = 256, span: int = 12):
        super().__init__()
        self.vocab, self.span = vocab, span
        self.unused = nn.Parameter(torch.zeros(()))

    def forward(self, ids, logits_at):
        row = ids[0].tolist()
        logits = []
        for p in torch.nonzero(logits_at[0]).flatten().tolist():
            context, guess = row[p - self.span + 1 : p + 1], 0
            for s in range(p - self.span, -1, -1):
                if row[s : s + self.span] == context:
                    guess = row[s + self.span]
                    break
            logits.append(F.one_hot(torch.tensor(guess), self.vocab).float())
        return torch.stack(logits), None


class Blank(Induction):
    def forward(self, ids, logits_at):
        return torch.zeros(int(logits_at.sum()), self.vocab), None


def test_the_passkey_scorer_separates_a_model_that_recalls_from_one_that_does_not():
    split = split_of(["lorem ipsum dolor sit amet, " * 40])
    recall = probes.passkey_recall(Induction(), ByteTokenizer(), split, [300, 600], trials=3)
    assert recall == {L: {"exact": 1.0, "token": 1.0, "trials": 3} for L in (300, 600)}
    blank = probes.passkey_recall(Blank(), ByteTokenizer(), split, [300], trials=3)
    assert blank[300]["exact"] == 0.0 and blank[300]["token"] < 0.5


def test_the_passkey_text_leaves_out_end_of_document_tokens():
    class Recording(Blank):
        def forward(self, ids, logits_at):
            seen.append(ids)
            return super().forward(ids, logits_at)

    seen, tokenizer = [], ByteTokenizer()
    tokenizer.eod_id = ord("#")  # as a trained BPE's <|endoftext|>, appended to every document
    probes.passkey_recall(Recording(), tokenizer, split_of(["lorem ipsum dolor#"] * 40), [300], trials=2)
    assert len(seen) == 2 and not any((ids == ord("#")).any() for ids in seen)


def test_the_passkey_prompt_states_the_key_at_its_depth_and_asks_it_last():
    filler = np.frombuffer(b"x" * 1000, dtype=np.uint8).astype(np.int64)
    ids, answer_start = passkey_prompt(ByteTokenizer(), filler, "12345", depth=0.5)
    text = bytes(ids).decode()
    assert text.index("The pass key is 12345.") == 501  # 500 filler bytes, then the needle's line break
    assert text.endswith("What is the pass key? The pass key is 12345") and bytes(ids[answer_start:]) == b" 12345"


def test_loss_at_lengths_is_the_cross_entropy_of_the_full_logits(monkeypatch):
    torch.manual_seed(0)
    model = DecoderLM(ModelConfig(vocab_size=256, d_model=32, n_layers=2, n_heads=2, mixer="gated_deltanet",
                                  mlp_hidden=64, max_seq_len=512)).eval()  # fmt: skip
    split = split_of(["short", "a" + "bcdefghij" * 30, "z" * 100])
    monkeypatch.setattr(probes, "HEAD_ROWS", 7)  # the head in pieces, as at long lengths
    got = probes.loss_at_lengths(model, split, [64, 150], windows=4)
    ids = torch.from_numpy(split.tokens[5 : 5 + 151].astype(np.int64))
    with torch.no_grad():
        want = F.cross_entropy(model(ids[None, :-1])[0][0], ids[1:], reduction="none")
    # the one document long enough for the largest length, read at every length
    assert got[150]["windows"] == got[64]["windows"] == 1
    assert got[150]["loss"] == pytest.approx(want.mean().item(), rel=1e-5)
    assert got[150]["tail_loss"] == pytest.approx(want[-37:].mean().item(), rel=1e-5)
    assert got[64]["loss"] == pytest.approx(want[:64].mean().item(), rel=1e-5)  # causal: the same first 64
    with pytest.raises(
        ValueError,
        match=r"^lengths: no document of the val split is longer than 1000 tokens \(a loss at length L reads",
    ):
        probes.loss_at_lengths(model, split, [1000])
    with pytest.raises(ValueError, match=r"^windows: expected at least 1, got 0"):
        probes.loss_at_lengths(model, split, [64], windows=0)
    with pytest.raises(ValueError, match=r"^trials: expected at least 1, got 0"):
        probes.passkey_recall(model, ByteTokenizer(), split, [200], trials=0)


def test_probe_runs_on_a_trained_runs_test_split(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus", count=40)
    run = tmp_path / "run"
    assert (
        main(["train", "--data", str(corpus), *SMALL, "--set=test_fraction=0.2", "--steps", "2", "--out", str(run)])
        == 0
    )
    command = ["probe", str(run), "--lengths", "128,256", "--split", "test", "--trials", "2", "--windows", "2"]
    assert main([*command, "--device", "cpu", "--json", str(tmp_path / "probe.json")]) == 0
    out = capsys.readouterr().out
    assert "| L | loss | last quarter | windows | passkey exact | passkey tokens |" in out
    result = json.loads((tmp_path / "probe.json").read_text())
    assert result["split"] == "test" and sorted(result["loss"]) == ["128", "256"]
    assert (run / "cache" / "test.bin").exists()  # tokenised for the probe; training never read it
    assert main([*command[:3], "64,x"]) == 2
    assert "--lengths: expected comma-separated integers" in capsys.readouterr().err
