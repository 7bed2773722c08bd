"""The training step replayed from CUDA graphs: the positions it reads (its loss: `test_trainer.py`'s
`test_the_supervised_losses_are_token_cross_entropy`), the trainer refusing what a graph cannot do, and on a GPU a
graphed run training as an eager one."""

from __future__ import annotations

import json

import pytest
import torch

from linattn.models import DecoderLM, preset
from linattn.tasks import IGNORE, Batch, VLAMQARConfig, generate
from linattn.train import TrainConfig, graph, supervised_cross_entropy, token_cross_entropy, train
from linattn.train.graph import supervised_positions

pytestmark = pytest.mark.usefixtures("one_thread")


def test_supervised_positions_pad_to_a_power_of_two():
    targets = torch.full((2, 4), IGNORE)
    targets[0, 1], targets[1, 0], targets[1, 3] = 5, 6, 7
    index, picked = supervised_positions(Batch(torch.zeros(2, 4, dtype=torch.long), targets))
    assert index.tolist() == [1, 4, 7, 0] and picked.tolist() == [5, 6, 7, IGNORE]
    index, picked = supervised_positions(Batch(torch.zeros(1, 3, dtype=torch.long), torch.full((1, 3), IGNORE)))
    assert index.tolist() == [0] and picked.tolist() == [IGNORE]


def test_logits_at_an_index_are_those_at_its_mask():
    model = DecoderLM(preset("debug", mixer="gated_deltanet")).double()
    batch = generate(VLAMQARConfig(n_pairs=3, vocab_size=32), 3, torch.Generator().manual_seed(0))
    index, _ = supervised_positions(batch)
    n = int(batch.supervised.sum())
    by_index = model(batch.inputs, logits_at=index)[0][:n]
    torch.testing.assert_close(by_index, model(batch.inputs, logits_at=batch.supervised)[0], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="logits_at: expected a bool tensor .* or an int64"):
        model(batch.inputs, logits_at=index.int())
    with pytest.raises(ValueError, match=r"logits_at: expected positions in \[0, B·T = 30\), got 0 – 30"):
        model(batch.inputs, logits_at=torch.tensor([0, 30]))


def mqar_run(tmp_path, device: str, cuda_graph: bool, loss_fn=supervised_cross_entropy, steps: int = 40):
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="gated_deltanet", vocab_size=32))
    task = VLAMQARConfig(n_pairs=3, vocab_size=32)
    config = TrainConfig(steps=steps, batch_size=16, lr=3e-3, warmup_steps=4, eval_every=0, log_every=1, amp="off")
    train(
        model, config, lambda step, gen: generate(task, 16, gen), None, tmp_path, device=device, progress=False,
        loss_fn=loss_fn, cuda_graph=cuda_graph,
    )  # fmt: skip
    losses = [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return model, losses


def test_the_trainer_refuses_a_graph_it_cannot_replay(tmp_path):
    with pytest.raises(ValueError, match="cuda_graph: needs one process on a CUDA device, got device cpu"):
        mqar_run(tmp_path, "cpu", True)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda_graph: replays supervised_cross_entropy, got loss_fn=token_cross"):
            mqar_run(tmp_path, "cuda", True, token_cross_entropy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_a_graphed_run_trains_as_an_eager_one(tmp_path):
    """Float32 throughout: the two differ only in where the head's rows are gathered, so by rounding alone."""
    eager, eager_losses = mqar_run(tmp_path / "eager", "cuda", False)
    graphed, graphed_losses = mqar_run(tmp_path / "graph", "cuda", True)
    torch.testing.assert_close(torch.tensor(graphed_losses), torch.tensor(eager_losses), rtol=1e-4, atol=1e-5)
    for (name, a), b in zip(eager.named_parameters(), graphed.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=name)


class Crash(Exception):
    """Stands for a run killed mid-way."""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graphed_training_with_two_shapes_evals_and_a_resume(tmp_path, monkeypatch):
    """bf16 autocast, batches of two shapes with room for one graph (the other shape eager, said once), evaluations
    between replays, and a run killed and resumed that ends where an uninterrupted one ends."""
    monkeypatch.setattr(graph, "MAX_SHAPES", 1)
    tasks = (VLAMQARConfig(n_pairs=3, vocab_size=32), VLAMQARConfig(n_pairs=4, vocab_size=32))
    held_out = generate(tasks[0], 16, torch.Generator().manual_seed(99)).to("cuda")

    def run(folder, crash_at: int | None = None) -> DecoderLM:
        torch.manual_seed(0)
        model = DecoderLM(preset("debug", mixer="gated_deltanet", vocab_size=32))
        config = TrainConfig(steps=30, batch_size=16, lr=3e-3, warmup_steps=3, eval_every=10, log_every=5,
                             checkpoint_every=10, amp="auto")  # fmt: skip

        def batch(step: int, gen: torch.Generator):
            if step == crash_at:
                raise Crash
            return generate(tasks[step % 2], 16, gen)

        def evaluate(m):
            return {"loss": float(supervised_cross_entropy(m, held_out))}

        train(model, config, batch, evaluate, folder, device="cuda", progress=False, loss_fn=supervised_cross_entropy,
              cuda_graph=True)  # fmt: skip
        return model

    with pytest.warns(UserWarning, match="cuda_graph: batches of shapes past the first 1 run eagerly"):
        whole = run(tmp_path / "whole")
    with pytest.raises(Crash):
        run(tmp_path / "resumed", crash_at=17)
    resumed = run(tmp_path / "resumed")
    for (name, a), b in zip(whole.named_parameters(), resumed.parameters()):
        torch.testing.assert_close(b, a, msg=name)
