"""Fuzzing the ops and layers with random valid and invalid inputs: `python -m linattn.bench fuzz`.

Valid inputs come from each op's documented domain (the "Domain" section of its README). A `Draw` says where one
call sits in it (sizes, options, the ranges its values come from, a seed for the values) and `build` turns it into
float64 tensors; the fuzzer picks draws with `draw`, `tests/ops/test_domain.py` with hypothesis strategies, and both
judge them with `check_valid`. A valid call must give finite outputs on every backend, within `TOLERANCE` of the
float64 token loop. An invalid one (`MUTATIONS`: wrong ranks, dtypes and devices, empty dims, bad `cu_seqlens`,
values outside the domain, …) must raise a clear `ValueError` / `TypeError`, one whose message starts with the name
of an argument. Layers (`build_layer` over `LAYERS`) are fuzzed alike, forward, packed and `step`
(`LayerDraw`, `check_layer`, `LAYER_MUTATIONS`). Anything else is a `Finding`, reported with the code that
reproduces it. Case `i` of a run depends only on `(seed, i)`: how many cases run depends on the time given.
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F

from linattn import ops
from linattn.layers import CCQ_LAYERS, LAYERS, build_layer

F64 = torch.float64

# The documented domain (each op's README, "Domain").
G_MIN = -30.0  # log-decays in [G_MIN, 0]
KEY_NORM_RANGE = (1e-4, 1e4)  # keys that the op normalises, or scales its step by (KLA)
RAW_KEY_NORM_MAX = 10.0  # CCQ with normalize_keys=False: its centred covariance cancels as ‖k‖² grows
LAM0_RANGE = (1e-3, 1e3)  # VLA's ridge λ0
U_NORM_RANGE = (1e-3, 1e2)  # VLA's penalty directions, per token
PENALTY_RATIO_MAX = 10.0  # VLA: ‖u‖² / λ0 at most this (the penalty's conditioning; the layer has 10 / d)
RHO_MIN = 0.9  # VLA's forgetting factor ρ in [RHO_MIN, 1], with a window 1 / (1 − ρ) of at least K / 2 tokens
STEP_MAX = 2.0  # the delta rule's β‖k‖², KLA's η: non-expansive writes up to 2
LOGIT_MAX = 50.0  # softmax attention: |scale · qᵀk|
MAX_T = 100  # sizes the fuzzer draws (the domain itself has no upper bound on T)

# The accuracy contract: relative RMS error of each output and final state against the float64 token loop ...
TOLERANCE = {F64: 1e-10, torch.float32: 1e-4}
# ... plus SLACK times the relative change that rounding the inputs to float32 makes in that output (scaled to the
# dtype's rounding), `conditioning`: far below the tolerance, except where an output cancels to about zero.
SLACK = 30.0
UNIT_ROUNDOFF = {F64: 2.0**-53, torch.float32: 2.0**-24}


@dataclass(frozen=True)
class Draw:
    """One valid call of op `op`: sizes, configuration (`variant`: `VARIANTS`), the ranges its values come from,
    and the seed of the values; `build(draw)` makes it. An op ignores the fields it does not read.

    `lengths`: packed sequences in one row (`B == 1`, `T == sum(lengths)`) or None. `key_norm`: each token's key
    norm is log-uniform in this range (`u_norm` alike for VLA's `u`). `decay`: pass log-decays, uniform in
    `[g_min, 0]`. `step`: the delta rule's `β‖k‖²` (KLA: `η`) is uniform in `[0, step]`. `state`: pass an initial
    state, as one carried from an earlier call would be.
    """

    op: str
    B: int = 1
    T: int = 8
    H: int = 2
    K: int = 4
    V: int = 4
    lengths: tuple[int, ...] | None = None
    variant: str = ""
    decay: bool = False
    key_norm: tuple[float, float] = (1.0, 1.0)
    g_min: float = -1.0
    step: float = 1.0
    eps: float = 1e-6
    lam0: float = 0.1
    u_norm: tuple[float, float] = (0.1, 0.1)
    rho: float = 1.0
    scale: float | None = None
    state: bool = False
    seed: int = 0


# each op's configurations (`Draw.variant`)
VARIANTS = {
    "ccq_query": ("centered", "uncentered", "raw-keys"),
    "delta_rule": ("deltanet", "raw-keys", "kla", "two-key"),
    "gated_linear_attention": ("scalar", "channel"),
    "kaczmarz_beta": ("",),
    "linear_attention": ("plain", "normalize"),
    "softmax_attention": ("causal", "full"),
    "vla": ("", "refresh"),
    "vla_gate": ("", "refresh"),
}
TOKENS = ("q", "k", "v", "w", "u")  # the `[B, T, H, ·]` arguments a head-first layout would transpose


def op_backends(op: str) -> tuple[str, ...]:
    """The op's backends (its api module's `BACKENDS`); `()` for the ops without a `backend` argument."""
    module = inspect.getmodule(getattr(ops, op))
    return tuple(getattr(module, "BACKENDS", ())) if "backend" in inspect.signature(getattr(ops, op)).parameters else ()


def backends_on(op: str, device: str) -> list[tuple[str | None, torch.dtype]]:
    """The `(backend, dtype)` pairs a valid call is checked on: `naive` and `chunk` in float64 and float32, and on
    CUDA `triton` and `fused_recurrent` in float32 (where the op has them); `(None, dtype)` for an op without
    backends."""
    have = op_backends(op)
    if not have:
        return [(None, F64), (None, torch.float32)]
    pairs = [(b, dt) for b in ("naive", "chunk") for dt in (F64, torch.float32)]
    if device == "cuda":
        pairs += [(b, torch.float32) for b in ("triton", "fused_recurrent") if b in have]
    return pairs


@dataclass
class Call:
    """An op's arguments by name (passed as keywords). `layout` gives each tensor argument's dims (`"BTHK"`,
    `"BTH"`, `"state"`), so that `MUTATIONS` can cut them."""

    op: str
    kwargs: dict[str, Any]
    layout: dict[str, str] = field(default_factory=dict)

    def run(self, backend: str | None = None, dtype: torch.dtype | None = None, device=None) -> list[torch.Tensor]:
        """The outputs and final states as a flat list, the floats cast to `dtype` (None: as they are) and every
        tensor moved to `device` (None: where it is)."""
        kwargs = {name: _to(x, dtype, device) for name, x in self.kwargs.items()}
        if backend is not None:
            kwargs["backend"] = backend
        return _flatten(getattr(ops, self.op)(**kwargs))

    def with_(self, **changes) -> Call:
        return Call(self.op, {**self.kwargs, **changes}, self.layout)

    def describe(self) -> str:
        """Each argument: tensors by dtype, shape, device and range of values."""
        return ", ".join(f"{name}={summary(x)}" for name, x in self.kwargs.items())


def _to(x, dtype, device):
    if isinstance(x, (tuple, list)):
        return type(x)(_to(t, dtype, device) for t in x)
    if not isinstance(x, torch.Tensor):
        return x
    x = x if device is None else x.to(device)
    return x.to(dtype) if dtype is not None and x.is_floating_point() else x


def _flatten(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in _flatten(x)]
    return []


def summary(x) -> str:
    """A tensor as `float32[1, 8, 2, 4] in -1.2…3.4`, anything else by its repr (for reports)."""
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(summary(t) for t in x) + ")"
    if not isinstance(x, torch.Tensor):
        return repr(x)
    head = f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}" + ("" if x.device.type == "cpu" else f"@{x.device}")
    if x.is_meta or x.numel() == 0:
        return head
    if not x.is_floating_point():
        return f"{head} = {x.flatten()[:8].tolist()}" + (" …" if x.numel() > 8 else "")
    a = x.detach().double().cpu()
    finite = a[torch.isfinite(a)]
    bad = a.numel() - finite.numel()
    values = f"{finite.min().item():.3g}…{finite.max().item():.3g}" if finite.numel() else "none finite"
    return f"{head} in {values}" + (f" ({bad} non-finite)" if bad else "")


def _rand(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=gen, dtype=F64)


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=F64)


def _rows(gen: torch.Generator, shape: tuple[int, ...], dim: int, norms: tuple[float, float], positive=False):
    """`[*shape, dim]`: random directions (positive ones: ELU+1 features) with log-uniform norms in `norms`."""
    x = _randn(gen, *shape, dim)
    x = F.normalize(F.elu(x) + 1 if positive else x, dim=-1)
    lo, hi = math.log(norms[0]), math.log(norms[1])
    return x * torch.exp(lo + (hi - lo) * _rand(gen, *shape, 1))


def build(d: Draw) -> Call:
    """The float64 inputs of `d`, values from `torch.Generator().manual_seed(d.seed)`."""
    if d.variant not in VARIANTS.get(d.op, ()):
        raise ValueError(f"variant: expected one of {VARIANTS.get(d.op)} for op {d.op!r}, got {d.variant!r}")
    if d.lengths is not None and (d.B != 1 or sum(d.lengths) != d.T):
        raise ValueError(f"lengths: expected B == 1 and sum(lengths) == T = {d.T}, got B = {d.B}, {d.lengths}")
    gen = torch.Generator().manual_seed(d.seed)
    B, T, H, K, V = d.B, d.T, d.H, d.K, d.V
    N = B if d.lengths is None else len(d.lengths)
    g = d.g_min * _rand(gen, B, T, H) if d.decay else None
    kw: dict[str, Any] = {}
    layout = {"q": "BTHK", "k": "BTHK", "v": "BTHV", "initial_state": "state"}
    if d.op == "delta_rule":
        unit_keys = d.variant in ("deltanet", "two-key")
        k = _rows(gen, (B, T, H), K, (1.0, 1.0) if unit_keys else d.key_norm)
        c = d.step * _rand(gen, B, T, H)
        kw = {"q": _randn(gen, B, T, H, K), "k": k, "v": _randn(gen, B, T, H, V)}
        kw |= {"beta": c, "kaczmarz_eps": d.eps} if d.variant == "kla" else {"beta": c / k.pow(2).sum(-1)}
        if d.variant == "two-key":  # a write direction on k's side, as VLA's α̂ is (α̂ᵀk̂ > 0)
            kw["w"] = F.normalize(k + _randn(gen, B, T, H, K) / K**0.5, dim=-1)
        kw["g"] = g
        if d.state:  # carried: on the scale of the writes `β k vᵀ`, `‖v‖ / ‖k‖`
            kw["initial_state"] = _randn(gen, N, H, K, V) / (1.0 if unit_keys else math.sqrt(math.prod(d.key_norm)))
        kw |= {"scale": d.scale, "output_final_state": True}
        layout |= {"w": "BTHK", "beta": "BTH", "g": "BTH"}
    elif d.op == "kaczmarz_beta":
        kw = {"k": _rows(gen, (B, T, H), K, d.key_norm), "eta": d.step * _rand(gen, B, T, H), "eps": d.eps}
        layout = {"k": "BTHK", "eta": "BTH"}
    elif d.op in ("vla", "vla_gate"):
        k = _rows(gen, (B, T, H), K, d.key_norm, positive=True)
        u = _rows(gen, (B, T, H), K, d.u_norm)
        A0 = None
        if d.state:  # carried: the inverse penalty after 2K earlier tokens
            earlier = _rows(gen, (N, H, 2 * K), K, d.u_norm)
            A0 = torch.linalg.inv(d.lam0 * torch.eye(K, dtype=F64) + earlier.mT @ earlier)
            A0 = (A0 + A0.mT) / 2
        if d.op == "vla_gate":
            kw = {"k": k, "u": u, "initial_state": A0}
            layout = {"k": "BTHK", "u": "BTHK", "initial_state": "state"}
        else:
            S0 = None if A0 is None else _randn(gen, N, H, K, V)
            kw = {"q": _randn(gen, B, T, H, K), "k": k, "v": _randn(gen, B, T, H, V), "u": u, "scale": d.scale}
            kw["initial_state"] = None if A0 is None else (S0, A0)
            layout["u"] = "BTHK"
        kw |= {"lam0": d.lam0, "rho": d.rho, "output_final_state": True}
        if d.variant == "refresh":  # the prior re-injected from each sequence's position on
            kw |= {"refresh": True, "position": torch.randint(0, 3 * K, (N,), generator=gen)}
    elif d.op == "ccq_query":
        raw = d.variant == "raw-keys"
        kw = {"q": _randn(gen, B, T, H, K), "k": _rows(gen, (B, T, H), K, d.key_norm), "lam": _rand(gen, B, T, H)}
        kw |= {"g": g, "centered": d.variant != "uncentered", "normalize_keys": not raw, "output_final_state": True}
        if d.state:  # carried: the sums over 2K earlier keys
            earlier = _rows(gen, (N, H, 2 * K), K, d.key_norm if raw else (1.0, 1.0))
            kw["initial_state"] = (earlier.mT @ earlier, earlier.sum(-2), torch.full((N, H), 2.0 * K, dtype=F64))
        layout = {"q": "BTHK", "k": "BTHK", "lam": "BTH", "g": "BTH", "initial_state": "state"}
    elif d.op == "gated_linear_attention":
        channel = d.variant == "channel"
        shape = (B, T, H, K) if channel else (B, T, H)
        kw = {"q": _randn(gen, B, T, H, K), "k": _rows(gen, (B, T, H), K, d.key_norm), "v": _randn(gen, B, T, H, V)}
        kw |= {"g": d.g_min * _rand(gen, *shape) if d.decay else torch.zeros(shape, dtype=F64), "scale": d.scale}
        kw |= {"output_final_state": True}
        if d.state:
            kw["initial_state"] = _randn(gen, N, H, K, V)
        layout["g"] = "BTHK" if channel else "BTH"
    elif d.op == "linear_attention":
        normalize = d.variant == "normalize"  # on positive features, as the normaliser assumes
        kw = {"q": _rows(gen, (B, T, H), K, (1.0, 1.0), positive=normalize)}
        kw |= {"k": _rows(gen, (B, T, H), K, d.key_norm, positive=normalize), "v": _randn(gen, B, T, H, V)}
        kw |= {"normalize": normalize, "scale": d.scale, "output_final_state": True}
        if d.state:  # normalised: the pair of a carried state, whose z sums positive keys
            S0 = _randn(gen, N, H, K, V)
            kw["initial_state"] = (S0, _rows(gen, (N, H), K, d.key_norm, positive=True)) if normalize else S0
    elif d.op == "softmax_attention":
        scale = K**-0.5 if d.scale is None else d.scale
        q_norm = LOGIT_MAX / ((abs(scale) or 1.0) * d.key_norm[1])  # |scale · qᵀk| ≤ LOGIT_MAX
        kw = {"q": _rows(gen, (B, T, H), K, (q_norm / 10, q_norm)), "k": _rows(gen, (B, T, H), K, d.key_norm)}
        kw |= {"v": _randn(gen, B, T, H, V), "scale": d.scale, "causal": d.variant == "causal"}
        layout.pop("initial_state")
    if d.lengths is not None and d.op != "kaczmarz_beta":
        kw["cu_seqlens"] = torch.tensor([0, *itertools.accumulate(d.lengths)])
    return Call(d.op, {n: x for n, x in kw.items() if x is not None}, layout)


def u_norm_max(lam0: float) -> float:
    """The largest `‖u‖` of VLA's domain at ridge `lam0`: `‖u‖² / λ0 ≤ PENALTY_RATIO_MAX`, `‖u‖ ≤ 1e2`."""
    return min(U_NORM_RANGE[1], math.sqrt(PENALTY_RATIO_MAX * lam0))


