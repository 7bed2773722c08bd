"""Correctness matrix of a backend against float64, on the machine it runs on (docs/design.md §4).

Run on the GPU: `python -m linattn.bench verify [--backend triton] [--json FILE]`. For every dtype, length,
head size and option in the matrix it runs the op forward and backward in the backend under test and in the
`naive` recurrence *in the same dtype*, and compares both with a float64 reference (the `chunk` backend in
float64, which equals the naive recurrence to ~1e-15, tested on CPU). A case passes when the backend's error is
at most twice the naive recurrence's own error in that dtype (with a floor at float32 rounding, 1e-6). NaN
never passes.

The matrix: dtypes float32 / bfloat16 / float16; `T ∈ {1, 63, 64, 65, 1000, 4096}`;
`K, V ∈ {32, 64, 96, 128, 256}`; with and without β, g, a second key `w`, an initial state; packed
variable-length batches; bfloat16 cases without the final state, where `o` is the forward's only output and its
state products run in one tf32 pass (`ops/utils/precision.py`); and `cut` cases, where the Triton backward
cuts the sequence in two (`delta_rule/triton/backward.py`: from 16K tokens, here from 64). The same kernels without
the erase term run linear attention and scalar-decay GLA: those are in the matrix too. The naive recurrence is slow
at T = 4096, so the largest cases run with one head; the others run two, but sixteen at T = 1, where `dβ` and `dg`
have one entry a head. With two, their error would be that of two numbers, and the naive recurrence's own varies
30-fold over seeds (float32, 0.5e-7 – 1.7e-6), which would make twice it a coin toss for either backend.
The ops built on the engine follow, at T ∈ {63, 65, 1000} and packed: `vla` (its gate, then the two-key
rule, with both states, and in bfloat16 at T = 1000 without them, where its `o` takes the one-tf32-pass state
products), `ccq_query` (centred, decayed, with its state, and in bfloat16 at T = 1000 with no state, its training
call: one tf32 pass forward and backward) and KLA (the Kaczmarz step on raw keys, `delta_rule(..., beta=η,
kaczmarz_eps=1e-6)`: formed inside each backend, so the Triton kernels' own step and its gradients in `η` and `k`
are what is checked), and normalised linear attention (`linear_attention(..., normalize=True)`, on values that share
a mean of four standard deviations, with its states and in bfloat16 without them, also as an inference call).

`--backend fla` holds flash-linear-attention 0.6 to the same rule, on the matrix's GDN cases (`w = k`, with β):
`chunk_gated_delta_rule` on the gated ones, forward only (`o` and the final state; its gated backward refuses to run
on Hopper with Triton < 3.7.1), and `chunk_delta_rule` (DeltaNet), forward and backward, on the same cases without
the decay (`fla_matrix`). These are the kernels `bench ops` sets beside ours. fla is a benchmark-only dependency; this
is how its numerics compare with the bound our kernels are held to.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from unittest import mock

import torch
import torch.nn.functional as F

from linattn.ops import ccq_query, delta_rule, gated_linear_attention, linear_attention, vla
from linattn.ops.checks import check_precision

FLOOR = 1e-6


@dataclass(frozen=True)
class Case:
    T: int
    K: int
    V: int
    dtype: torch.dtype
    two_key: bool = False
    gated: bool = True
    initial_state: bool = True
    varlen: tuple[int, ...] | None = None  # sequence lengths packed in one row
    H: int = 2
    erase: bool = True  # False: the same kernels without the erase term (linear attention, or GLA when gated)
    # or "vla", "ccq", "kla", "gla" (a per-channel decay: GLA's own kernels), "normalized" (normalised linear attention)
    op: str = "delta_rule"
    final_state: bool = True  # False: o is the only output (its products may then run in one tf32 pass)
    cut: bool = False  # the backward cuts the sequence in two (as it does from SPLIT_BYTES on), here from 65 tokens
    forward_only: bool = False  # no input requires a gradient: the forward an op runs for inference

    @property
    def label(self) -> str:
        op = self.op if self.op != "delta_rule" else None if self.erase else "gla" if self.gated else "linear"
        parts = [str(self.dtype).removeprefix("torch."), f"T={self.T}", f"K={self.K}", f"V={self.V}"] + [op] * bool(op)
        parts += ["w≠k"] * self.two_key + ["no-g"] * (not self.gated) + ["no-h0"] * (not self.initial_state)
        parts += ["no-ht"] * (not self.final_state) + ["cut"] * self.cut + ["fwd"] * self.forward_only
        if self.varlen:
            parts.append("varlen" + "/".join(map(str, self.varlen)))
        return " ".join(parts)


def matrix() -> list[Case]:
    cases = []
    for dtype, T in itertools.product((torch.float32, torch.bfloat16, torch.float16), (1, 63, 64, 65, 1000, 4096)):
        # at T = 1 the gradients of β and g have one entry a head: sixteen heads, so that their errors are norms of
        # sixteen entries, not two (module docstring)
        H = 16 if T == 1 else 1 if T >= 1000 else 2
        for K, V in ((32, 32), (64, 64), (96, 96), (128, 128), (256, 256), (128, 64), (64, 96)):
            if T == 4096 and K not in (64, 128):
                continue
            cases.append(Case(T, K, V, dtype, H=H))
        cases.append(Case(T, 128, 128, dtype, two_key=True, H=H))
        cases.append(Case(T, 64, 64, dtype, gated=False, initial_state=False, H=H))
        cases.append(Case(T, 128, 128, dtype, erase=False, H=H))
        cases.append(Case(T, 64, 96, dtype, erase=False, gated=False, H=H))
        cases.append(Case(T, 1, 33, dtype, erase=False, H=H))  # a one-wide key, K + 1 values
    # a bfloat16 o as the only output: the forward's state products take one tf32 pass (precision.py)
    for T in (65, 1000, 4096):
        H = 1 if T >= 1000 else 2
        for K, V in ((64, 64), (128, 128), (64, 96)) if T < 4096 else ((128, 128),):
            cases.append(Case(T, K, V, torch.bfloat16, H=H, final_state=False))
        cases.append(Case(T, 128, 128, torch.bfloat16, two_key=True, H=H, final_state=False))
        cases.append(Case(T, 128, 128, torch.bfloat16, erase=False, H=H, final_state=False))
    cases.append(Case(0, 128, 128, torch.bfloat16, varlen=(1, 63, 64, 65, 300), two_key=True, final_state=False))
    # the backward of one long sequence in two spans (delta_rule/triton/backward.py), at lengths naive can run
    for dtype, T in itertools.product((torch.float32, torch.bfloat16), (1000, 4096)):
        cases.append(Case(T, 128, 128, dtype, H=1, cut=True))
        cases.append(Case(T, 128, 128, dtype, two_key=True, H=1, final_state=False, cut=True))
    for dtype in (torch.float32, torch.bfloat16):
        cases.append(Case(0, 128, 128, dtype, varlen=(1, 63, 64, 65, 300), two_key=True))
        cases.append(Case(0, 64, 64, dtype, varlen=(1, 63, 64, 65, 300), erase=False))
    for dtype, T in itertools.product((torch.float32, torch.bfloat16, torch.float16), (63, 65, 1000)):
        H = 1 if T >= 1000 else 2
        for K in (32, 128):
            cases.append(Case(T, K, K, dtype, op="vla", H=H))
            cases.append(Case(T, K, K, dtype, op="ccq", H=H))
        cases.append(Case(T, 128, 128, dtype, op="kla", H=H))
    for K in (32, 128):  # VLA training: a bfloat16 o alone, its state pass in one tf32 pass (with an initial state
        # its backward keeps three; without, one pass in B1 and B3: precision.backward_precision)
        cases.append(Case(1000, K, K, torch.bfloat16, op="vla", H=1, final_state=False))
        cases.append(Case(1000, K, K, torch.bfloat16, op="vla", H=1, initial_state=False, final_state=False))
        # CCQ training: a bfloat16 q' alone, no initial state: one tf32 pass forward and backward
        cases.append(Case(1000, K, K, torch.bfloat16, op="ccq", H=1, initial_state=False, final_state=False))
    for dtype, T in itertools.product((torch.float32, torch.bfloat16, torch.float16), (1, 63, 65, 1000, 4096)):
        H = 16 if T == 1 else 1 if T >= 1000 else 2
        for K, V in ((64, 64), (128, 128)) if T != 65 else ((64, 64), (128, 128), (96, 40), (256, 32)):
            cases.append(Case(T, K, V, dtype, op="gla", H=H))
    for op in ("vla", "ccq", "gla"):
        cases.append(Case(0, 64, 64, torch.bfloat16, varlen=(1, 63, 64, 65, 300), op=op))
    cases.append(Case(1000, 128, 128, torch.bfloat16, op="gla", H=1, initial_state=False, final_state=False))
    # normalised linear attention on values that share a mean (where dq's two shares cancel: linear_attention's
    # README), with its states and in bfloat16 without them, its training call
    for dtype, T in itertools.product((torch.float32, torch.bfloat16), (65, 1000)):
        cases.append(Case(T, 128, 128, dtype, op="normalized", H=1 if T >= 1000 else 2))
    for K in (32, 128):
        cases.append(Case(1000, K, K, torch.bfloat16, op="normalized", H=1, initial_state=False, final_state=False))
    cases.append(Case(0, 64, 64, torch.bfloat16, varlen=(1, 63, 64, 65, 300), op="normalized", initial_state=False,
                      final_state=False))  # fmt: skip
    # ... and its inference call, whose bfloat16 products take one pass
    for K, h0 in ((32, False), (128, False), (128, True)):
        cases.append(Case(1000, K, K, torch.bfloat16, op="normalized", H=1, initial_state=h0, final_state=False,
                          forward_only=True))  # fmt: skip
    return cases


def _inputs(case: Case, device, gen):
    lengths = case.varlen or (case.T,)
    B, T = (1, sum(lengths)) if case.varlen else (1, case.T)
    N = len(lengths)
    shape = (B, T, case.H)

    def r(*s):
        return torch.randn(*s, generator=gen, device=device)

    if case.op != "delta_rule":
        x = _op_inputs(case, shape, N, r, gen, device)
        return {n: t for n, t in x.items() if case.initial_state or not n.startswith("state_")}, _cu(case, device)
    x = {
        "q": r(*shape, case.K),
        "k": F.normalize(r(*shape, case.K), dim=-1),
        "v": r(*shape, case.V),
    }
    if case.erase:
        x["beta"] = torch.rand(*shape, generator=gen, device=device)
    if case.two_key:
        x["w"] = F.normalize(r(*shape, case.K), dim=-1)
    if case.gated:
        x["g"] = -0.1 * torch.rand(*shape, generator=gen, device=device)
    if case.initial_state:
        x["initial_state"] = r(N, case.H, case.K, case.V)
    return x, _cu(case, device)


def _cu(case: Case, device) -> torch.Tensor | None:
    return torch.tensor([0, *itertools.accumulate(case.varlen)], device=device) if case.varlen else None


def _op_inputs(case: Case, shape: tuple[int, ...], N: int, r, gen, device) -> dict:
    """Inputs of the ops beside the delta rule: VLA (positive q, k; unit u over √K; states S and an SPD A), CCQ (λ, a
    decay, its state C, m, Z), KLA (raw keys, η, a decay), GLA (a per-channel decay). Keys `state_*` are the initial
    state's parts, in order."""
    K, H = case.K, case.H

    def uniform(*s):
        return torch.rand(*s, generator=gen, device=device)

    if case.op == "vla":
        X = r(N, H, K, K)
        return {
            "q": F.elu(r(*shape, K)) + 1, "k": F.elu(r(*shape, K)) + 1, "v": r(*shape, K),
            "u": F.normalize(r(*shape, K), dim=-1) / K**0.5,
            "state_S": r(N, H, K, K), "state_A": X @ X.mT / K + torch.eye(K, device=device),
        }  # fmt: skip
    if case.op == "ccq":
        X = r(N, H, K, K)
        return {
            "q": r(*shape, K), "k": r(*shape, K), "lam": uniform(*shape), "g": -0.1 * uniform(*shape),
            "state_C": X @ X.mT, "state_m": r(N, H, K), "state_Z": 3 * uniform(N, H) + 1,
        }  # fmt: skip
    if case.op == "normalized":  # positive features; values with a mean of 4 standard deviations
        return {
            "q": F.elu(r(*shape, K)) + 1, "k": F.elu(r(*shape, K)) + 1, "v": r(*shape, case.V) + 4,
            "state_S": r(N, H, K, case.V), "state_z": F.elu(r(N, H, K)) + 1,
        }  # fmt: skip
    if case.op == "gla":
        return {
            "q": r(*shape, K), "k": r(*shape, K), "v": r(*shape, case.V), "g": -0.1 * uniform(*shape, K),
            "state_S": r(N, H, K, case.V),
        }  # fmt: skip
    return {
        "q": r(*shape, K), "k": r(*shape, K), "v": r(*shape, K), "eta": uniform(*shape),
        "g": -0.1 * uniform(*shape), "state_S": r(N, H, K, K),
    }  # fmt: skip


