"""The mechanisms compared as language models on real text: one recipe, the same tokens in the same order, for
softmax attention (without positions, and with RoPE), GDN, KLA, VLA, CCQ-GDN, GLA, CCQ-GLA and the Mamba-2 form;
the test loss at the training length and on longer contexts, and recall of a passkey stated early in real text at
each length.

The corpus is assembled from package registries (`linattn.data.assemble`, its `MANIFEST.json` names every package,
version and licence), split by document (`DataConfig`), a byte-level BPE trained on its train split, and tokenised
once into a memory-mapped cache, all under the data root (`linattn.tasks.corpus.data_root`), made on the first run
and reused after. Training reads packed windows (documents cut by `cu_seqlens`, the state reset at each); every
model draws the same windows (one data seed). The test loss (nats a token) is read on whole documents of the test
split longer than the largest length, the same ones at every length `L`, their first `L + 1` tokens: a longer `L`
adds positions with more context before them, and a model that uses it scores lower there. The same weights are
probed with RULER's passkey on the test split's text at every length (`linattn.tasks.passkey`: the key a tenth of
the way in, asked at the end; the table's second part).

Protocols (`--protocol`; `--quick` is one recipe for both):
- `fair`: Debian's `linux-source-6.1` and every installed Python package (≥ 1 GB), a BPE of 32,768 ids; 12 layers
  of d 768, 12 heads, MLP 3072 (118M parameters); 2K windows × 32, 15,000 steps (~1B tokens), lr 6e-4; tested at
  2K – 32K.
- `short`: the Python packages `transformers` 5.25.0, `sympy` 1.14.0, `numpy` 2.4.6 (~90 MB; pinned: another
  version is another corpus), a BPE of 16,384 ids; 8 layers of d 512, 8 heads, MLP 2048 (36M); 2K windows × 8,
  600 steps (~10M tokens), lr 1e-3; tested at 2K – 16K (no document of its test split reaches 32K tokens).
- `--quick`: pip's own sources (~5 MB: every virtual environment has them), a BPE of 4,096 ids; 2 layers of d 64,
  2 heads, MLP 256; 128 × 8, 300 steps, lr 3e-3; tested at 128 – 1024.

A machine without the pinned versions (a GPU machine without a registry) runs on a copy of the tokenised cache
and tokenizer (`LINATTN_DATA/lm-compare-short/{cache,tokenizer.json}`), which `prepare` uses as it is where no `corpus/`
lies beside them.
`fair` is the scale the comparison asks for; `short` is sized for one GPU's few minutes, the nine models side by
side (`--jobs 9`); `linattn run lm-throughput --device cuda` measures what each model's step costs.

All: AdamW (0.9, 0.95), weight decay 0.1, warmup then cosine to a tenth, clip 1, no position embeddings (the
recurrent mixers carry order; `softmax` reads a causal mask alone, as NoPE models do, `softmax-rope` rotates its
queries and keys by their positions); the weights with the lowest validation loss are tested. The papers' scale:
KLA 0.4B parameters on 1B tokens, CCQ 500M and 1.3B.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from linattn.data.assemble import MANIFEST, build, check_manifest_pins
from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.data.tokenizer import FileTokenizer, train_tokenizer
from linattn.experiments.archive import RESULT_NAME
from linattn.experiments.experiment import Experiment
from linattn.experiments.mixers import MIXERS
from linattn.experiments.runner import BEST_NAME, RunSpec
from linattn.models import DecoderLM, ModelConfig
from linattn.tasks.corpus import SPLITS, CorpusConfig, corpus_fingerprint, data_root, prepared
from linattn.tasks.passkey import PasskeyConfig
from linattn.train import TrainConfig
from linattn.train.checkpoint import CHECKPOINT_NAME, load_checkpoint

# the shortest context probed with the passkey: its needle and question take tens of tokens, and text surrounds them
PASSKEY_MIN = 128
# softmax attention twice: without positions, as the recurrent mixers, and with RoPE, the field's transformer baseline
MIXERS_COMPARED = (
    "softmax", "softmax-rope", "gated_deltanet", "kla", "vla", "ccq-gated_deltanet", "gla", "ccq-gla", "mamba2"
)  # fmt: skip


@dataclass(frozen=True)
class Recipe:
    name: str  # the corpus's folder under the data root
    debian: tuple[str, ...]
    installed: tuple[str, ...]
    vocab_size: int
    data: DataConfig
    model: dict  # ModelConfig's size fields
    train: TrainConfig
    lengths: tuple[int, ...]  # trained at the first
    eval_batches: int
    eval_batch_size: int


def _train(steps: int, batch: int, lr: float, eval_every: int) -> TrainConfig:
    return TrainConfig(
        steps=steps, batch_size=batch, lr=lr, warmup_steps=max(1, steps // 20), min_lr_ratio=0.1, weight_decay=0.1,
        betas=(0.9, 0.95), clip=1.0, seed=42, eval_every=eval_every, checkpoint_every=eval_every,
    )  # fmt: skip


RECIPES = {
    "fair": Recipe(
        "lm-compare", ("linux-source-6.1",), ("*",), 32768,
        DataConfig(val_fraction=0.01, test_fraction=0.01, max_doc_bytes=1 << 18),  # documents up to ~70K tokens
        {"d_model": 768, "n_layers": 12, "n_heads": 12, "mlp_hidden": 3072},
        _train(15_000, 32, 6e-4, 500), (2048, 4096, 8192, 16384, 32768), 20, 8,
    ),
    "short": Recipe(
        "lm-compare-short", (), ("transformers==5.25.0", "sympy==1.14.0", "numpy==2.4.6"), 16384,
        DataConfig(val_fraction=0.02, test_fraction=0.02, max_doc_bytes=1 << 18),
        {"d_model": 512, "n_layers": 8, "n_heads": 8, "mlp_hidden": 2048},
        _train(600, 8, 1e-3, 200), (2048, 4096, 8192, 16384), 10, 4,
    ),
    "quick": Recipe(
        "lm-compare-quick", (), ("pip",), 4096,
        DataConfig(val_fraction=0.05, test_fraction=0.05),
        {"d_model": 64, "n_layers": 2, "n_heads": 2, "mlp_hidden": 256},
        _train(300, 8, 3e-3, 100), (128, 256, 512, 1024), 4, 8,
    ),
}  # fmt: skip


def prepare(recipe: Recipe, progress: bool = True) -> Path:
    """The recipe's tokenised corpus under the data root (made where missing): `corpus/` (`linattn corpus build`),
    `tokenizer.json` (trained on the train split), `cache/` (every split). Returns the cache folder. A cache copied
    without its corpus (to a GPU machine that cannot reach the registries) is used as it is."""
    from linattn.data.cache import cached_split  # numpy: the `text` extra

    root = data_root() / recipe.name
    corpus, tokenizer, cache = root / "corpus", root / "tokenizer.json", root / "cache"
    if not corpus.exists() and prepared(cache):
        return cache
    if not (corpus / MANIFEST).exists():
        print(f"lm-compare: assembling the corpus in {corpus}", flush=True)
        build(corpus, recipe.debian, recipe.installed, force=corpus.exists(), progress=progress)
    else:  # one assembled before the recipe pinned its versions, or from other ones, is not the recipe's
        check_manifest_pins(json.loads((corpus / MANIFEST).read_text()), recipe.installed, corpus)
    if not tokenizer.exists():
        print(f"lm-compare: training a BPE of {recipe.vocab_size:,} ids on its train split", flush=True)
        train_tokenizer(corpus, tokenizer, recipe.vocab_size, recipe.data, progress=progress)
    documents = read_corpus(corpus, recipe.data).split(recipe.data)
    tok = FileTokenizer(tokenizer)
    for split in SPLITS:
        cached_split(cache, split, documents[split], tok, progress=progress)
    return cache


def _recipe(protocol_name: str, is_quick: bool) -> Recipe:
    return RECIPES["quick" if is_quick else protocol_name]


def _prepare_protocol(protocol_name: str, is_quick: bool) -> None:
    prepare(_recipe(protocol_name, is_quick))


def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
    return plan_recipe(_recipe(protocol_name, is_quick), mixers)


def plan_recipe(recipe: Recipe, mixers) -> list[RunSpec]:
    """One run per mixer on the recipe's corpus (`prepare`d before): packed windows at the first length, validated
    on packed val windows, tested on the same whole test documents at every length, and on the passkey there."""
    cache = data_root() / recipe.name / "cache"
    if not prepared(cache):
        raise ValueError(f"corpus: {cache} is not prepared yet; `linattn run lm-compare` makes it (LINATTN_DATA: "
                         f"{data_root()})")  # fmt: skip
    lengths = recipe.lengths
    T = lengths[0]
    corpus = CorpusConfig(str(cache.relative_to(data_root())), corpus_fingerprint(cache), T)
    test = {L: replace(corpus, seq_len=L, split="test", whole=True, min_doc_tokens=lengths[-1])
            for L in lengths}  # fmt: skip
    sets = {
        "val_task": replace(corpus, split="val"),
        "test_task": test[T],
        "eval_at": tuple((L, test[L]) for L in lengths[1:]),
        "probe_at": tuple(
            (f"passkey {L}", PasskeyConfig(corpus.corpus, corpus.fingerprint, L)) for L in lengths if L >= PASSKEY_MIN
        ),
        "eval_batches": recipe.eval_batches,
        "eval_batch_size": recipe.eval_batch_size,
    }
    return [
        RunSpec(mixer, T, corpus, compared_model(recipe, mixer), recipe.train, **sets, select_on="loss")
        for mixer in mixers
    ]


def compared_model(recipe: Recipe, mixer: str) -> ModelConfig:
    """The recipe's model with `mixer`'s layer and options, without position embeddings."""
    m = MIXERS[mixer]
    return ModelConfig(vocab_size=recipe.vocab_size, **recipe.model, mixer=m.layer, mixer_options=m.options,
                       positions="none", max_seq_len=recipe.lengths[-1])  # fmt: skip


def is_compared(run_dir: str | Path) -> bool:
    """Whether `run_dir` is an experiment's run folder (a runner's `result.json` or checkpoint, no `linattn train`
    run.json): `load_compared` reads it, or says why it cannot."""
    from linattn.textlm.run import RUN_NAME

    run_dir = Path(run_dir)
    return not (run_dir / RUN_NAME).exists() and any((run_dir / n).exists() for n in (RESULT_NAME, CHECKPOINT_NAME))


def _record(run_dir: Path) -> tuple[dict, Path]:
    """The finished run's record and the cache (under the data root) it trained on, checked to be that corpus."""
    try:
        record = json.loads((run_dir / RESULT_NAME).read_text())
    except OSError:
        raise ValueError(f"{run_dir}: not a finished run (no {RESULT_NAME} yet)") from None
    except ValueError as e:
        raise ValueError(f"{run_dir / RESULT_NAME}: unreadable ({e})") from None
    task = record.get("task", {})
    if task.get("type") != CorpusConfig.__name__:
        raise ValueError(f"{run_dir}: a run of {task.get('type')}, not of a text corpus; export-hf and probe read "
                         "lm-compare's runs and `linattn train`'s")  # fmt: skip
    cache = data_root() / task["corpus"]
    if not prepared(cache) or corpus_fingerprint(cache) != task["fingerprint"]:
        raise ValueError(f"corpus: {cache} is not the corpus {run_dir} trained on (set LINATTN_DATA to where it was "
                         "prepared)")  # fmt: skip
    return record, cache


