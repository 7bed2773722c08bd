"""Validation shared by the task configs: each names the field, the expected value and what it got."""

from __future__ import annotations

import math


def check_int(name: str, value: int, low: int) -> None:
    """`value` must be an int (not a bool) `>= low`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")


def check_positive(name: str, value: float) -> None:
    """`value` must be a finite number `> 0`."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
