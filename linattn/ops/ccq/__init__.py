"""Curvature-conditioned query: a read-side contraction by the running key covariance."""

from linattn.ops.ccq.api import ccq_query

__all__ = ["ccq_query"]