def rho_min(K: int) -> float:
    """The smallest forgetting factor of VLA's domain at head dim `K`: `ρ ≥ 0.9` and `1 / (1 − ρ) ≥ K / 2`."""
    return max(RHO_MIN, 1 - 2 / K)


def in_domain(d: Draw) -> bool:
    """Whether `d` lies in its op's documented domain (the constants above)."""
    lo, hi = d.key_norm
    if not (KEY_NORM_RANGE[0] <= lo <= hi <= KEY_NORM_RANGE[1]) or not G_MIN <= d.g_min <= 0:
        return False
    if d.op == "ccq_query" and d.variant == "raw-keys" and hi > RAW_KEY_NORM_MAX:
        return False
    if d.op in ("vla", "vla_gate"):
        lam0_ok = LAM0_RANGE[0] <= d.lam0 <= LAM0_RANGE[1]
        u_ok = U_NORM_RANGE[0] <= d.u_norm[0] <= d.u_norm[1] <= u_norm_max(d.lam0) * (1 + 1e-12)
        return lam0_ok and u_ok and rho_min(d.K) <= d.rho <= 1
    return 0 <= d.step <= STEP_MAX and d.eps >= 0


# ---------------------------------------------------------------------------------------------------- the sampler


def _int(gen: torch.Generator, lo: int, hi: int) -> int:
    """Uniform in `[lo, hi]`."""
    return int(torch.randint(lo, hi + 1, (1,), generator=gen))


