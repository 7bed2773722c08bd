"""VLA's group penalties on the GPU for bfloat16 `u`: `M` at every group start in one launch and a prefix sum.

`chunk.group_penalties`' contract: `M_g = M_0 + Σ_{t < g L} u_t u_tᵀ` for `g = 0 … ⌈T/L⌉`, `[B, H, N + 1, d, d]`
float32, `M_0 = λ0 I` or a given `[B, H, d, d]`. `group_grams_kernel` writes `M_0` into slot 0 and each group's
Gram `Σ_{t ∈ g} u_t u_tᵀ` into slot `g + 1`; a prefix sum over the slots (`cumsum_`, in place) then gives the `M_g`.
PyTorch's path (`chunk.penalties`) copies `u` to float32, multiplies it on the CUDA cores, pads the prefix sum into a
new tensor and adds `λ0` to its diagonal: five launches and a float32 copy of `u`. bfloat16 rows are exact in tf32,
so the kernel multiplies them exactly on the tensor cores (one tf32 pass) into float32 sums.

Only bfloat16: the tensor cores' float32 sums of a group's products are not the CUDA cores' round-to-nearest ones.
Under `python -m linattn.bench verify --ops vla` the final `A` of the `T = 1000, K = 32` cases errs 9.6e-7 with the
kernel against 7.2e-7 with PyTorch's path for bfloat16 `u` (the naive recurrence's own 5.8e-7; the bound 1.2e-6),
but for float16 `u` the kernel would err 1.73e-6 against 1.9e-7 (bound 1e-6: a failure), as its 11-bit products
lose more in those sums than bfloat16's 8-bit ones. float16 and float32 `u` keep PyTorch's path (`gate.py`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv, next_power_of_2

BT = 64  # tokens a step of a program's sum
BN = 32  # columns of M a program


@triton.jit(do_not_specialize=["T", "L", "NG1"])
def group_grams_kernel(
    u,
    M0,
    M,
    T,
    L,
    NG1,
    lam0,
    H: tl.constexpr,
    D: tl.constexpr,
    BD: tl.constexpr,
    BN: tl.constexpr,
    BT: tl.constexpr,
    M0_GIVEN: tl.constexpr,
):
    """One program per (column block, slot, batch · head). `u: [B, T, H, D]` bfloat16; `M: [B, H, NG1, D, D]` float32;
    `M0: [B, H, D, D]` float32 if `M0_GIVEN`, else `λ0 I` from `lam0`."""
    i_n, i_g, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    o_d = tl.arange(0, BD)
    o_c = i_n * BN + tl.arange(0, BN)
    m_d, m_c = o_d < D, o_c < D
    if i_g == 0:
        if M0_GIVEN:
            o_0 = i_bh.to(tl.int64) * D * D + o_d[:, None] * D + o_c[None, :]
            b_M = tl.load(M0 + o_0, mask=m_d[:, None] & m_c[None, :], other=0)
        else:
            b_M = tl.where(o_d[:, None] == o_c[None, :], lam0, 0.0)
    else:
        # [BD, BN] the Gram's column block over the group's tokens (past T: rows of 0)
        b_M = tl.zeros([BD, BN], dtype=tl.float32)
        for t in range(0, L, BT):
            o_t = (i_g - 1) * L + t + tl.arange(0, BT)
            m_t = o_t < T
            o_u = ((i_b.to(tl.int64) * T + o_t) * H + i_h) * D
            # [BT, BD] the rows, [BT, BN] their columns of the block
            b_u = tl.load(u + o_u[:, None] + o_d[None, :], mask=m_t[:, None] & m_d[None, :], other=0).to(tl.float32)
            b_c = tl.load(u + o_u[:, None] + o_c[None, :], mask=m_t[:, None] & m_c[None, :], other=0).to(tl.float32)
            b_M = tl.dot(tl.trans(b_u), b_c, b_M, input_precision="tf32")
    o_M = ((i_bh.to(tl.int64) * NG1 + i_g) * D + o_d[:, None]) * D + o_c[None, :]
    tl.store(M + o_M, b_M, mask=m_d[:, None] & m_c[None, :])


def triton_group_penalties(u: torch.Tensor, M0: torch.Tensor | float, L: int) -> torch.Tensor:
    """`chunk.group_penalties`' contract on the kernel: `u: [B, T, H, d]` bfloat16 (contiguous), `M0` a number `λ0`
    or `[B, H, d, d]` float32; returns `[B, H, ⌈T/L⌉ + 1, d, d]` float32."""
    if u.dtype != torch.bfloat16:
        raise TypeError(f"group penalties kernel: bfloat16 u expected (module docstring), got {u.dtype}")
    B, T, H, D = u.shape
    NG1 = cdiv(T, L) + 1
    M = torch.empty(B, H, NG1, D, D, dtype=torch.float32, device=u.device)
    given = isinstance(M0, torch.Tensor)
    BD = max(16, next_power_of_2(D))
    bn = min(BN, BD)
    group_grams_kernel[(cdiv(D, bn), NG1, B * H)](
        u, M0.contiguous() if given else None, M, T, L, NG1, 0.0 if given else float(M0),
        H=H, D=D, BD=BD, BN=bn, BT=BT, M0_GIVEN=given, num_warps=4,
    )  # fmt: skip
    return M.cumsum_(2)
