"""A text run under torchrun, as two gloo processes on the CPU: process 0 alone reads and tokenises the corpus while
the other waits, each rank draws its own windows of the one cache, and both end with the same weights."""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from linattn.data.packing import PackedText
from linattn.textlm import run as text_run
from tests.data.corpus import write_corpus

WORLD = 2


def _worker(rank: int, port: int, root: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD)
    )
    torch.set_num_threads(1)
    tokenised, batches, models = [], [], []
    cached_split, batch, train = text_run.cached_split, PackedText.batch, text_run.train
    text_run.cached_split = lambda *a, **k: tokenised.append(a[1]) or cached_split(*a, **k)
    text_run.train = lambda model, *a, **k: models.append(model) or train(model, *a, **k)
    PackedText.batch = lambda *a: batches.append(batch(*a)) or batches[-1]
    settings = ["d_model=32", "mlp_hidden=64", "seq_len=32", "batch_size=2", "eval_tokens=256", "eval_every=2"]
    settings += ["log_every=1"]
    run = text_run.plan_run(f"{root}/corpus", "bytes", "tiny", "kla", settings, steps=3)
    text_run.train_text(run, f"{root}/run", progress=False, tensorboard=False)
    weights = {k: v.detach().clone() for k, v in models[0].state_dict().items()}
    torch.save({"tokenised": tokenised, "first": batches[0].inputs, "weights": weights}, f"{root}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as in tests/train/test_distributed.py: no interpreter teardown racing gloo's threads


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_0_prepares_the_data_and_each_rank_draws_its_own(tmp_path):
    write_corpus(tmp_path / "corpus", count=20)
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    assert ranks[0]["tokenised"] == ["train", "val"] and ranks[1]["tokenised"] == []
    assert not torch.equal(ranks[0]["first"], ranks[1]["first"]), "each rank draws its own windows"
    assert all(torch.equal(v, ranks[1]["weights"][k]) for k, v in ranks[0]["weights"].items())
    log = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len([line for line in log if '"loss"' in line]) == 3  # one writer
