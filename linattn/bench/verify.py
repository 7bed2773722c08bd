"""Correctness matrix of a backend against float64, on the machine it runs on (DESIGN §4).

Run on the GPU: `python -m linattn.bench verify [--backend triton] [--json FILE]`. For every dtype, length,
head size and option in the matrix it runs the op forward and backward in the backend under test and in the
`naive` recurrence *in the same dtype*, and compares both with a float64 reference (the `chunk` backend in
float64, which equals the naive recurrence to ~1e-15, tested on CPU). A case passes when the backend's error is
at most twice the naive recurrence's own error in that dtype (with a floor at float32 rounding, 1e-6). NaN
never passes.

The matrix (issue 4): dtypes float32 / bfloat16 / float16; `T ∈ {1, 63, 64, 65, 1000, 4096}`;
`K, V ∈ {32, 64, 96, 128, 256}`; with and without β, g, a second key `w`, an initial state; and packed
variable-length batches. The same kernels without the erase term run linear attention and scalar-decay GLA:
those are in the matrix too. The naive recurrence is slow at T = 4096, so the largest cases run with one head.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from linattn.ops import delta_rule, gated_linear_attention, linear_attention

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

    @property
    def label(self) -> str:
        op = ("gla" if self.gated else "linear") if not self.erase else None
        parts = [str(self.dtype).removeprefix("torch."), f"T={self.T}", f"K={self.K}", f"V={self.V}"] + [op] * bool(op)
        parts += ["w≠k"] * self.two_key + ["no-g"] * (not self.gated) + ["no-h0"] * (not self.initial_state)
        if self.varlen:
            parts.append("varlen" + "/".join(map(str, self.varlen)))
        return " ".join(parts)


def matrix() -> list[Case]:
    cases = []
    for dtype, T in itertools.product((torch.float32, torch.bfloat16, torch.float16), (1, 63, 64, 65, 1000, 4096)):
        H = 1 if T >= 1000 else 2
        for K, V in ((32, 32), (64, 64), (96, 96), (128, 128), (256, 256), (128, 64), (64, 96)):
            if T == 4096 and K not in (64, 128):
                continue
            cases.append(Case(T, K, V, dtype, H=H))
        cases.append(Case(T, 128, 128, dtype, two_key=True, H=H))
        cases.append(Case(T, 64, 64, dtype, gated=False, initial_state=False, H=H))
        cases.append(Case(T, 128, 128, dtype, erase=False, H=H))
        cases.append(Case(T, 64, 96, dtype, erase=False, gated=False, H=H))
        cases.append(Case(T, 1, 33, dtype, erase=False, H=H))  # CCQ's (m, Z) sum
    for dtype in (torch.float32, torch.bfloat16):
        cases.append(Case(0, 128, 128, dtype, varlen=(1, 63, 64, 65, 300), two_key=True))
        cases.append(Case(0, 64, 64, dtype, varlen=(1, 63, 64, 65, 300), erase=False))
    return cases


def _inputs(case: Case, device, gen):
    lengths = case.varlen or (case.T,)
    B, T = (1, sum(lengths)) if case.varlen else (1, case.T)
    N = len(lengths)
    shape = (B, T, case.H)

    def r(*s):
        return torch.randn(*s, generator=gen, device=device)

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
    cu = None
    if case.varlen:
        cu = torch.tensor([0, *itertools.accumulate(lengths)], device=device)
    return x, cu


def _run(x: dict, cu, backend: str, dtype: torch.dtype, grads_of: dict, erase: bool = True):
    """Forward + backward with token inputs cast to `dtype` (gates and states stay float32): the delta rule, or
    without `erase` linear attention (GLA when `x` has a decay `g`)."""
    leaves = {}
    args = {}
    for name, t in x.items():
        cast = t.to(dtype) if name in ("q", "k", "v", "w") else t
        leaves[name] = cast.detach().requires_grad_()
        args[name] = leaves[name]
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    common = {"output_final_state": True, "cu_seqlens": cu, "backend": backend}
    if erase:
        o, S = delta_rule(q, k, v, **args, **common)
    elif "g" in args:
        o, S = gated_linear_attention(q, k, v, args.pop("g"), **args, **common)
    else:
        o, S = linear_attention(q, k, v, **args, **common)
    loss = (o.float() * grads_of["o"]).sum() + (S * grads_of["S"]).sum()
    loss.backward()
    return {"o": o, "S": S, **{f"d{n}": leaves[n].grad for n in leaves}}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if not torch.isfinite(a).all():
        return float("nan")
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def check(case: Case, backend: str, device="cuda", seed: int = 0) -> dict:
    gen = torch.Generator(device=device).manual_seed(seed)
    x, cu = _inputs(case, device, gen)
    T, N = x["q"].shape[1], (x["initial_state"].shape[0] if "initial_state" in x else 1)
    grads_of = {
        "o": torch.randn(1, T, case.H, case.V, generator=gen, device=device),
        "S": torch.randn(N, case.H, case.K, case.V, generator=gen, device=device),
    }
    rounded = {n: (t.to(case.dtype).double() if n in ("q", "k", "v", "w") else t.double()) for n, t in x.items()}
    ref = _run(rounded, cu, "chunk", torch.float64, {k: v.double() for k, v in grads_of.items()}, case.erase)
    naive = _run(x, cu, "naive", case.dtype, grads_of, case.erase)
    ours = _run(x, cu, backend, case.dtype, grads_of, case.erase)
    row = {"case": case.label, "ok": True}
    for name in ref:
        err, own = _rel(ours[name], ref[name]), _rel(naive[name], ref[name])
        bound = max(2 * own, FLOOR)
        row[name] = err
        row[f"{name}_naive"] = own
        if not err <= bound:  # NaN fails too
            row["ok"] = False
    return row


def _check_case(args: tuple[Case, str, str]) -> dict:
    return check(*args)


def quick_matrix() -> list[Case]:
    """A screening subset of `matrix()` for comparing kernel variants (about a fifth): bfloat16 and float32 at
    T = 65 and 1000, key dims 1, 64, 96 (padded) and 128, with the two-key, no-erase and packed-sequence cases."""
    keep_T, keep_K = (0, 65, 1000), (1, 64, 96, 128)
    return [c for c in matrix() if c.dtype in (torch.bfloat16, torch.float32) and c.T in keep_T and c.K in keep_K]


def run(backend: str = "triton", device: str = "cuda", jobs: int = 1, quick: bool = False) -> list[dict]:
    """Every case of the matrix (`quick`: of `quick_matrix()`), in order. `jobs > 1` spreads the cases over that many
    processes (one GPU): most of the time goes to compiling each head size's kernels, which runs on the CPU, one
    kernel at a time per process."""
    cases = [(case, backend, device) for case in (quick_matrix() if quick else matrix())]
    if jobs <= 1:
        return [_check_case(c) for c in cases]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_check_case, cases))


def table(rows: list[dict]) -> str:
    """Markdown: the worst ratio (error / naive's own error) per case, and which quantity it was."""
    lines = ["| case | ok | worst quantity | error | naive's error |", "|---|:---:|---|---:|---:|"]
    for r in rows:
        names = [k for k in r if k not in ("case", "ok") and not k.endswith("_naive")]
        worst = max(names, key=lambda n: r[n] / max(r[f"{n}_naive"], FLOOR) if r[n] == r[n] else float("inf"))
        lines.append(
            f"| {r['case']} | {'✓' if r['ok'] else '✗'} | {worst} | {r[worst]:.2e} | {r[f'{worst}_naive']:.2e} |"
        )
    failed = sum(not r["ok"] for r in rows)
    lines.append(f"\n{len(rows) - failed} of {len(rows)} cases pass (error ≤ 2× naive's own, floor {FLOOR:g}).")
    return "\n".join(lines)