def _call_op(op: str, a: dict, common: dict) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """`(output, final state parts)` of `vla`, `ccq_query`, GLA, normalised linear attention or KLA on prepared
    leaves `a`."""
    state = tuple(a[n] for n in a if n.startswith("state_")) or None
    if op == "vla":
        o, S = vla(a["q"], a["k"], a["v"], a["u"], initial_state=state, **common)
    elif op == "ccq":
        o, S = ccq_query(a["q"], a["k"], a["lam"], g=a["g"], initial_state=state, **common)
    elif op == "gla":
        S0 = None if state is None else state[0]
        o, S = gated_linear_attention(a["q"], a["k"], a["v"], a["g"], initial_state=S0, **common)
    elif op == "normalized":
        o, S = linear_attention(a["q"], a["k"], a["v"], normalize=True, initial_state=state, **common)
    else:
        S0 = None if state is None else state[0]
        kla = {"beta": a["eta"], "g": a["g"], "kaczmarz_eps": 1e-6, "initial_state": S0}
        o, S = delta_rule(a["q"], a["k"], a["v"], **kla, **common)
    if S is None:  # no final state asked
        return o, ()
    return o, (S,) if isinstance(S, torch.Tensor) else tuple(S)


TOKENS = ("q", "k", "v", "w", "u")  # cast to the case's dtype; gates and states stay float32
# symmetric state inputs (VLA's A, CCQ's C): only the symmetric part of their gradient is defined (an op may read
# one triangle, as a Cholesky does, or both), so that part is compared
SYMMETRIC = ("state_A", "state_C")