def _pick(gen: torch.Generator, options) -> Any:
    return options[_int(gen, 0, len(options) - 1)]


def _corner(gen: torch.Generator, lo: float, hi: float) -> float:
    """An end of `[lo, hi]` half the time (a quarter each), else log-uniform inside: the corners are where bugs are."""
    r, x = torch.rand(2, generator=gen, dtype=F64).tolist()
    if r < 0.25:
        return lo
    if r < 0.5:
        return hi
    return math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * x)


def _norm_range(gen: torch.Generator, lo: float, hi: float) -> tuple[float, float]:
    """Per-token norms: all one value, or a spread of up to all of `[lo, hi]`."""
    a, b = _corner(gen, lo, hi), _corner(gen, lo, hi)
    return (a, a) if _pick(gen, (True, False)) else (min(a, b), max(a, b))


# sequence lengths favoured: 1, the chunk sizes (16, 32, 64) and their neighbours
LENGTHS = (1, 2, 15, 16, 17, 31, 33, 63, 64, 65, MAX_T)


def draw(op: str, gen: torch.Generator) -> Draw:
    """A random point of `op`'s domain, its corners favoured (`_corner`)."""
    T = _pick(gen, LENGTHS) if _pick(gen, (True, False)) else _int(gen, 1, MAX_T)
    B, lengths = _int(gen, 1, 3), None
    if _int(gen, 0, 2) == 0:  # packed sequences, short ones among them
        lengths = tuple(_pick(gen, (1, 2, 3)) if _pick(gen, (True, False)) else _int(gen, 1, 40) for _ in range(4))
        lengths = lengths[: _int(gen, 1, 4)]
        B, T = 1, sum(lengths)
    K = _pick(gen, (1, 2, 3, 4, 7, 8, 16, 20, 32))
    variant = _pick(gen, VARIANTS[op])
    key_max = RAW_KEY_NORM_MAX if (op, variant) == ("ccq_query", "raw-keys") else KEY_NORM_RANGE[1]
    lam0 = _corner(gen, *LAM0_RANGE)
    return Draw(
        op,
        B=B,
        T=T,
        H=_int(gen, 1, 3),
        K=K,
        V=_pick(gen, (1, 2, 5, 8, 16)),
        lengths=lengths,
        variant=variant,
        decay=_pick(gen, (True, False)),
        key_norm=_norm_range(gen, KEY_NORM_RANGE[0], key_max),
        g_min=-_corner(gen, 1e-3, -G_MIN),
        step=_pick(gen, (0.5, 1.0, STEP_MAX)),
        eps=_pick(gen, (0.0, 1e-6, 1e-2)),
        lam0=lam0,
        u_norm=_norm_range(gen, U_NORM_RANGE[0], u_norm_max(lam0)),
        rho=_pick(gen, (1.0, 1.0, 0.999, 0.99, rho_min(K))),
        scale=_pick(gen, (None, None, 1.0, 0.01, -3.0)),
        state=_pick(gen, (True, False)),
        seed=_int(gen, 0, 2**31 - 1),
    )


