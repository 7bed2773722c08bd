"""linattn: stable linear attention — exact reference ops, chunkwise and fused kernels, layers and experiments."""

__version__ = "0.1.0"