def _fla(a: dict, cu) -> tuple[torch.Tensor, torch.Tensor]:
    """fla's chunked delta rule on the leaves of a GDN case (`chunk_gated_delta_rule`) or of one without the decay
    (`chunk_delta_rule`, DeltaNet): `(o, final state)`."""
    common = {
        "scale": a["q"].shape[-1] ** -0.5, "initial_state": a.get("initial_state"), "output_final_state": True,
        "cu_seqlens": cu,
    }  # fmt: skip
    if "g" in a:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        return chunk_gated_delta_rule(a["q"], a["k"], a["v"], a["g"], a["beta"], **common)
    from fla.ops.delta_rule import chunk_delta_rule

    return chunk_delta_rule(a["q"], a["k"], a["v"], a["beta"], **common)


def _run(
    case: Case,
    x: dict,
    cu,
    backend: str,
    dtype: torch.dtype,
    cotangents: list | None,
    seed: int = 1,
    precision: str = "exact",
):
    """Forward + backward with token inputs cast to `dtype`: the delta rule, without `erase` linear attention (GLA
    when `x` has a decay `g`), or `case.op`. `cotangents` None: drawn here (from `seed`), for the outputs' shapes.
    Backend `fla`: fla's kernels (`_fla`), a gated case forward only. `precision`: the ops' keyword (`"fast"`: the
    ops of `FAST_OPS` and erase-off cases only). Returns `(outputs and gradients by name, the cotangents used)`;
    `case.forward_only`: the outputs alone, of inputs that require no gradient."""
    leaves = {
        n: (t.to(dtype) if n in TOKENS else t).detach().requires_grad_(not case.forward_only) for n, t in x.items()
    }
    common = {"output_final_state": case.final_state, "cu_seqlens": cu, "backend": backend}
    if precision != "exact":
        common["precision"] = precision
    if case.cut and backend == "triton":
        from linattn.ops.delta_rule.triton import backward

        with mock.patch.object(backward, "SPLIT_BYTES", 1):
            return _run(replace(case, cut=False), x, cu, backend, dtype, cotangents, seed, precision)
    if backend == "fla" and case.gated:
        with torch.no_grad():
            o, S = _fla(leaves, cu)
        return {"o": o, "S": S} if case.final_state else {"o": o}, cotangents
    if backend == "fla":
        o, S = _fla(leaves, cu)
        states = (S,) if case.final_state else ()
    elif case.op != "delta_rule":
        o, states = _call_op(case.op, leaves, common)
    else:
        args = dict(leaves)
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        if case.erase:
            o, S = delta_rule(q, k, v, **args, **common)
        elif "g" in args:
            o, S = gated_linear_attention(q, k, v, args.pop("g"), **args, **common)
        else:
            o, S = linear_attention(q, k, v, **args, **common)
        states = (S,) if case.final_state else ()
    outs = {"o": o, **{f"S{i}" if len(states) > 1 else "S": s for i, s in enumerate(states)}}
    if case.forward_only:
        return outs, cotangents
    if cotangents is None:
        gen = torch.Generator(device=o.device).manual_seed(seed)
        cotangents = [torch.randn(t.shape, generator=gen, device=o.device) for t in outs.values()]  # float32
    loss = sum((t.double() * c.double()).sum() for t, c in zip(outs.values(), cotangents))
    loss.backward()
    grads = {f"d{n}": leaves[n].grad for n in leaves}
    grads.update({f"d{n}": (leaves[n].grad + leaves[n].grad.mT) / 2 for n in SYMMETRIC if n in leaves})
    return {**outs, **grads}, cotangents


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("nan")
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def bound(name: str, own: float, dtype: torch.dtype, precision: str = "exact") -> float:
    """The largest error a backend may make in quantity `name` (`o`, `S…`, `d…`) where the naive recurrence in the
    same dtype errs `own` (docs/design.md §4): twice that at `"exact"`; at `"fast"` three times, and for a final
    state its dtype's rounding (`2⁻⁸` relative in bfloat16) where that is larger."""
    if precision == "exact":
        return max(2 * own, FLOOR)
    rounding = torch.finfo(dtype).eps / 2 if name.startswith("S") else 0.0
    return max(3 * own, rounding, FLOOR)


