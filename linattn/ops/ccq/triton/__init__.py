"""Triton kernels of CCQ's covariance read: the chunked forward and backward (stage files, see
`../README.md`) and their autograd function (`ccq_query(..., backend="triton")`)."""

from linattn.ops.ccq.triton.function import CCQTriton, ccq_query_triton

__all__ = ["CCQTriton", "ccq_query_triton"]
