"""Input validation shared by every op.

Every public op validates its arguments here before dispatching to a backend, so a user gets one clear
error naming the argument and the expected shape or dtype, never a silent broadcast or a crash deep inside
a backend. Shape and device errors are `ValueError`, dtype errors are `TypeError`.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass

import torch

BACKENDS = ("auto", "naive", "chunk", "triton", "fused_recurrent")


@dataclass(frozen=True)
class Dims:
    """Sizes of one call: batch `B`, time `T`, heads `H`, key dim `K`, value dim `V`, sequences `N`.

    `N` is the number of independent sequences: `B`, or `len(cu_seqlens) - 1` for a packed batch.
    """

    B: int
    T: int
    H: int
    K: int
    V: int
    N: int
    device: torch.device | None = None  # where every tensor argument must live (q's)


def _shape(x: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in x.shape) + "]"


def check_float(name: str, x: object) -> torch.Tensor:
    """`x` must be a floating-point tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}")
    return x


def check_shape(
    name: str,
    x: object,
    expected: tuple[int, ...],
    layout: str,
    device: torch.device | None = None,
    device_of: str = "q",
) -> torch.Tensor:
    """`x` must be a float tensor of exactly `expected` shape (`layout` names the dims, e.g. `"[B, T, H]"`), on
    `device` when given (that of the argument `device_of`)."""
    x = check_float(name, x)
    if tuple(x.shape) != tuple(expected):
        want = "[" + ", ".join(str(s) for s in expected) + "]"
        raise ValueError(f"{name}: expected shape {layout} = {want}, got {_shape(x)}")
    if device is not None and x.device != device:
        raise ValueError(f"{name}: expected device {device} (as {device_of}), got {x.device}")
    return x


def check_scale(scale: object, K: int) -> float:
    """The output scale: None (`K ** -0.5`) or a finite real number."""
    if scale is None:
        return K**-0.5
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale: expected a float or None, got {type(scale).__name__}")
    if not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite number, got {scale}")
    return float(scale)


def check_qk(q: object, k: object, *, q_name: str = "q", k_name: str = "k") -> tuple[int, int, int, int]:
    """`q` and `k` are `[B, T, H, K]` float tensors of one dtype and device; returns `(B, T, H, K)`."""
    q = check_float(q_name, q)
    k = check_float(k_name, k)
    if q.dim() != 4:
        raise ValueError(f"{q_name}: expected a 4-D tensor [B, T, H, K], got shape {_shape(q)}")
    if q.shape[1] == 0:
        raise ValueError(f"{q_name}: expected at least one time step (T >= 1), got shape {_shape(q)}")
    if q.shape[2] == 0 or q.shape[3] == 0:
        raise ValueError(f"{q_name}: expected at least one head and one feature (H, K >= 1), got shape {_shape(q)}")
    check_shape(k_name, k, tuple(q.shape), f"[B, T, H, K] (as {q_name})")
    if k.dtype != q.dtype:
        raise TypeError(f"{k_name}: expected dtype {q.dtype} (as {q_name}), got {k.dtype}")
    if k.device != q.device:
        raise ValueError(f"{k_name}: expected device {q.device} (as {q_name}), got {k.device}")
    return tuple(q.shape)  # type: ignore[return-value]


def check_qkv(q: object, k: object, v: object, cu_seqlens: object = None) -> Dims:
    """Validate `q, k: [B, T, H, K]`, `v: [B, T, H, V]` (one dtype, one device) and `cu_seqlens`."""
    B, T, H, K = check_qk(q, k)
    v = check_float("v", v)
    if v.dim() != 4 or tuple(v.shape[:3]) != (B, T, H):
        raise ValueError(f"v: expected shape [B, T, H, V] = [{B}, {T}, {H}, V], got {_shape(v)}")
    if v.shape[-1] == 0:
        raise ValueError(f"v: expected at least one feature (V >= 1), got shape {_shape(v)}")
    if v.dtype != q.dtype:
        raise TypeError(f"v: expected dtype {q.dtype} (as q), got {v.dtype}")
    if v.device != q.device:
        raise ValueError(f"v: expected device {q.device} (as q), got {v.device}")
    N = check_cu_seqlens(cu_seqlens, B, T)
    return Dims(B=B, T=T, H=H, K=K, V=v.shape[-1], N=N, device=q.device)