def check(case: Case, backend: str, device="cuda", seed: int = 0, precision: str = "exact") -> dict:
    gen = torch.Generator(device=device).manual_seed(seed)
    x, cu = _inputs(case, device, gen)
    rounded = {n: (t.to(case.dtype).double() if n in TOKENS else t.double()) for n, t in x.items()}
    ref, cotangents = _run(case, rounded, cu, "chunk", torch.float64, None)
    naive, _ = _run(case, x, cu, "naive", case.dtype, cotangents)
    ours, _ = _run(case, x, cu, backend, case.dtype, cotangents, precision=precision)
    row = {"case": case.label, "ok": True}
    for name in ours:
        err, own = _rel(ours[name], ref[name]), _rel(naive[name], ref[name])
        row[name] = err
        row[f"{name}_naive"] = own
        if not err <= bound(name, own, case.dtype, precision):  # NaN fails too
            row["ok"] = False
    return row


def _check_case(args: tuple[Case, str, str, int, str]) -> dict:
    case, backend = args[:2]
    if backend != "fla":
        return check(*args)
    try:  # fla asserts on what it does not support (dtypes, sizes): a row that says so, not a stopped run
        return check(*args)
    except (AssertionError, RuntimeError, ValueError) as e:
        return {"case": case.label, "ok": False, "refused": f"{type(e).__name__}: {e}"[:160]}