# ----------------------------------------------------------------------------------------------- judging results


@dataclass
class Finding:
    """Something wrong: `kind` (`KINDS`), on `target` (an op, or `layer:<name>`), what happened (`detail`), the
    arguments (`arguments`), and Python code that reproduces it (`repro`)."""

    target: str
    kind: str
    detail: str
    arguments: str
    repro: str

    def signature(self) -> tuple[str, str]:
        """What makes two findings the same, on any target: the kind, and the detail with its numbers masked."""
        return self.kind, re.sub(r"-?\d[\d.e+-]*", "#", self.detail.splitlines()[0])[:160]


KINDS = {
    "exception": "a valid input raised",
    "unclear error": "an invalid input raised something other than a ValueError / TypeError naming an argument",
    "accepted": "an invalid input that must raise ran through",
    "non-finite": "finite input in the domain gave a non-finite output",
    "disagreement": "a backend beyond the accuracy contract",
}


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative RMS error of `a` against the reference `b`."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def conditioning(call: Call, reference: list[torch.Tensor], seed: int = 0) -> list[float]:
    """Per output, its relative change in the float64 token loop when every float input is rounded to float32 and
    then moved by one float32 unit roundoff (random signs): the error the output's own conditioning allows a
    float32 run. Tiny for well-conditioned outputs; large where one cancels to about zero (e.g. CCQ's mean of keys
    that sum to 0) or where an input is beyond float32 (a step of 1e-70 is 0 there)."""
    gen = torch.Generator().manual_seed(seed)

    def perturb(x):
        if isinstance(x, tuple):
            return tuple(perturb(t) for t in x)
        if isinstance(x, torch.Tensor) and x.dtype == F64:
            signs = torch.randint(0, 2, x.shape, generator=gen, dtype=F64) * 2 - 1
            return x.float().double() * (1 + signs * UNIT_ROUNDOFF[torch.float32])
        return x

    moved = Call(call.op, {n: perturb(x) for n, x in call.kwargs.items()}, call.layout).run(_reference_backend(call))
    return [rel_err(a, b) for a, b in zip(moved, reference)]


def _reference_backend(call: Call) -> str | None:
    return "naive" if op_backends(call.op) else None


# what the reproductions in a report import
IMPORTS = "from linattn.bench.fuzz import LAYER_MUTATIONS, Draw, LayerDraw, build, cast, mutate"


def _repro(expr: str, backend: str | None, dtype: torch.dtype | None, device: str) -> str:
    args = [repr(backend)] if backend is not None else []
    if dtype is not None:
        args.append(f"dtype={dtype}")
    if device != "cpu":
        args.append(f"device={device!r}")
    return f"import torch; {IMPORTS}; {expr}.run({', '.join(args)})"


def check_valid(
    call: Call, pairs: list[tuple[str | None, torch.dtype]], device: str = "cpu", *, expr: str = ""
) -> tuple[int, list[Finding]]:
    """Run a valid `call` on each `(backend, dtype)` of `pairs` against the float64 token loop on the CPU: outputs
    finite, each within `TOLERANCE[dtype] + SLACK · conditioning · (roundoff of dtype / float32's)`. Returns the
    number of runs and the findings; `expr` (Python for `call`) goes into their reproductions."""
    expr = expr or "call"

    def finding(kind, detail, backend, dtype):
        return Finding(call.op, kind, detail, call.describe(), _repro(expr, backend, dtype, device))

    base = _reference_backend(call)
    try:
        reference = call.run(base)
    except Exception as e:
        return 1, [finding("exception", f"{type(e).__name__}: {e}", base, None)]
    if not all(bool(torch.isfinite(r).all()) for r in reference):
        bad = [i for i, r in enumerate(reference) if not bool(torch.isfinite(r).all())]
        return 1, [finding("non-finite", f"the float64 reference: outputs {bad} not finite", base, None)]
    allowed = conditioning(call, reference)
    findings = []
    for backend, dtype in pairs:
        try:
            got = call.run(backend, dtype, device)
        except Exception as e:
            findings.append(finding("exception", f"{type(e).__name__}: {e}", backend, dtype))
            continue
        if not all(bool(torch.isfinite(x).all()) for x in got):
            bad = [i for i, x in enumerate(got) if not bool(torch.isfinite(x).all())]
            findings.append(finding("non-finite", f"{backend} {dtype}: outputs {bad} not finite", backend, dtype))
            continue
        ratio = UNIT_ROUNDOFF[dtype] / UNIT_ROUNDOFF[torch.float32]
        for i, (a, b, c) in enumerate(zip(got, reference, allowed)):
            bound = TOLERANCE[dtype] + SLACK * c * ratio
            if (err := rel_err(a, b)) > bound:
                detail = f"{backend} {dtype}: output {i} off by {err:.2e} relative (contract {bound:.1e})"
                findings.append(finding("disagreement", detail, backend, dtype))
    return len(pairs) + 1, findings


# a clear error starts with an argument's name: `q: …`, `initial_state[1]: …`, `state['S']: …`; or is Python's own
CLEAR = re.compile(r"^(?P<name>[A-Za-z_]\w*)(\[[^\]]*\])*: ")
PYTHON_ARGUMENT = re.compile(r"(got an unexpected keyword argument|missing \d+ required \w+ argument)")


def is_clear(e: BaseException, names: set[str]) -> bool:
    """A `ValueError` / `TypeError` whose message names one of `names` first (or Python's own argument error)."""
    if not isinstance(e, (ValueError, TypeError)):
        return False
    message = str(e)
    m = CLEAR.match(message)
    return (m is not None and m["name"] in names) or PYTHON_ARGUMENT.search(message) is not None