def check_cu_seqlens(cu_seqlens: object, B: int, T: int) -> int:
    """`cu_seqlens` is None or a 1-D integer tensor `[0, …, T]`, strictly increasing, with `B == 1`.

    Returns the number of sequences `N`.
    """
    if cu_seqlens is None:
        return B
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(f"cu_seqlens: expected a torch.Tensor, got {type(cu_seqlens).__name__}")
    if cu_seqlens.is_floating_point() or cu_seqlens.is_complex() or cu_seqlens.dtype == torch.bool:
        raise TypeError(f"cu_seqlens: expected an integer tensor, got dtype {cu_seqlens.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(f"cu_seqlens: expected shape [N + 1] with N >= 1, got {_shape(cu_seqlens)}")
    if B != 1:
        raise ValueError(f"cu_seqlens: packed sequences need batch size B == 1, got B = {B}")
    if cu_seqlens.is_meta:
        raise ValueError("cu_seqlens: the offsets are read on the host, got a meta tensor (it has no values)")
    c = cu_seqlens.tolist()
    if c[0] != 0:
        raise ValueError(f"cu_seqlens: expected to start at 0, got {c[0]}")
    if any(b <= a for a, b in itertools.pairwise(c)):
        raise ValueError(f"cu_seqlens: expected strictly increasing offsets, got {c}")
    if c[-1] != T:
        raise ValueError(f"cu_seqlens: expected to end at T = {T}, got {c[-1]}")
    return len(c) - 1


def check_gate(name: str, x: object, dims: Dims, *, log_decay: bool = False) -> torch.Tensor:
    """A per-token, per-head scalar `[B, T, H]`; with `log_decay` every entry must be `<= 0`."""
    x = check_shape(name, x, (dims.B, dims.T, dims.H), "[B, T, H]", dims.device)
    if log_decay:
        check_log_decay(name, x)
    return x


def check_log_decay(name: str, g: torch.Tensor) -> None:
    """A log-decay must be `<= 0` (decay `exp(g) <= 1`). Checked where the values are on the host's side (CPU
    tensors) only: on a GPU, reading the answer would make the host wait for the device at every call, once per
    layer and token when decoding, whose step is bound by the host already. The layers' decays are `≤ 0` by
    construction."""
    if g.device.type != "cpu":
        return
    if not bool(torch.isfinite(g).all()):
        raise ValueError(
            f"{name}: a log-decay must be finite, got {g[~torch.isfinite(g)].flatten()[0].item()} "
            "(a reset of the state is a sequence boundary: pass cu_seqlens)"
        )
    if bool((g > 0).any()):
        raise ValueError(f"{name}: a log-decay must be <= 0 everywhere, got max {g.max().item():.3g}")


def check_nonnegative(name: str, x: torch.Tensor, what: str, zero_means: str) -> None:
    """`x >= 0` everywhere, checked on CPU tensors only (as `check_log_decay`). For a running mass that divides
    sums: a negative one can cancel a token's mass and turn the quotient into NaN."""
    if x.device.type == "cpu" and not bool((x >= 0).all()):
        raise ValueError(f"{name}: {what} must be >= 0 ({zero_means}), got min {x.min().item():.3g}")


def check_spd(name: str, A: torch.Tensor) -> None:
    """`A: [..., K, K]` must be symmetric positive definite (every backend reads it as such: a Cholesky reads one
    triangle). Checked on CPU tensors only, as `check_log_decay`; symmetric to 1e-4 of its largest entry, so that a
    state carried from an earlier call (symmetric up to rounding) passes."""
    if A.device.type != "cpu":
        return
    gap = (A - A.mT).abs().amax().item()
    if gap > 1e-4 * A.abs().amax().item():
        raise ValueError(f"{name}: expected symmetric positive definite, got |A - Aᵀ| up to {gap:.3g}")
    if bool((torch.linalg.cholesky_ex(A.double()).info != 0).any()):
        raise ValueError(f"{name}: expected symmetric positive definite (its Cholesky factorisation failed)")


def check_state(
    name: str,
    x: object,
    expected: tuple[int, ...],
    layout: str,
    device: torch.device | None = None,
    device_of: str = "q",
) -> torch.Tensor | None:
    """An optional recurrent state of shape `expected` (None passes), on `device` when given."""
    if x is None:
        return None
    return check_shape(name, x, expected, layout, device, device_of)


def check_backend(
    backend: object, device: torch.device, available: tuple[str, ...], dtype: torch.dtype | None = None
) -> str:
    """Resolve `backend` to a concrete one among `available` (`"auto"` takes the fastest that runs here: `"triton"`
    on CUDA, but `"chunk"` for float64 inputs, which the kernels would compute in float32)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        fused = device.type == "cuda" and "triton" in available and dtype != torch.float64
        return "triton" if fused else "chunk"
    if backend not in available:
        raise ValueError(f"backend: {backend!r} is not available for this op; available: {available}")
    if backend in ("triton", "fused_recurrent") and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(
            f"backend: {backend!r} runs on CUDA tensors, got device {device.type} (on CPU, Triton's interpreter runs "
            "it at small sizes: set TRITON_INTERPRET=1 before importing triton; or use backend='chunk')"
        )
    return backend


PRECISIONS = ("exact", "fast")


def check_flag(name: str, x: object) -> bool:
    """An on / off option, a bool: a string such as `"no"` would otherwise read as on."""
    if not isinstance(x, bool):
        raise TypeError(f"{name}: expected a bool, got {type(x).__name__} {x!r}")
    return x


def check_precision(precision: object) -> bool:
    """`precision` of an op with a Triton path: `"exact"` (docs/design.md §4, the default) or `"fast"` (bfloat16
    intermediates and tensor-core products, §4's second level); returns whether it is `"fast"`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    return precision == "fast"


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """States and accumulation run in float64 for float64 inputs, float32 otherwise."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def check_head_first(dims: Dims, *args: tuple[str, object, str], q_name: str = "q") -> None:
    """Refuse fla's old head-first layout `[B, H, T, K]` where the shapes reveal it. An op reads `T` and `H` from `q`'s
    dims 1 and 2, so head-first `q, k, v` pass their own checks with `T` and `H` swapped; another argument made for
    the real sizes then has exactly the swapped shape. `args`: `(name, x, layout)` with `layout` the letters of `Dims`
    that name `x`'s leading dims, e.g. `("beta", beta, "BTH")`, `("initial_state", S, "NHKV")`; None passes, and a
    tuple state is read by its first part. `q_name`: the argument whose dims 1 and 2 gave `T` and `H`."""
    for name, x, layout in args:
        if isinstance(x, tuple):
            name, x = f"{name}[0]", x[0] if x else None
        if not isinstance(x, torch.Tensor) or x.dim() < len(layout):
            continue
        expected = tuple(getattr(dims, c) for c in layout)
        swapped = tuple(getattr(dims, {"T": "H", "H": "T"}.get(c, c)) for c in layout)
        if tuple(x.shape[: len(layout)]) == swapped != expected:
            fits = ", ".join(layout) + (", …" if x.dim() > len(layout) else "")
            raise ValueError(
                f"{name}: shape {_shape(x)} fits [{fits}] with {q_name}'s dims 1 and 2 swapped: either {q_name} and "
                f"the other token inputs are head-first ([B, H, T, K]; linattn ops take [B, T, H, K]: use "
                f"{q_name}.transpose(1, 2)), or {name} is (use {name}.transpose(1, 2))"
            )
