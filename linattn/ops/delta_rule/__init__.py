"""The two-key gated delta rule and KLA's Kaczmarz step."""

from linattn.ops.delta_rule.api import delta_rule
from linattn.ops.delta_rule.kaczmarz import kaczmarz_beta

__all__ = ["delta_rule", "kaczmarz_beta"]