def check_invalid(run: Callable[[], object], names: set[str], must_raise: bool) -> tuple[str, str]:
    """Run an invalid input: `("clear", message)`, `("ran", "")` when it returned, or a finding's
    `(kind, detail)`: an unclear error, or `"accepted"` when it returned and `must_raise`."""
    try:
        run()
    except Exception as e:
        if is_clear(e, names):
            return "clear", str(e)
        return "unclear error", f"{type(e).__name__}: {e}"
    return ("accepted", "returned without an error") if must_raise else ("ran", "")


# ------------------------------------------------------------------------------------------ invalid op arguments


@dataclass(frozen=True)
class Mutation:
    """Makes a valid call invalid: `apply(call, device)` returns the new call, or None where it does not apply;
    `must_raise(device)` says whether a clear error is required (else a clear error or a result both pass)."""

    apply: Callable[[Call, str], Call | None]
    raises: str = "always"  # "always", "cpu" (a value check made on CPU tensors only) or "never"

    def must_raise(self, device: str) -> bool:
        return self.raises == "always" or (self.raises == "cpu" and device == "cpu")


def _tokens(call: Call) -> list[str]:
    return [n for n in TOKENS if isinstance(call.kwargs.get(n), torch.Tensor)]


def _cut(call: Call, letter: str, n: int) -> Call | None:
    """Every tensor argument cut to `n` along the dim its layout names `letter`; states and packing dropped, so
    that the cut alone is wrong. Not for `kaczmarz_beta`: per token, it maps empty dims to an empty (or zero-key)
    step."""
    if call.op == "kaczmarz_beta":
        return None
    kw = {k: x for k, x in call.kwargs.items() if k not in ("initial_state", "cu_seqlens")}
    hit = False
    for name, x in kw.items():
        dims = call.layout.get(name, "")
        if isinstance(x, torch.Tensor) and letter in dims and x.dim() == len(dims):
            kw[name] = x.narrow(dims.index(letter), 0, n)
            hit = True
    return Call(call.op, kw, call.layout) if hit else None


def _head_first(call: Call, device: str) -> Call | None:
    """The token tensors as `[B, H, T, ·]`: refused where another argument's shape reveals it (H != T and a
    `[B, T, H]` gate, a state, or packing present); else the swap is undetectable and not applied."""
    q = call.kwargs[_tokens(call)[0]]
    others = [n for n, dims in call.layout.items() if n in call.kwargs and n not in TOKENS]
    if q.shape[1] == q.shape[2] or not (others or "cu_seqlens" in call.kwargs):
        return None
    return call.with_(**{n: call.kwargs[n].transpose(1, 2) for n in _tokens(call)})


def _gate(call: Call, name: str, change: Callable[[torch.Tensor], torch.Tensor]) -> Call | None:
    x = call.kwargs.get(name)
    return None if not isinstance(x, torch.Tensor) else call.with_(**{name: change(x)})


def _at_first(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def change(x):
        x = x.clone()
        x.view(-1)[0] = value
        return x

    return change


def _cu(call: Call, change: Callable[[list[int]], object]) -> Call | None:
    cu = call.kwargs.get("cu_seqlens")
    return None if cu is None else call.with_(cu_seqlens=change(cu.tolist()))


def _state(call: Call, change: Callable[[torch.Tensor], object]) -> Call | None:
    """The initial state's first tensor changed (a pair's first part)."""
    s = call.kwargs.get("initial_state")
    if s is None:
        return None
    return call.with_(initial_state=(change(s[0]), *s[1:]) if isinstance(s, tuple) else change(s))


def _state_part(call: Call, i: int, change: Callable[[torch.Tensor], torch.Tensor]) -> Call | None:
    s = call.kwargs.get("initial_state")
    if not isinstance(s, tuple) or len(s) <= i:
        return None
    return call.with_(initial_state=tuple(change(t) if j == i else t for j, t in enumerate(s)))


def _option(call: Call, name: str, value: object) -> Call | None:
    return call.with_(**{name: value}) if name in inspect.signature(getattr(ops, call.op)).parameters else None


def cast(call: Call, dtype: torch.dtype | None = None, device: str | None = None) -> Call:
    """`call` with its floats cast to `dtype` and its tensors moved to `device` (None: as they are)."""
    return Call(call.op, {n: _to(x, dtype, device) for n, x in call.kwargs.items()}, call.layout)


def _backend(call: Call, name: str, device: str) -> Call | None:
    have = op_backends(call.op)
    if not have:
        return None
    if name in ("triton", "fused_recurrent") and (name in have and (device != "cpu" or _interpreted())):
        return None  # runs there: a valid backend
    return call.with_(backend=name)


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _token(change: Callable[[torch.Tensor], object], which: int = 0) -> Callable[[Call, str], Call | None]:
    """A mutation changing the op's first (or second) token tensor."""

    def apply(call: Call, device: str) -> Call | None:
        names = _tokens(call)
        return None if len(names) <= which else call.with_(**{names[which]: change(call.kwargs[names[which]])})

    return apply


def _named(name: str, change: Callable[[torch.Tensor], object]) -> Callable[[Call, str], Call | None]:
    """A mutation changing the tensor argument `name` where the call has it."""
    return lambda call, device: _gate(call, name, change)


def _value(name: str, value: object) -> Callable[[Call, str], Call | None]:
    """A mutation setting the option `name` where the op takes it."""
    return lambda call, device: _option(call, name, value)


def _first_gate(call: Call, device: str) -> Call | None:
    """The first `[B, T, H]` argument without its head dim."""
    names = [n for n, dims in call.layout.items() if dims == "BTH" and n in call.kwargs]
    return _gate(call, names[0], lambda x: x[..., 0]) if names else None


def _cu_batch(call: Call, device: str) -> Call | None:
    """Packing offsets beside `B > 1`."""
    q = call.kwargs[_tokens(call)[0]]
    if "cu_seqlens" not in parameters(call.op) or q.shape[0] == 1:
        return None
    return call.with_(cu_seqlens=torch.tensor([0, q.shape[1]]))


def _state_container(call: Call, device: str) -> Call | None:
    """A pair or triple state as a list; a single state tensor inside a tuple."""
    s = call.kwargs.get("initial_state")
    if s is None:
        return None
    return call.with_(initial_state=list(s) if isinstance(s, tuple) else (s,))


def _spd_broken(call: Call, device: str) -> Call | None:
    """VLA's initial `A` replaced by `−I`, not positive definite."""
    minus_eye = lambda A: -torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A).clone()  # noqa: E731
    if call.op == "vla_gate":
        return _state(call, minus_eye)
    return _state_part(call, 1, minus_eye) if call.op == "vla" else None


