"""What the ops' Triton kernels share: launch sizes on the host (`grid.py`), the chunk grid of a batch (`layout.py`)
and where a program's chunk or sequence lies in it (`index.py`), the precision of their products (`precision.py`),
the scan over chunks of per-chunk rows (`scan.py`), and the inputs they take (`inputs.py`)."""