def load_compared(run_dir: str | Path) -> tuple[DecoderLM, FileTokenizer]:
    """A finished lm-compare run's model, with the weights it was tested with (its best validation, else its last),
    in eval mode on the CPU, and its corpus's tokenizer: what `linattn export-hf RUN_DIR OUT` writes for the
    HuggingFace Auto classes."""
    run_dir = Path(run_dir)
    record, cache = _record(run_dir)
    path = cache.parent / "tokenizer.json"
    tokenizer = FileTokenizer(path) if path.exists() else None
    if tokenizer is None or tokenizer.fingerprint != json.loads((cache / "test.json").read_text())["tokenizer"]:
        raise ValueError(f"tokenizer: {path} is missing or not the one that tokenised {cache}")
    weights = run_dir / (BEST_NAME if (run_dir / BEST_NAME).exists() else CHECKPOINT_NAME)
    if not weights.exists():  # the repository keeps a run's record and log, not its weights
        raise ValueError(f"{run_dir}: no weights ({BEST_NAME} or {CHECKPOINT_NAME}); train the run on this machine "
                         "(`linattn run lm-compare` with its protocol) to export or probe it")  # fmt: skip
    model = DecoderLM(ModelConfig(**record["model"]))
    model.load_state_dict(load_checkpoint(weights)["model"])
    return model.eval(), tokenizer


def probe_compared(run_dir: str | Path, lengths: list[int], *, split: str = "test", **options) -> dict:
    """`linattn probe` on a finished lm-compare run: its loss at `lengths` and passkey recall on its corpus's `split`
    (`textlm.probes.probe_model`; `options`: `windows`, `trials`, `device`)."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    from linattn.data.cache import open_split
    from linattn.textlm.probes import probe_model

    model, tokenizer = load_compared(run_dir)
    return probe_model(model, tokenizer, open_split(_record(Path(run_dir))[1], split), lengths, **options)


EXPERIMENTS = [
    Experiment(
        "lm-compare",
        "Decoder LMs on real text (source code and its documentation from package registries), one recipe for every "
        "mixer, the same tokens in the same order: test loss on whole documents at the training length and longer",
        "seq_len",
        plan,
        MIXERS_COMPARED,
        {},  # the papers' perplexities are at 0.4B – 1.3B parameters on other corpora (claims.py)
        protocols=("short", "fair"),
        metric="loss",
        prepare=_prepare_protocol,
    ),
]
