"""Triton kernels of GLA with a per-channel decay (`gated_linear_attention(..., g: [B, T, H, K], backend="triton")`):
forward and backward in chunks of 64 tokens, scores within a chunk in sub-chunks of 16 (see `../README.md`)."""
