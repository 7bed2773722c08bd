"""`vla-speed`'s contenders and their inputs (`linattn/experiments/vla_speed.py`'s docstring describes both), shared
with `bench profile`, which explains a cell of that diagnostic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from linattn.ops import ccq_query, delta_rule, linear_attention, softmax_attention, vla

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class SpeedConfig:
    Ts: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)  # sequence lengths, increasing
    head_dims: tuple[int, ...] = (32, 128)  # K = V
    H: int = 4  # heads
    B: int = 1  # batch
    loop_max_T: int = 4096  # the token loop is timed up to this T
    loop_backward_max_T: int = 4096  # and its forward + backward up to this one
    dtype: str = "float32"  # inputs; states and accumulation are float32 in every op
    min_run_time: float = 0.5  # CPU: seconds of timed calls per measurement (CUDA: do_bench decides)
    seed: int = 0  # inputs

    def __post_init__(self):
        if not self.Ts or any(not isinstance(t, int) or t < 1 for t in self.Ts):
            raise ValueError(f"Ts: expected positive ints, got {self.Ts!r}")
        if any(a >= b for a, b in zip(self.Ts, self.Ts[1:])):
            raise ValueError(f"Ts: expected increasing lengths, got {self.Ts!r}")
        if not self.head_dims or any(not isinstance(k, int) or k < 1 for k in self.head_dims):
            raise ValueError(f"head_dims: expected positive ints, got {self.head_dims!r}")
        for name in ("H", "B", "loop_max_T", "loop_backward_max_T"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {getattr(self, name)!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {list(DTYPES)}, got {self.dtype!r}")
        if not self.min_run_time > 0:
            raise ValueError(f"min_run_time: expected seconds > 0, got {self.min_run_time!r}")


def _vla(x: dict[str, torch.Tensor], backend: str, precision: str = "exact") -> torch.Tensor:
    return vla(x["q"], x["k"], x["v"], x["u"], backend=backend, precision=precision)[0]


def _softmax(x: dict[str, torch.Tensor]) -> torch.Tensor:
    return softmax_attention(x["q"], x["k"], x["v"])[0]


def _linear(x: dict[str, torch.Tensor]) -> torch.Tensor:
    return linear_attention(x["q"], x["k"], x["v"], normalize=True)[0]


def _gdn(x: dict[str, torch.Tensor], q: torch.Tensor | None = None, precision: str = "exact") -> torch.Tensor:
    q = x["q"] if q is None else q
    return delta_rule(q, x["k_unit"], x["v"], beta=x["beta"], g=x["g"], precision=precision)[0]


def _kla(x: dict[str, torch.Tensor]) -> torch.Tensor:
    return delta_rule(x["q"], x["k"], x["v"], beta=x["beta"], g=x["g"], kaczmarz_eps=1e-6)[0]


def _ccq_gdn(x: dict[str, torch.Tensor], precision: str = "exact") -> torch.Tensor:
    q = ccq_query(x["q"], x["k_unit"], x["beta"], g=x["g"], normalize_keys=False, precision=precision)[0]
    return _gdn(x, q=q, precision=precision)


@dataclass(frozen=True)
class Contender:
    name: str
    run: Callable[[dict[str, torch.Tensor]], torch.Tensor]  # the inputs -> the output `[B, T, H, V]`
    loop: bool = False  # a token loop: timed only up to `loop_max_T`
    cuda_only: bool = False


VLA_CHUNKED, LOOP, SOFTMAX = ("VLA chunk", "VLA triton"), "VLA token loop", "softmax (SDPA)"
GDN, KLA, CCQ_GDN, LINEAR = "GDN (delta_rule)", "KLA (delta_rule)", "CCQ-GDN", "linear attention"
GDN_FAST, CCQ_GDN_FAST, VLA_FAST = "GDN fast", "CCQ-GDN fast", "VLA fast"  # precision="fast"
CONTENDERS = (
    Contender("VLA chunk", partial(_vla, backend="chunk")),
    Contender("VLA triton", partial(_vla, backend="triton"), cuda_only=True),
    Contender(LOOP, partial(_vla, backend="naive"), loop=True),
    Contender(SOFTMAX, _softmax),
    Contender(LINEAR, _linear),
    Contender(GDN, _gdn),
    Contender(KLA, _kla),
    Contender(CCQ_GDN, _ccq_gdn),
    # the fast level changes the Triton kernels alone: on the CPU they would time the exact level again
    Contender(GDN_FAST, partial(_gdn, precision="fast"), cuda_only=True),
    Contender(CCQ_GDN_FAST, partial(_ccq_gdn, precision="fast"), cuda_only=True),
    Contender(VLA_FAST, partial(_vla, backend="triton", precision="fast"), cuda_only=True),
)


def inputs(config: SpeedConfig, T: int, K: int, device: str) -> dict[str, torch.Tensor]:
    """Every contender's inputs at length `T` and head dim `K` (see `vla-speed`'s docstring), leaves needing grads."""
    gen = torch.Generator(device=device).manual_seed(config.seed)
    shape = (config.B, T, config.H, K)

    def randn(*size):
        return torch.randn(*size, generator=gen, device=device)

    x = {
        "q": F.elu(randn(*shape)) + 1,
        "k": F.elu(randn(*shape)) + 1,
        "v": randn(*shape),
        "u": F.normalize(randn(*shape), dim=-1) / K**0.5,
    }
    x["k_unit"] = F.normalize(x["k"], dim=-1)
    x = {name: t.to(DTYPES[config.dtype]) for name, t in x.items()}
    x["beta"] = torch.rand(shape[:3], generator=gen, device=device)
    x["g"] = -0.1 * torch.rand(shape[:3], generator=gen, device=device)
    return {name: t.requires_grad_() for name, t in x.items()}
