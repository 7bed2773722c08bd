"""Export a trained `DecoderLM` and its tokenizer as a HuggingFace model folder (the `hf` extra): what
`AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` open once `linattn.models.hf` is
imported (it registers the `linattn` model type)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from linattn.data.tokenizer import Tokenizer
from linattn.extras import require
from linattn.io import check_replaceable, give_default_modes
from linattn.models.lm import DecoderLM


def export_hf(model: DecoderLM, tokenizer: Tokenizer, out: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write `model` as a `LinAttnForCausalLM` (config and safetensors weights) and `tokenizer` as a
    `PreTrainedTokenizerFast` (`tokenizer.json`; its end-of-document token, where it has one (a trained BPE; bytes
    have none), as `eos_token` and, padding on the left, `pad_token`, also the config's `eos_token_id` and
    `pad_token_id`) into the folder `out`, all at once: a folder beside it, renamed when complete. An existing
    non-empty `out` is an error unless `overwrite`, and even then unless it is such an export (its `config.json` of
    model type `linattn`): a folder of anything else is never replaced.

    Example:
        >>> run, model, tokenizer = linattn.textlm.load_run("runs/notes")
        >>> export_hf(model, tokenizer, "notes-hf")
        >>> AutoModelForCausalLM.from_pretrained("notes-hf"), AutoTokenizer.from_pretrained("notes-hf")
    """
    from linattn.models.hf import LinAttnConfig, LinAttnForCausalLM

    PreTrainedTokenizerFast = require("transformers", "hf", "export_hf").PreTrainedTokenizerFast

    out = Path(out)
    check_replaceable(out, force=overwrite, what="an export of a linattn model", is_one=_is_export)
    if model.config.vocab_size < tokenizer.vocab_size:
        raise ValueError(
            f"tokenizer: {tokenizer.vocab_size} ids, more than the model's vocab_size = {model.config.vocab_size}"
        )
    config = LinAttnConfig.from_model_config(model.config)
    if tokenizer.eod_id is not None:
        config.eos_token_id = config.pad_token_id = tokenizer.eod_id
    hf_model = LinAttnForCausalLM(config)
    hf_model.lm.load_state_dict(model.state_dict())
    # padding with the end-of-document token, on the left: a batch of prompts of several lengths generates as each
    # alone would (the attention mask keeps the pads out of the state)
    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer.hf_tokenizer(),
        eos_token=tokenizer.eod_token,
        pad_token=tokenizer.eod_token,
        padding_side="left",
    )

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        hf_model.save_pretrained(staging)
        hf_tokenizer.save_pretrained(staging)
        give_default_modes(staging)
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
            os.replace(out, old / out.name)
            os.replace(staging, out)
            shutil.rmtree(old)
        else:
            os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _is_export(folder: Path) -> bool:
    try:
        return json.loads((folder / "config.json").read_text()).get("model_type") == "linattn"
    except (OSError, ValueError, AttributeError):
        return False
