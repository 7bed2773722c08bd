"""Session 21 scratch: which host call of VLA's forward waits for the GPU. The GPU is kept busy by a ~1 s sleep
kernel; cProfile's own times then show the waiting call at about a second."""
import cProfile
import pstats
import sys

import torch

from linattn.experiments.vla_speed import CONTENDERS, SpeedConfig, inputs

by_name = {c.name: c for c in CONTENDERS}
for K in [int(k) for k in sys.argv[1:]] or [128]:
    for pass_ in ("fwd", "fwdbwd"):
        x = inputs(SpeedConfig(Ts=(4096,), head_dims=(K,), H=16, dtype="bfloat16"), 4096, K, "cuda")
        if pass_ == "fwd":
            fn = torch.no_grad()(lambda: by_name["VLA triton"].run(x))
        else:
            fn = lambda: by_name["VLA triton"].run(x).float().sum().backward()  # noqa: E731
        fn()
        torch.cuda.synchronize()
        torch.cuda._sleep(int(2e9))
        prof = cProfile.Profile()
        prof.enable()
        fn()
        prof.disable()
        torch.cuda.synchronize()
        print(f"## K={K} {pass_}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(8)