def _eps(value: float) -> Callable[[Call, str], Call | None]:
    """The Kaczmarz stabiliser (`delta_rule`'s `kaczmarz_eps`, `kaczmarz_beta`'s `eps`) set to `value`."""
    return lambda call, device: _option(call, "kaczmarz_eps", value) or _option(call, "eps", value)


def _in(op: str, apply: Callable[[Call, str], Call | None]) -> Callable[[Call, str], Call | None]:
    """`apply` for calls of `op` only."""
    return lambda call, device: apply(call, device) if call.op == op else None


def _other_device(call: Call, device: str) -> Call | None:
    """The second token tensor on another device: the CPU beside CUDA, the meta device beside the CPU."""
    return _token(lambda x: x.to("cpu" if device == "cuda" else "meta"), 1)(call, device)


MUTATIONS: dict[str, Mutation] = {
    "rank": Mutation(_token(lambda x: x[0])),
    "head-first": Mutation(_head_first),
    "int-dtype": Mutation(_token(lambda x: x.round().long())),
    "mixed-dtype": Mutation(_token(lambda x: x.double(), 1)),
    "float16": Mutation(lambda call, device: cast(call, torch.float16), raises="never"),
    "bfloat16": Mutation(lambda call, device: cast(call, torch.bfloat16), raises="never"),
    "other-device": Mutation(_other_device),
    "meta": Mutation(lambda call, device: cast(call, device="meta"), raises="never"),
    "list-input": Mutation(_token(lambda x: x.tolist())),
    "T=0": Mutation(lambda call, device: _cut(call, "T", 0)),
    "H=0": Mutation(lambda call, device: _cut(call, "H", 0)),
    "K=0": Mutation(lambda call, device: _cut(call, "K", 0)),
    "V=0": Mutation(lambda call, device: _cut(call, "V", 0)),
    "nan-input": Mutation(_token(_at_first(math.nan)), raises="never"),
    "inf-input": Mutation(_token(_at_first(math.inf)), raises="never"),
    "gate-shape": Mutation(_first_gate),
    "g-positive": Mutation(_named("g", _at_first(0.5)), raises="cpu"),
    "g-nan": Mutation(_named("g", _at_first(math.nan)), raises="cpu"),
    "g-inf": Mutation(_named("g", _at_first(-math.inf)), raises="cpu"),
    "w-shape": Mutation(_named("w", lambda x: x[..., :-1] if x.shape[-1] > 1 else x[..., :0])),
    "scale-nan": Mutation(_value("scale", math.nan)),
    "scale-inf": Mutation(_value("scale", math.inf)),
    "scale-str": Mutation(_value("scale", "0.5")),
    "cu-start": Mutation(lambda call, device: _cu(call, lambda c: torch.tensor([1, *c[1:]]))),
    "cu-end": Mutation(lambda call, device: _cu(call, lambda c: torch.tensor([*c[:-1], c[-1] + 1]))),
    "cu-repeat": Mutation(lambda call, device: _cu(call, lambda c: torch.tensor([*c, c[-1]]))),
    "cu-float": Mutation(lambda call, device: _cu(call, lambda c: torch.tensor(c, dtype=torch.float32))),
    "cu-2d": Mutation(lambda call, device: _cu(call, lambda c: torch.tensor(c)[None])),
    "cu-list": Mutation(lambda call, device: _cu(call, lambda c: c)),
    "cu-batch": Mutation(_cu_batch),
    "state-batch": Mutation(lambda call, device: _state(call, lambda s: torch.cat([s, s[:1]]))),
    "state-int": Mutation(lambda call, device: _state(call, lambda s: s.long())),
    "state-container": Mutation(_state_container),
    "backend-bogus": Mutation(lambda call, device: _backend(call, "bogus", device)),
    "backend-triton": Mutation(lambda call, device: _backend(call, "triton", device)),
    "backend-fused": Mutation(lambda call, device: _backend(call, "fused_recurrent", device)),
    "lam0=0": Mutation(_value("lam0", 0.0)),
    "lam0=-1": Mutation(_value("lam0", -1.0)),
    "lam0=inf": Mutation(_value("lam0", math.inf)),
    "lam0=nan": Mutation(_value("lam0", math.nan)),
    "lam0=True": Mutation(_value("lam0", True)),
    "rho=0": Mutation(_value("rho", 0.0)),
    "rho=1.5": Mutation(_value("rho", 1.5)),
    "rho=nan": Mutation(_value("rho", math.nan)),
    "A0-not-spd": Mutation(_spd_broken, raises="cpu"),
    "Z0-negative": Mutation(_in("ccq_query", lambda call, device: _state_part(call, 2, lambda Z: -1 - Z)), "cpu"),
    "eps=-1": Mutation(_eps(-1.0)),
    "eps=nan": Mutation(_eps(math.nan)),
    "normalize-state": Mutation(
        _in("linear_attention", lambda call, device: _state_part(call, 1, lambda z: z[..., None]))
    ),
}


def parameters(op: str) -> set[str]:
    """The names of `op`'s arguments: those a clear error may name."""
    return set(inspect.signature(getattr(ops, op)).parameters)


def mutate(call: Call, name: str, device: str = "cpu") -> Call | None:
    """`MUTATIONS[name]` of `call` (None where it does not apply)."""
    return MUTATIONS[name].apply(call, device)


# ---------------------------------------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class LayerDraw:
    """One layer and its input: `build_layer(name, d_model, n_heads, **options)` with weights from `seed`, and
    `x: [B, T, d_model]` (packed `lengths` in `B == 1`), float32."""

    name: str
    d_model: int = 8
    n_heads: int = 2
    options: tuple[tuple[str, Any], ...] = ()
    B: int = 1
    T: int = 8
    lengths: tuple[int, ...] | None = None
    seed: int = 0

    def layer(self):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            return build_layer(self.name, self.d_model, self.n_heads, **dict(self.options))

    def x(self, T: int | None = None) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed + 1)
        return torch.randn(self.B, self.T if T is None else T, self.d_model, generator=gen)

    def cu_seqlens(self) -> torch.Tensor | None:
        return None if self.lengths is None else torch.tensor([0, *itertools.accumulate(self.lengths)])


# options a layer's valid draws take (those its class accepts), with the values to pick from
LAYER_OPTIONS = {
    "short_conv": (True, False),
    "conv_size": (2, 4),
    "ccq": (True, False),
    "output_gate": (True, False),
    "normalize": (True, False),
    "normalizer": ("sum", "none"),
    "lam0": (0.01, 0.1, 1.0),
    "rho": (1.0, 0.99),
}


