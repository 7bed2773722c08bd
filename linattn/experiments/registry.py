"""Every named experiment, by name."""

from __future__ import annotations

from linattn.experiments import vla_recall
from linattn.experiments.experiment import Experiment

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in vla_recall.EXPERIMENTS}
