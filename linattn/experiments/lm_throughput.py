"""What each mixer's language model costs to train and to run: lm-compare's models (the `short` protocol's shape on
a GPU) timed side by side against the softmax-attention model with SDPA.

- Training: one AdamW step (forward with no state formed, `output_state=False`; backward, update; bf16 autocast on
  CUDA) on `tokens_per_step` random tokens as
  `B = tokens_per_step / T` rows of `T`, at each `T`: tokens a second (median of `bench.timing.median_ms`), peak
  memory of the step, and on CUDA the GPU's busy fraction (every kernel's self time over the wall time,
  `bench.timing.kernel_times`: below 1 the host's launches bound the step).
- Decoding: after a prefill of `context` tokens in each of `B` rows, `decode_tokens` tokens one at a time
  (`DecoderLM.step`: the recurrent state, or softmax attention's KV cache): generated tokens a second, all rows; on
  CUDA also the GPU's busy time of one step (its kernels' self time: a step's wall time is mostly the host's
  launches, which cannot rank the state updates), and the tokens a second with each step replayed from a CUDA graph
  (`models.decode_graph`: one launch a token; not softmax attention, whose KV cache grows).

Full (CUDA): the `short` protocol's models (d 512, 8 layers, 8 heads, vocab 16,384), T = 2K, 8K, 32K at 32K tokens a
step; decoding at a 32K context, B = 1 and 32. `--quick` (a CPU's minutes): the quick recipe's (d 64, 2 layers, 2
heads, vocab 4,096), T = 256, 1K at 2K tokens a step; decoding at a 512-token context, B = 1 and 4. A size that runs
out of memory is a row that says so.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.bench.timing import kernel_times, median_ms
from linattn.experiments.blocks import FinishedBlocks
from linattn.experiments.diagnostic import Diagnostic
from linattn.experiments.lm_compare import MIXERS_COMPARED, RECIPES, compared_model
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.models import DecoderLM
from linattn.models.decode_graph import GraphedDecoder, has_growing_state


@dataclass(frozen=True)
class ThroughputConfig:
    recipe: str  # the lm-compare recipe whose models are timed (`lm_compare.RECIPES`)
    lengths: tuple[int, ...]
    tokens_per_step: int
    context: int
    decode_batches: tuple[int, ...]
    decode_tokens: int
    mixers: tuple[str, ...] = MIXERS_COMPARED


GPU_CALLS = 5  # profiled decode steps, for a step's GPU busy time

CONFIGS = {
    False: ThroughputConfig("short", (2048, 8192, 32768), 32768, 32768, (1, 32), 32),
    True: ThroughputConfig("quick", (256, 1024), 2048, 512, (1, 4), 8),
}


def _train_row(model: DecoderLM, T: int, config: ThroughputConfig, device: torch.device) -> dict:
    B = max(1, config.tokens_per_step // T)
    ids = torch.randint(0, model.config.vocab_size, (B, T + 1), device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    cuda = device.type == "cuda"

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            logits, _ = model(ids[:, :-1], output_state=False)  # a training step forms no state
        F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    row = {"T": T, "B": B}
    try:
        step()  # compiles, allocates the optimizer's state
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
            step()
            row["peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        ms = median_ms(step, device)
        row.update(ms=ms, tokens_per_s=B * T / ms * 1e3)
        if cuda:
            wall, kernels = kernel_times(step, device, repeat=3)
            row["busy"] = sum(k["ms"] for k in kernels) / wall
    except torch.OutOfMemoryError:
        row["error"] = "out of memory"
    finally:
        model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.empty_cache()
    return row


@torch.no_grad()
def _decode_row(model: DecoderLM, B: int, config: ThroughputConfig, device: torch.device) -> dict:
    cuda = device.type == "cuda"
    row = {"B": B, "context": config.context}
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            prompt = torch.randint(0, model.config.vocab_size, (B, config.context), device=device)
            last = torch.zeros_like(prompt, dtype=torch.bool)
            last[:, -1] = True  # the head on the last position only: [B, context, vocab] logits would be 32 GiB
            logits, state = model(prompt, logits_at=last)  # [B, vocab]
            token = logits.argmax(-1)
            logits, state = model.step(token, state)  # compiles the step's kernels
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(config.decode_tokens):
                logits, state = model.step(logits.argmax(-1), state)
            if cuda:
                torch.cuda.synchronize()
            row["tokens_per_s"] = B * config.decode_tokens / (time.perf_counter() - start)
            if cuda:
                kernels = kernel_times(partial(model.step, logits.argmax(-1), state), device, GPU_CALLS)[1]
                row["step_gpu_ms"] = sum(k["ms"] for k in kernels)
                row |= _graphed_decode(model, logits.argmax(-1), state, config)
    except torch.OutOfMemoryError:
        row["error"] = "out of memory"
    finally:
        if cuda:
            torch.cuda.empty_cache()
    return row


def _graphed_decode(model: DecoderLM, token: torch.Tensor, state: dict, config: ThroughputConfig) -> dict:
    """`{"graph_tokens_per_s"}`: the same decoding with each step replayed from a CUDA graph (`GraphedDecoder`);
    nothing for a state that grows (softmax attention's KV cache), which a graph cannot replay; `{"graph_error"}`
    where the graph's copy of the state does not fit."""
    if has_growing_state(model):
        return {}
    try:
        decoder = GraphedDecoder(model, state, torch.bfloat16)
    except torch.OutOfMemoryError:
        return {"graph_error": "out of memory"}
    token = decoder(token).argmax(-1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(config.decode_tokens):
        token = decoder(token).argmax(-1)
    torch.cuda.synchronize()
    return {"graph_tokens_per_s": token.numel() * config.decode_tokens / (time.perf_counter() - start)}


def _each_model(config: ThroughputConfig, device: torch.device, row: Callable[[DecoderLM], dict]) -> list[dict]:
    """`row(model)` of every mixer's model (the same initial weights each time), as one block of rows."""
    rows = []
    for mixer in config.mixers:
        torch.manual_seed(0)
        model = DecoderLM(compared_model(RECIPES[config.recipe], mixer)).to(device)
        rows.append({"mixer": mixer, **row(model)})
        print(f"# lm-throughput: {rows[-1]}", file=sys.stderr, flush=True)  # progress of a minutes-long run
        del model
    return rows


def _train_block(T: int, config: ThroughputConfig, device: torch.device) -> list[dict]:
    """Every mixer's model at one training length."""

    def row(model: DecoderLM) -> dict:
        return {"params": sum(p.numel() for p in model.parameters()), **_train_row(model, T, config, device)}

    return _each_model(config, device, row)


def _decode_block(B: int, config: ThroughputConfig, device: torch.device) -> list[dict]:
    """Every mixer's model decoding at one batch size."""
    return _each_model(config, device, lambda model: _decode_row(model.eval(), B, config, device))


def measure(quick: bool, device: str, config: ThroughputConfig | None = None, work: Path | None = None) -> dict:
    """Training rows at each length, decoding rows at each batch size; the JSON body of results.json. `work`: each
    length's and batch size's rows (every mixer's, measured together) are kept there as they end, and a run cut
    short resumes from them."""
    config = config or CONFIGS[quick]
    finished = FinishedBlocks(work, device, asdict(config))
    device = torch.device(device)
    train, decode = [], []
    for T in config.lengths:
        train += finished.rows(f"train T={T}", partial(_train_block, T, config, device))
    for B in config.decode_batches:
        decode += finished.rows(f"decode B={B}", partial(_decode_block, B, config, device))
    for rows in (train, decode):  # a mixer's rows together, in the mixers' order
        rows.sort(key=lambda r: config.mixers.index(r["mixer"]))
    resumed = {"resumed": finished.resumed} if finished.resumed else {}
    return {"config": {**asdict(config), "dtype": "bfloat16" if device.type == "cuda" else "float32"},
            "train": train, "decode": decode, **resumed}  # fmt: skip


def table(results: dict) -> str:
    config, train, decode = results["config"], results["train"], results["decode"]
    base = {r["T"]: r.get("tokens_per_s") for r in train if r["mixer"] == "softmax"}
    lines = [
        f"Training: tokens a second of one AdamW step on {config['tokens_per_step']:,} tokens (B × T), with the ratio "
        "to the softmax-attention model's; peak memory of the step; the GPU's busy fraction (kernels' time over the "
        "wall time; below 1 the host bounds the step).",
        "",
        "| mixer | params | T | B | tokens/s | × softmax | peak GiB | busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in train:
        if "error" in r:
            cells = [r["error"], "", "", ""]
        else:
            ratio = r["tokens_per_s"] / base[r["T"]] if base.get(r["T"]) else None
            peak, busy = (f"{r[k]:.2f}" if k in r else "–" for k in ("peak_gib", "busy"))
            cells = [f"{r['tokens_per_s']:,.0f}", "" if ratio is None else f"{ratio:.2f}", peak, busy]
        lines.append(f"| {r['mixer']} | {r['params'] / 1e6:.1f}M | {r['T']:,} | {r['B']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Decoding: generated tokens a second (all rows), {config['decode_tokens']} tokens one at a time after a "
        f"prefill of {config['context']:,} tokens a row; in parentheses, where measured, the GPU's busy time of a "
        "step (ms); after it, where measured, the same with each step replayed from a CUDA graph (`GraphedDecoder`: "
        "one launch a token; softmax attention's growing KV cache cannot be).",
        "",
        "| mixer | " + " | ".join(f"B = {b}" for b in config["decode_batches"]) + " |",
        "|---|" + "---:|" * len(config["decode_batches"]),
    ]
    for mixer in config["mixers"]:
        rows = {r["B"]: r for r in decode if r["mixer"] == mixer}
        cells = [_decode_cell(rows[b]) for b in config["decode_batches"]]
        lines.append(f"| {mixer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _decode_cell(row: dict) -> str:
    if "error" in row:
        return row["error"]
    gpu = f" ({row['step_gpu_ms']:.3f})" if "step_gpu_ms" in row else ""
    graphed = f"; graphed {row['graph_tokens_per_s']:,.0f}" if "graph_tokens_per_s" in row else ""
    return f"{row['tokens_per_s']:,.0f}{gpu}{graphed}"


def plot(results: dict, path: Path) -> None:
    """Training tokens a second against T (log-log), and decoding tokens a second per batch size, per mixer."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    config = results["config"]
    for mixer in config["mixers"]:
        rows = [r for r in results["train"] if r["mixer"] == mixer and "tokens_per_s" in r]
        left.loglog([r["T"] for r in rows], [r["tokens_per_s"] for r in rows], marker="o", label=mixer)
        rows = [r for r in results["decode"] if r["mixer"] == mixer and "tokens_per_s" in r]
        (line,) = right.loglog([r["B"] for r in rows], [r["tokens_per_s"] for r in rows], marker="o", label=mixer)
        rows = [r for r in rows if "graph_tokens_per_s" in r]  # dashed: replayed from CUDA graphs
        right.loglog([r["B"] for r in rows], [r["graph_tokens_per_s"] for r in rows], ls="--", color=line.get_color())
    left.set(xlabel="training length T (tokens)", ylabel="training tokens / s", title="Training")
    title = f"Decoding after {config['context']:,} (dashed: CUDA graphs)"
    right.set(xlabel="batch (rows)", ylabel="generated tokens / s", title=title)
    right.set_xticks(config["decode_batches"], [str(b) for b in config["decode_batches"]])
    right.minorticks_off()
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    env = results["environment"]
    fig.suptitle(f"lm-compare's models, {env.get('gpu') or env.get('cpu')} ({config['dtype']})")
    fig.tight_layout()
    save_figure(fig, path)


DIAGNOSTIC = Diagnostic(
    "lm-throughput",
    "Training and decoding throughput of lm-compare's language models, each mixer beside the softmax-attention model",
    measure,
    table,
    plot,
    per_device=True,
    resumable=True,
)