def fla_supports(case: Case) -> bool:
    """The delta rule with one key and β: what fla's `chunk_gated_delta_rule` (gated) and `chunk_delta_rule` compute."""
    return case.op == "delta_rule" and case.erase and not case.two_key


def fla_matrix(cases: list[Case]) -> list[Case]:
    """The cases of `cases` fla computes, and each 16-bit GDN case again without its decay (DeltaNet, fla's backward
    too; its `chunk_delta_rule` refuses float32)."""
    chosen = [case for case in cases if fla_supports(case)]
    ungated = [replace(case, gated=False) for case in chosen if case.gated and case.dtype != torch.float32]
    return chosen + [case for case in ungated if case not in chosen]


def quick_matrix() -> list[Case]:
    """A screening subset of `matrix()` for comparing kernel variants (about a fifth): the delta-rule engine alone,
    bfloat16 and float32 at T = 65 and 1000, key dims 1, 64, 96 (padded) and 128, with the two-key, no-erase and
    packed-sequence cases."""
    keep_T, keep_K = (0, 65, 1000), (1, 64, 96, 128)
    return [
        c
        for c in matrix()
        if c.op == "delta_rule" and c.dtype in (torch.bfloat16, torch.float32) and c.T in keep_T and c.K in keep_K
    ]


