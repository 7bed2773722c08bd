"""The decoder LM backbone and its named presets."""

from linattn.models.config import PRESETS, ModelConfig, preset
from linattn.models.lm import DecoderLM

__all__ = ["PRESETS", "DecoderLM", "ModelConfig", "preset"]
