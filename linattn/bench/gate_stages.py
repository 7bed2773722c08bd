"""Stage profile of VLA's chunk gate on the GPU: each step of its forward and backward timed on its own.

`python -m linattn.bench stages --op vla-gate [--K 128] [--lengths …]`: B = 1, H = 16, float32 (the gate's compute
dtype for every input dtype), inputs as `vla-speed` draws them. Each step is a call `linattn/ops/vla/chunk.py`
makes, on the intermediates of one forward, in its one-factorisation-per-chunk form (`carry = 1`); the backward's
steps on a random `∂L/∂α`. Beside them, alternatives for the `d × d` inverse per chunk (not counted in the
total), and the gate's forward and forward + backward end to end with `carry` 1 and the default `CARRY` (one
`d × d` factorisation per `CARRY` chunks, Woodbury downdates between). The gate has no kernel of its own yet: this
says where one would pay.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from linattn.ops.chunking import to_chunks
from linattn.ops.vla.chunk import CARRY, _apply_inverses, _later_pairs, _penalties, chunk_vla_gate, gate_chunk


def stage_calls(k: torch.Tensor, u: torch.Tensor, lam0: float = 0.1) -> list[tuple[str, str, Callable[[], object]]]:
    """`(stage, kind, call)`, kind `forward`, `backward` or `alternative`; `k, u: [B, T, H, d]` float32."""
    B, T, H, d = k.shape
    C = gate_chunk(T, d)
    eye_d, eye_C = (torch.eye(n, device=k.device) for n in (d, C))
    M0 = (lam0 * eye_d).expand(B, H, d, d)
    Kc, Uc = to_chunks(F.normalize(k, dim=-1), C), to_chunks(u, C)
    M = _penalties(M0, Uc.mT @ Uc)
    L_M = torch.linalg.cholesky(M)
    A = torch.cholesky_inverse(L_M)
    UA = Uc @ A
    G = eye_C + UA @ Uc.transpose(-1, -2)
    L = torch.linalg.cholesky(G)
    W = torch.linalg.solve_triangular(L, UA, upper=False)
    alpha = _apply_inverses(Kc, A, W)
    g = torch.randn_like(alpha)
    a = _apply_inverses(g, A, W)
    S, _ = _later_pairs(a.mT @ alpha)
    return [
        ("Gram matrices, prefix sum → M_c", "forward", lambda: _penalties(M0, Uc.mT @ Uc)),
        ("cholesky(M_c) [N, d, d]", "forward", lambda: torch.linalg.cholesky(M)),
        ("cholesky_inverse → A_c", "forward", lambda: torch.cholesky_inverse(L_M)),
        ("U A_c, I + U A_c Uᵀ", "forward", lambda: eye_C + (Uc @ A) @ Uc.transpose(-1, -2)),
        ("cholesky(I + U A_c Uᵀ) [N, C, C]", "forward", lambda: torch.linalg.cholesky(G)),
        ("solve_triangular → W", "forward", lambda: torch.linalg.solve_triangular(L, UA, upper=False)),
        ("α = K̂ A_c − tril(K̂ Wᵀ) W", "forward", lambda: _apply_inverses(Kc, A, W)),
        ("a = A_t g_t", "backward", lambda: _apply_inverses(g, A, W)),
        ("d × d pairs, reverse prefix sum", "backward", lambda: _later_pairs(a.mT @ alpha)),
        ("∂u within chunks", "backward", lambda: (Uc @ alpha.mT).triu() @ a + (Uc @ a.mT).triu() @ alpha),
        ("∂u across chunks", "backward", lambda: Uc @ S),
        ("A_c = inv(M_c)", "alternative", lambda: torch.linalg.inv(M)),
        ("A_c = L⁻ᵀ L⁻¹, L⁻¹ by solve_triangular", "alternative", lambda: _inverse_by_triangular(L_M, eye_d)),
        ("A_c = cholesky_solve(I, L_M)", "alternative", lambda: torch.cholesky_solve(eye_d.expand_as(M), L_M)),
    ]


def _inverse_by_triangular(L: torch.Tensor, eye: torch.Tensor) -> torch.Tensor:
    L_inv = torch.linalg.solve_triangular(L, eye.expand_as(L), upper=False)
    return L_inv.mT @ L_inv


def end_to_end(k: torch.Tensor, u: torch.Tensor, carry: int) -> dict[str, Callable[[], object]]:
    """The chunk gate's forward, and its forward + backward (α̂ and `A_T` both given a random cotangent)."""
    k, u = k.detach().clone().requires_grad_(), u.detach().clone().requires_grad_()
    gate = partial(chunk_vla_gate, lam0=0.1, carry=carry)
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
    for carry in sorted({1, CARRY}):
        for name, call in end_to_end(k, u, carry).items():
            rows.append({"T": T, "stage": f"vla gate {name}, carry {carry}", "kind": "end to end", "ms": timer(call)})
    return rows
