"""Every named experiment, by name: training sweeps (`Experiment`) and measurements (`Diagnostic`)."""

from __future__ import annotations

from linattn.experiments import (
    kaczmarz_properties,
    kla_recall,
    kla_speed,
    lm_compare,
    lm_length,
    lm_throughput,
    vla_gradient_flow,
    vla_jacobian,
    vla_recall,
    vla_speed,
    vla_state_norm,
    zoology,
)
from linattn.experiments.diagnostic import Diagnostic
from linattn.experiments.experiment import Experiment

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        *vla_recall.EXPERIMENTS,
        *kla_recall.EXPERIMENTS,
        *lm_length.EXPERIMENTS,
        *lm_compare.EXPERIMENTS,
        *zoology.EXPERIMENTS,
    )
}
DIAGNOSTICS: dict[str, Diagnostic] = {
    d.name: d
    for d in (
        vla_state_norm.DIAGNOSTIC,
        vla_jacobian.DIAGNOSTIC,
        vla_gradient_flow.DIAGNOSTIC,
        vla_speed.DIAGNOSTIC,
        kla_speed.DIAGNOSTIC,
        kaczmarz_properties.DIAGNOSTIC,
        lm_throughput.DIAGNOSTIC,
    )
}