def layer_names() -> list[str]:
    """Every layer `build_layer` knows (`LAYERS`)."""
    return sorted(LAYERS)


def draw_layer(name: str, gen: torch.Generator) -> LayerDraw:
    """A random layer of kind `name` (the `LAYER_OPTIONS` its class takes) and input, packed a third of the time."""
    cls, fixed = LAYERS[name]
    accepted = set(inspect.signature(cls).parameters) - set(fixed)
    options = tuple(
        (option, _pick(gen, values))
        for option, values in LAYER_OPTIONS.items()
        if option in accepted and (option != "ccq" or name in CCQ_LAYERS)
    )
    n_heads = _pick(gen, (1, 2, 4))
    lengths = None
    B, T = _int(gen, 1, 3), _pick(gen, (1, 2, 5, 17, 33))
    if _int(gen, 0, 2) == 0:
        lengths = tuple(_int(gen, 1, 12) for _ in range(_int(gen, 1, 3)))
        B, T = 1, sum(lengths)
    return LayerDraw(name, n_heads * _pick(gen, (2, 4, 8)), n_heads, options, B, T, lengths, _int(gen, 0, 2**31 - 1))


def check_layer(ld: LayerDraw, device: str = "cpu", *, expr: str = "") -> tuple[int, list[Finding]]:
    """A layer on valid input: its forward (default backend) finite; the same within `TOLERANCE[float32]` of
    `backend="naive"`, of the packed sequences run one at a time, and of a forward over one more token when that
    token is a `step` from the returned state. Returns the number of runs and the findings."""
    expr = expr or repr(ld)
    target = f"layer:{ld.name}"
    findings: list[Finding] = []
    runs = 0

    def finding(kind, detail, what):
        args = f"x={summary(ld.x())}" + (f", cu_seqlens={ld.lengths}" if ld.lengths else "")
        code = f"{IMPORTS}; ld = {expr}; {what}"
        findings.append(Finding(target, kind, detail, args, code))

    def compare(label, a, b, what):
        if not bool(torch.isfinite(a).all()):
            finding("non-finite", f"{label}: not finite", what)
        elif (err := rel_err(a, b)) > TOLERANCE[torch.float32]:
            finding("disagreement", f"{label}: off by {err:.2e} relative", what)

    forward = "ld.layer()(ld.x(), cu_seqlens=ld.cu_seqlens())"
    try:
        layer = ld.layer().to(device)
        x, cu = ld.x().to(device), ld.cu_seqlens()
        with torch.no_grad():
            runs += 1
            y, _ = layer(x, cu_seqlens=cu)
            if not bool(torch.isfinite(y).all()):
                finding("non-finite", "forward: not finite", forward)
                return runs, findings
            runs += 1
            y_naive, _ = layer(x, cu_seqlens=cu, backend="naive")
            compare("forward with backend='naive' against the default", y_naive, y, forward)
            if cu is not None:
                runs += 1
                parts = [layer(x[:, a:b])[0] for a, b in itertools.pairwise(cu.tolist())]
                compare("packed against one sequence at a time", y, torch.cat(parts, 1), forward)
            else:
                runs += 2
                x_more = ld.x(ld.T + 1).to(device)
                y_t, _ = layer.step(x_more[:, -1], layer(x_more[:, :-1])[1])
                step = "m = ld.layer(); x = ld.x(ld.T + 1); m.step(x[:, -1], m(x[:, :-1])[1])[0], m(x)[0][:, -1]"
                compare("step against a forward one token longer", y_t, layer(x_more)[0][:, -1], step)
    except Exception as e:
        finding("exception", f"{type(e).__name__}: {e}", forward)
    return runs, findings


def _layer_names_allowed(ld: LayerDraw) -> set[str]:
    cls = LAYERS[ld.name][0] if ld.name in LAYERS else object
    names = {"x", "x_t", "state", "cu_seqlens", "backend", *LAYER_OPTIONS}
    return names | set(inspect.signature(build_layer).parameters) | set(inspect.signature(cls).parameters)


def _other_state(ld: LayerDraw):
    """A state of another layer kind, for this layer's batch."""
    other = "linear" if ld.name != "linear" else "deltanet"
    return replace(ld, name=other, options=()).layer().init_state(ld.B)


def _x(ld: LayerDraw, layer) -> torch.Tensor:
    """The draw's input on the layer's device."""
    return ld.x().to(next(layer.parameters()).device)


# each: `fn(layer draw, layer) -> a thunk running the invalid call, or None`, and whether it must raise
LAYER_MUTATIONS: dict[str, tuple[Callable, bool]] = {
    "x-rank": (lambda ld, m: lambda: m(_x(ld, m)[0]), True),
    "x-width": (lambda ld, m: lambda: m(_x(ld, m)[..., :-1]), True),
    "T=0": (lambda ld, m: lambda: m(_x(ld, m)[:, :0]), True),
    "x-int": (lambda ld, m: lambda: m(_x(ld, m).round().long()), True),
    "x-float64": (lambda ld, m: lambda: m(_x(ld, m).double()), False),
    "x-meta": (lambda ld, m: lambda: m(_x(ld, m).to("meta")), False),
    "x-nan": (lambda ld, m: lambda: m(_x(ld, m).fill_(math.nan)), False),
    "state-batch": (lambda ld, m: None if ld.lengths else lambda: m(_x(ld, m), m.init_state(ld.B + 1)), True),
    "state-other-layer": (lambda ld, m: None if ld.lengths else lambda: m(_x(ld, m), _other_state(ld)), True),
    "state-not-dict": (lambda ld, m: lambda: m(_x(ld, m), torch.zeros(ld.B)), True),
    "cu-batch": (lambda ld, m: None if ld.B == 1 else lambda: m(_x(ld, m), cu_seqlens=torch.tensor([0, ld.T])), True),
    "cu-end": (lambda ld, m: lambda: m(_x(ld, m)[:1], cu_seqlens=torch.tensor([0, ld.T + 1])), True),
    "cu-float": (lambda ld, m: lambda: m(_x(ld, m)[:1], cu_seqlens=torch.tensor([0.0, ld.T])), True),
    "backend-bogus": (lambda ld, m: lambda: m(_x(ld, m), backend="bogus"), True),
    "step-rank": (lambda ld, m: lambda: m.step(_x(ld, m), m.init_state(ld.B)), True),
    "step-state-batch": (lambda ld, m: lambda: m.step(_x(ld, m)[:, 0], m.init_state(ld.B + 1)), True),
    "build-name": (lambda ld, m: lambda: replace(ld, name="bogus").layer(), True),
    "build-backend": (lambda ld, m: lambda: replace(ld, options=(*ld.options, ("backend", "bogus"))).layer(), True),
    "build-heads": (lambda ld, m: lambda: replace(ld, n_heads=ld.d_model + 1).layer(), True),
    "build-d_model": (lambda ld, m: lambda: replace(ld, d_model=0).layer(), True),
    "build-option": (lambda ld, m: lambda: replace(ld, options=(*ld.options, ("bogus", 1))).layer(), True),
    "build-ccq": (
        lambda ld, m: None if "ccq" in dict(ld.options) else lambda: replace(ld, options=(("ccq", True),)).layer(),
        True,
    ),
    "build-lam0": (lambda ld, m: None if ld.name != "vla" else lambda: _with_option(ld, "lam0", 0.0).layer(), True),
    "build-rho": (lambda ld, m: None if ld.name != "vla" else lambda: _with_option(ld, "rho", 1.5).layer(), True),
}


