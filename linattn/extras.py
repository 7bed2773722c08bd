"""The optional dependencies, imported where they are used, with the extra that installs each.

The ops need only torch (and triton for their fused kernels); training progress bars, plots and the experiments
need the `experiments` extra, the HuggingFace model the `hf` extra (pyproject.toml).
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

# the oldest release of a dependency that works (pyproject.toml's extras): transformers' `generate` passes the
# recurrent state as a `Cache` to the model's `cache` argument, and takes it back from its output, as of 5.25
MINIMUM = {"transformers": "5.25"}


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """`importlib.import_module(module)`, or an ImportError that says which extra of linattn brings it (also where
    an older release than `MINIMUM`'s is installed)."""
    package = module.split(".")[0]
    try:
        found = importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{purpose} needs {package}: pip install 'linattn[{extra}]'") from e
    oldest = MINIMUM.get(package)
    version = getattr(importlib.import_module(package), "__version__", None)
    if oldest is not None and version is not None and _release(version) < _release(oldest):
        raise ImportError(f"{purpose} needs {package}>={oldest}, found {version}: pip install 'linattn[{extra}]'")
    return found


def _release(version: str) -> tuple[int, ...]:
    """The release numbers a version string starts with: '5.25.0.dev0' -> (5, 25, 0)."""
    return tuple(int(n) for n in re.match(r"\d+(?:\.\d+)*", version).group().split("."))


def tqdm(**kwargs):
    """A `tqdm.tqdm` progress bar (the `experiments` extra); with `disable=True`, none is needed."""
    if kwargs.get("disable"):
        return _NoBar()
    return require("tqdm", "experiments", "a progress bar").tqdm(**kwargs)


def pyplot():
    """`matplotlib.pyplot` on the Agg backend (files only, no screen needed; the `experiments` extra)."""
    matplotlib = require("matplotlib", "experiments", "a plot")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


class _NoBar:
    """What a disabled bar does: nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None

    def set_postfix(self, *args, **kwargs) -> None:
        return None

    def set_postfix_str(self, *args, **kwargs) -> None:
        return None

    def write(self, text: str) -> None:
        print(text)

    def close(self) -> None:
        return None
