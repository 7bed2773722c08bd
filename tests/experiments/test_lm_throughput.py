"""lm-throughput: every mixer's training step and decoding timed, the ratio to softmax, out-of-memory as a row."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from linattn.experiments import lm_throughput
from linattn.experiments.lm_compare import RECIPES
from linattn.experiments.lm_throughput import ThroughputConfig, measure, table

TINY = ThroughputConfig("tiny", (16, 32), 64, 8, (1, 2), 2, mixers=("softmax", "kla"))


@pytest.fixture(autouse=True)
def tiny_recipe(monkeypatch):
    """A d-16 model of one layer in two heads, vocab 64."""
    tiny = dataclasses.replace(RECIPES["quick"], vocab_size=64, model={"d_model": 16, "n_layers": 1, "n_heads": 2,
                                                                       "mlp_hidden": 64})  # fmt: skip
    monkeypatch.setitem(RECIPES, "tiny", tiny)


def test_each_mixer_is_timed_beside_softmax(monkeypatch):
    monkeypatch.setattr(lm_throughput, "median_ms", lambda fn, device: (fn(), 2.0)[1])  # 2 ms a step
    results = measure(True, "cpu", TINY)
    train = {(r["mixer"], r["T"]): r for r in results["train"]}
    assert set(train) == {(m, T) for m in TINY.mixers for T in TINY.lengths}
    assert train["kla", 32]["B"] == 2 and train["kla", 32]["tokens_per_s"] == 64 / 2e-3
    decode = {(r["mixer"], r["B"]) for r in results["decode"] if r["tokens_per_s"] > 0}
    assert decode == {(m, B) for m in TINY.mixers for B in TINY.decode_batches}
    text = table(results)
    assert "| kla | 0.0M | 32 | 2 | 32,000 | 1.00 | – | – |" in text and "| mixer | B = 1 | B = 2 |" in text
    for row in results["decode"]:  # as CUDA measures it: the GPU's busy time of a step beside the tokens a second
        row.update(tokens_per_s=1500.0, step_gpu_ms=0.25)
    assert "| kla | 1,500 (0.250) | 1,500 (0.250) |" in table(results)


def test_a_size_out_of_memory_is_a_row(monkeypatch):
    def out_of_memory(fn, device):
        raise torch.OutOfMemoryError("no room")

    monkeypatch.setattr(lm_throughput, "median_ms", out_of_memory)
    results = measure(True, "cpu", dataclasses.replace(TINY, mixers=("kla",), lengths=(16,)))
    assert results["train"][0]["error"] == "out of memory"
    assert "| kla | 0.0M | 16 | 4 | out of memory |" in table(results)


def test_a_rerun_reads_the_finished_blocks(tmp_path, monkeypatch):
    """Each length's and batch size's rows are kept in the work folder: measured again, nothing is timed."""
    calls = []
    monkeypatch.setattr(lm_throughput, "median_ms", lambda fn, device: (calls.append(1), fn(), 2.0)[2])
    first = measure(True, "cpu", TINY, work=tmp_path)
    assert len(calls) == len(TINY.mixers) * len(TINY.lengths)
    assert [r["mixer"] for r in first["train"]] == ["softmax", "softmax", "kla", "kla"]  # a mixer's rows together
    calls.clear()
    monkeypatch.setattr(lm_throughput, "_decode_row", lambda *args: pytest.fail("decoding timed again"))
    again = measure(True, "cpu", TINY, work=tmp_path)
    assert again.pop("resumed") == ["train T=16", "train T=32", "decode B=1", "decode B=2"]
    assert again == first and not calls