def _with_option(ld: LayerDraw, name: str, value) -> LayerDraw:
    return replace(ld, options=(*((k, v) for k, v in ld.options if k != name), (name, value)))


# ----------------------------------------------------------------------------------------------------- the fuzzer


@dataclass
class Counts:
    valid: int = 0
    invalid: int = 0
    clear: int = 0
    findings: int = 0


@dataclass
class Report:
    seed: int
    device: str
    seconds: float
    cases: int = 0
    counts: dict[str, Counts] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "seed": self.seed,
            "device": self.device,
            "seconds": self.seconds,
            "cases": self.cases,
            "counts": {t: asdict(c) for t, c in self.counts.items()},
            "findings": [asdict(f) for f in self.findings],
        }

    def markdown(self) -> str:
        """A table of counts per target, then each distinct finding (with how often it came) and its repro."""
        lines = [
            f"# linattn fuzz: seed {self.seed}, device {self.device}, {self.seconds:g} s, {self.cases} cases",
            "",
            "| target | valid runs | invalid runs | clear errors | findings |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| `{t}` | {c.valid} | {c.invalid} | {c.clear} | {c.findings} |" for t, c in sorted(self.counts.items())
        ]
        groups: dict[tuple, list[Finding]] = {}
        for f in self.findings:
            groups.setdefault(f.signature(), []).append(f)
        lines += ["", f"## Findings: {len(self.findings)} ({len(groups)} distinct)"]
        for i, found in enumerate(groups.values(), 1):
            f = found[0]
            targets = ", ".join(f"`{t}`" for t in sorted({g.target for g in found}))
            lines += [
                "",
                f"### {i}. {f.kind} ({len(found)}×): {targets}",
                f"- what: {f.detail.splitlines()[0][:400]}",
                f"- arguments: {f.arguments[:600]}",
                f"- reproduce: `{f.repro}`",
            ]
        return "\n".join(lines)


def op_names() -> list[str]:
    """Every public op (`linattn.ops.__all__`)."""
    return sorted(ops.__all__)


def _fuzz_op(op: str, gen: torch.Generator, device: str, counts: Counts, findings: list[Finding]) -> None:
    d = draw(op, gen)
    call = build(d)
    runs, found = check_valid(call, backends_on(op, device), device, expr=f"build({d!r})")
    counts.valid += runs
    names = parameters(op)
    applicable = []
    low = cast(call, torch.float32, device)
    for name in MUTATIONS:
        bad = mutate(low, name, device)
        if bad is not None:
            applicable.append((name, bad))
    name, bad = _pick(gen, applicable)
    backend = _pick(gen, ("naive", "chunk")) if op_backends(op) and "backend" not in bad.kwargs else None
    counts.invalid += 1
    outcome, detail = check_invalid(lambda: bad.run(backend), names, MUTATIONS[name].must_raise(device))
    counts.clear += outcome == "clear"
    if outcome not in ("clear", "ran"):
        expr = f"mutate(cast(build({d!r}), torch.float32, {device!r}), {name!r}, {device!r})"
        found.append(Finding(op, outcome, f"{name}: {detail}", bad.describe(), _repro(expr, backend, None, "cpu")))
    counts.findings += len(found)
    findings += found


def _fuzz_layer(name: str, gen: torch.Generator, device: str, counts: Counts, findings: list[Finding]) -> None:
    ld = draw_layer(name, gen)
    runs, found = check_layer(ld, device)
    counts.valid += runs
    try:
        layer = ld.layer().to(device)
    except Exception:
        layer = None
    applicable = [(n, thunk) for n, (make, _) in LAYER_MUTATIONS.items() if (thunk := make(ld, layer)) is not None]
    if layer is not None and applicable:
        which, thunk = _pick(gen, applicable)
        counts.invalid += 1
        outcome, detail = check_invalid(thunk, _layer_names_allowed(ld), LAYER_MUTATIONS[which][1])
        counts.clear += outcome == "clear"
        if outcome not in ("clear", "ran"):
            code = f"{IMPORTS}; ld = {ld!r}; LAYER_MUTATIONS[{which!r}][0](ld, ld.layer())()"
            found.append(Finding(f"layer:{name}", outcome, f"{which}: {detail}", f"x={summary(ld.x())}", code))
    counts.findings += len(found)
    findings += found


def fuzz(
    seconds: float, device: str = "cpu", seed: int = 0, targets: list[str] | None = None, cases: int | None = None
) -> Report:
    """Fuzz for `seconds` (or `cases` cases, if fewer): case `i` takes target `i mod len(targets)` (every op in
    `linattn.ops.__all__`, then `layer:<name>` for each of `LAYERS`) and draws everything from a generator seeded by
    `(seed, i)`: one valid call checked on every backend of `device` (`backends_on`), one invalid one (a random
    applicable mutation)."""
    targets = targets or [*op_names(), *(f"layer:{n}" for n in layer_names())]
    report = Report(seed, device, seconds, counts={t: Counts() for t in targets})
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline and (cases is None or i < cases):
        target = targets[i % len(targets)]
        gen = torch.Generator().manual_seed(seed * 1_000_003 + i)
        if target.startswith("layer:"):
            _fuzz_layer(target.removeprefix("layer:"), gen, device, report.counts[target], report.findings)
        else:
            _fuzz_op(target, gen, device, report.counts[target], report.findings)
        i += 1
    report.cases = i
    return report
