"""Stage profile of VLA's gate: each step of its PyTorch chunk path timed on its own, and the gate end to end.

`python -m linattn.bench stages --op vla-gate [--K 128] [--lengths …] [--device cpu]`: B = 1, H = 16, float32 (the
gate's compute dtype for every input dtype), inputs as `vla-speed` draws them. Each step is a call
`linattn/ops/vla/chunk.py` makes, on the intermediates of one forward, in its one-factorisation-per-chunk form
(`carry = 1`); the backward's steps on a random `∂L/∂α`. Beside them, alternatives for the `d × d` inverse per
chunk (not counted in the total), and the gate's forward and forward + backward end to end: the chunk path with
`carry` 1 and the default `CARRY` (one `d × d` factorisation per `CARRY` chunks, Woodbury downdates between) and,
on CUDA, the Triton kernel (`linattn/ops/vla/triton/gate.py`), its products in three tf32 passes and in one (as
`precision="fast"` takes them).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from linattn.ops.chunking import to_chunks
from linattn.ops.vla.chunk import (
    CARRY,
    _apply_inverses,
    _later_sums,
    chunk_vla_gate,
    gate_chunk,
    penalties,
    spd_inverse,
)


def stage_calls(k: torch.Tensor, u: torch.Tensor, lam0: float = 0.1) -> list[tuple[str, str, Callable[[], object]]]:
    """`(stage, kind, call)`, kind `forward`, `backward` or `alternative`; `k, u: [B, T, H, d]` float32."""
    B, T, H, d = k.shape
    C = gate_chunk(T, d)
    eye_d, eye_C = (torch.eye(n, device=k.device) for n in (d, C))
    M0 = (lam0 * eye_d).expand(B, H, d, d)
    Kc, Uc = to_chunks(F.normalize(k, dim=-1), C), to_chunks(u, C)
    M = penalties(M0, Uc)[:, :, :-1]
    L_M = torch.linalg.cholesky(M)
    A = torch.cholesky_inverse(L_M)
    UA = Uc @ A
    G = eye_C + UA @ Uc.transpose(-1, -2)
    L = torch.linalg.cholesky(G)
    W = torch.linalg.solve_triangular(L, UA, upper=False)
    alpha = _apply_inverses(Kc, A, W)
    g = torch.randn_like(alpha)
    a = _apply_inverses(g, A, W)
    pair = a.mT @ alpha
    S = pair + pair.mT
    return [
        ("Gram matrices, prefix sum → M_c", "forward", lambda: penalties(M0, Uc)),
        ("A_c = M_c⁻¹ [N, d, d] (spd_inverse)", "forward", lambda: spd_inverse(M)),
        ("U A_c, I + U A_c Uᵀ", "forward", lambda: eye_C + (Uc @ A) @ Uc.transpose(-1, -2)),
        ("cholesky(I + U A_c Uᵀ) [N, C, C]", "forward", lambda: torch.linalg.cholesky(G)),
        ("solve_triangular → W", "forward", lambda: torch.linalg.solve_triangular(L, UA, upper=False)),
        ("α = K̂ A_c − tril(K̂ Wᵀ) W", "forward", lambda: _apply_inverses(Kc, A, W)),
        ("a = A_t g_t", "backward", lambda: _apply_inverses(g, A, W)),
        ("d × d pairs, reverse prefix sum", "backward", lambda: _later_sums(pair + pair.mT)),
        ("∂u within chunks", "backward", lambda: (Uc @ alpha.mT).triu() @ a + (Uc @ a.mT).triu() @ alpha),
        ("∂u across chunks", "backward", lambda: Uc @ S),
        ("A_c = inv(M_c)", "alternative", lambda: torch.linalg.inv(M)),
        ("A_c = cholesky_inverse(L_M)", "alternative", lambda: torch.cholesky_inverse(L_M)),
        ("A_c = cholesky_solve(I, L_M)", "alternative", lambda: torch.cholesky_solve(eye_d.expand_as(M), L_M)),
    ]


def end_to_end(k: torch.Tensor, u: torch.Tensor, gate: Callable) -> dict[str, Callable[[], object]]:
    """`gate(k, u, A0)`'s forward, and its forward + backward (α̂ and `A_T` both given a random cotangent)."""
    k, u = k.detach().clone().requires_grad_(), u.detach().clone().requires_grad_()
    alpha, A = gate(k, u, None)
    d_alpha, d_A = torch.randn_like(alpha), torch.randn_like(A)

    def forward_backward():
        k.grad = u.grad = None
        torch.autograd.backward(gate(k, u, None), (d_alpha, d_A))

    return {"forward": torch.no_grad()(lambda: gate(k, u, None)), "forward + backward": forward_backward}


def profile(T: int, timer: Callable[[Callable], float], *, B=1, H=16, K=128, device="cuda") -> list[dict]:
    """Rows `{T, stage, kind, ms}`, the end-to-end ones (kind `end to end`) last; `timer(fn) -> ms`."""
    gen = torch.Generator(device=device).manual_seed(0)
    k = F.elu(torch.randn(B, T, H, K, device=device, generator=gen)) + 1
    u = F.normalize(torch.randn(B, T, H, K, device=device, generator=gen), dim=-1) / K**0.5
    rows = [{"T": T, "stage": s, "kind": kind, "ms": timer(call)} for s, kind, call in stage_calls(k, u)]
    gates = {f"chunk, carry {carry}": partial(chunk_vla_gate, lam0=0.1, carry=carry) for carry in sorted({1, CARRY})}
    if device == "cuda":
        from linattn.ops.vla.triton.gate import triton_vla_gate

        gates["triton"] = partial(triton_vla_gate, lam0=0.1)
        # the products as `precision="fast"` takes them (for bfloat16 tokens): one tf32 pass
        gates["triton, one tf32 pass"] = partial(triton_vla_gate, lam0=0.1, fast=True)
    for label, gate in gates.items():
        for name, call in end_to_end(k, u, gate).items():
            rows.append({"T": T, "stage": f"vla gate {name}, {label}", "kind": "end to end", "ms": timer(call)})
    return rows