OPS = ("delta_rule", "vla", "ccq", "kla", "gla", "normalized")
FAST_OPS = ("delta_rule", "kla", "ccq", "vla")  # the ops whose bfloat16 cases the fast level changes


def run(
    backend: str = "triton",
    device: str = "cuda",
    jobs: int = 1,
    quick: bool = False,
    ops: tuple[str, ...] = OPS,
    precision: str = "exact",
) -> list[dict]:
    """Every case of the matrix (`quick`: of `quick_matrix()`) whose op is in `ops`, in order (backend `fla`: the
    cases `fla_matrix` makes of them), at `precision` (`"fast"`: the bfloat16 cases of `FAST_OPS`, erase-off ones
    included, held to that level's `bound`; in other dtypes the level is the exact one, checked at `"exact"`).
    `jobs > 1` spreads the cases over that many processes (one GPU): most of the time goes to compiling each head
    size's kernels, which runs on the CPU, one kernel at a time per process."""
    unknown = set(ops) - set(OPS)
    if unknown:
        raise ValueError(f"ops: expected some of {OPS}, got {sorted(unknown)}")
    fast = check_precision(precision)
    chosen = quick_matrix() if quick else matrix()
    if backend == "fla":
        chosen = fla_matrix(chosen)
    if fast:
        ops = tuple(op for op in ops if op in FAST_OPS)
        chosen = [case for case in chosen if case.dtype == torch.bfloat16]
    cases = [(case, backend, device, 0, precision) for case in chosen if case.op in ops]
    if jobs <= 1:
        return [_check_case(c) for c in cases]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_check_case, cases))


def table(rows: list[dict], precision: str = "exact") -> str:
    """Markdown: the worst ratio (error / naive's own error) per case, and which quantity it was."""
    lines = ["| case | ok | worst quantity | error | naive's error |", "|---|:---:|---|---:|---:|"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['case']} | ✗ | refused: {r['refused']} | | |")
            continue
        names = [k for k in r if k not in ("case", "ok") and not k.endswith("_naive")]
        worst = max(names, key=lambda n: r[n] / max(r[f"{n}_naive"], FLOOR) if r[n] == r[n] else float("inf"))
        lines.append(
            f"| {r['case']} | {'✓' if r['ok'] else '✗'} | {worst} | {r[worst]:.2e} | {r[f'{worst}_naive']:.2e} |"
        )
    failed = sum(not r["ok"] for r in rows)
    rule = "2× naive's own" if precision == "exact" else "3× naive's own, a final state its dtype's rounding"
    lines.append(f"\n{len(rows) - failed} of {len(rows)} cases pass at {precision} (error ≤ {rule}, floor {FLOOR:g}).")
    return "\n".join(lines)
