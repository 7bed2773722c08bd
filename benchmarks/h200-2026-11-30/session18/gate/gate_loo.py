"""Scratch (session 18): where VLA's d = 128 gate step goes. Variants of `gate_apply_kernel` that leave one part out
(MODE), timed at T = 4K and 64K, B = 1, H = 16, bf16 u; plus fused-elimination candidates checked against main."""
import json, os, sys, time
import torch, triton, triton.language as tl
from linattn.ops.vla.cholesky import inverse_cholesky
from linattn.ops.vla import triton as vt
from linattn.ops.vla.chunk import group_inverses, initial_penalty


@triton.jit
def chol_only(b_G, C: tl.constexpr):
    o_c = tl.arange(0, C)
    b_L = tl.zeros([C, C], dtype=tl.float32)
    for j in range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)
        b_col = tl.where(o_c >= j, b_col, 0) / tl.sqrt(tl.sum(tl.where(o_c == j, b_col, 0)))
        b_L = tl.where(o_c[None, :] == j, b_col[:, None], b_L)
        b_G -= b_col[:, None] * b_col[None, :]
    return b_L


@triton.jit
def subst_only(b_L, C: tl.constexpr):
    o_c = tl.arange(0, C)
    b_Li = tl.zeros([C, C], dtype=tl.float32)
    for i in range(C):
        b_row = tl.sum(tl.where(o_c[:, None] == i, b_L, 0), 0)
        b_r = tl.where(o_c == i, 1.0, 0.0) - tl.sum(tl.where(o_c < i, b_row, 0)[:, None] * b_Li, 0)
        b_Li = tl.where(o_c[:, None] == i, (b_r / tl.sum(tl.where(o_c == i, b_row, 0)))[None, :], b_Li)
    return b_Li


@triton.jit
def elim_inverse(b_G, C: tl.constexpr):
    """L⁻¹ in one loop: symmetric elimination on G with the same row operations on I (right-looking), then the
    rows scaled by 1/√pivot."""
    o_c = tl.arange(0, C)
    b_Li = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    b_p = tl.zeros([C], dtype=tl.float32)
    for j in range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)  # G'[:, j]
        p = tl.sum(tl.where(o_c == j, b_col, 0))
        b_m = tl.where(o_c > j, b_col / p, 0)
        b_row = tl.sum(tl.where(o_c[:, None] == j, b_Li, 0), 0)  # Li[j, :]
        b_G -= b_m[:, None] * b_col[None, :]
        b_Li -= b_m[:, None] * b_row[None, :]
        b_p = tl.where(o_c == j, p, b_p)
    return b_Li / tl.sqrt(b_p)[:, None]


@triton.jit
def chol_subst_unrolled(b_G, C: tl.constexpr):
    """inverse_cholesky by substitution with both loops unrolled (static_range)."""
    o_c = tl.arange(0, C)
    b_L = tl.zeros([C, C], dtype=tl.float32)
    for j in tl.static_range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)
        b_col = tl.where(o_c >= j, b_col, 0) / tl.sqrt(tl.sum(tl.where(o_c == j, b_col, 0)))
        b_L = tl.where(o_c[None, :] == j, b_col[:, None], b_L)
        b_G -= b_col[:, None] * b_col[None, :]
    b_Li = tl.zeros([C, C], dtype=tl.float32)
    for i in tl.static_range(C):
        b_row = tl.sum(tl.where(o_c[:, None] == i, b_L, 0), 0)
        b_r = tl.where(o_c == i, 1.0, 0.0) - tl.sum(tl.where(o_c < i, b_row, 0)[:, None] * b_Li, 0)
        b_Li = tl.where(o_c[:, None] == i, (b_r / tl.sum(tl.where(o_c == i, b_row, 0)))[None, :], b_Li)
    return b_Li


@triton.jit
def elim_unrolled(b_G, C: tl.constexpr):
    o_c = tl.arange(0, C)
    b_Li = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    b_p = tl.zeros([C], dtype=tl.float32)
    for j in tl.static_range(C):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)
        p = tl.sum(tl.where(o_c == j, b_col, 0))
        b_m = tl.where(o_c > j, b_col / p, 0)
        b_row = tl.sum(tl.where(o_c[:, None] == j, b_Li, 0), 0)
        b_G -= b_m[:, None] * b_col[None, :]
        b_Li -= b_m[:, None] * b_row[None, :]
        b_p = tl.where(o_c == j, p, b_p)
    return b_Li / tl.sqrt(b_p)[:, None]


@triton.jit(do_not_specialize=["T", "SG"])
def loo_kernel(X, U, A0, Y, T, SG, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
               R: tl.constexpr, MODE: tl.constexpr):
    i_g, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_c = tl.arange(0, C)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    o_A = (i_bh.to(tl.int64) * SG + i_g) * D * D + o_d[:, None] * D + o_d[None, :]
    b_A = tl.load(A0 + o_A, mask=m_d[:, None] & m_d[None, :], other=0)
    for j in range(R):
        t0 = (i_g * R + j) * C
        m_td = ((t0 + o_c) < T)[:, None] & m_d[None, :]
        o_td = ((i_b.to(tl.int64) * T + t0 + o_c[:, None]) * H + i_h) * D + o_d[None, :]
        b_u = tl.load(U + o_td, mask=m_td, other=0).to(tl.float32)
        b_x = tl.load(X + o_td, mask=m_td, other=0)
        b_z = tl.dot(b_u, b_A, input_precision="tf32x3")
        b_G = tl.dot(b_u, tl.trans(b_z), input_precision="tf32x3") + tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
        if MODE == 0:  # main
            b_Li = inverse_cholesky(b_G, C, False)
        elif MODE == 1:  # no factorisation at all
            b_Li = b_G * 0.01
        elif MODE == 2:  # Cholesky, no substitution
            b_Li = chol_only(b_G, C)
        elif MODE == 3:  # substitution on G's lower triangle, no Cholesky
            b_Li = subst_only(tl.where(o_c[:, None] >= o_c[None, :], b_G, 0), C)
        elif MODE == 4:  # main, no downdate of A
            b_Li = inverse_cholesky(b_G, C, False)
        elif MODE == 5:  # one elimination loop
            b_Li = elim_inverse(b_G, C)
        elif MODE == 6:  # product form
            b_Li = inverse_cholesky(b_G, C, True)
        elif MODE == 7:
            b_Li = chol_subst_unrolled(b_G, C)
        else:
            b_Li = elim_unrolled(b_G, C)
        b_w = tl.dot(b_Li, b_z, input_precision="tf32x3")
        b_xw = tl.dot(b_x, tl.trans(b_w), input_precision="tf32x3")
        b_xw = tl.where(o_c[:, None] >= o_c[None, :], b_xw, 0)
        b_y = tl.dot(b_x, b_A, input_precision="tf32x3") - tl.dot(b_xw, b_w, input_precision="tf32x3")
        tl.store(Y + o_td, b_y, mask=m_td)
        if MODE != 4:
            b_A -= tl.dot(tl.trans(b_w), b_w, input_precision="tf32x3")


MODES = {0: "main", 1: "no factorisation", 2: "Cholesky only", 3: "substitution only", 4: "no downdate",
         5: "one elimination loop", 6: "product form",
         7: "main, unrolled", 8: "elimination, unrolled"}


def run(T, D, mode, warps, reps=20):
    torch.manual_seed(0)
    B, H = 1, 16
    dev = os.environ.get("DEV", "cuda")
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1)
    u = (torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1) / D**0.5).bfloat16()
    g = vt.triton_grouping(T)
    M0 = initial_penalty(k, None, 0.1)
    A_starts, _ = group_inverses(u, M0, g.L, vt.triton_spd_inverse)
    SG = A_starts.stride(1) // (D * D)
    Y = torch.empty_like(k)
    grid = (A_starts.shape[2], B * H)
    f = lambda: loo_kernel[grid](k, u, A_starts, Y, T, SG, H=H, D=D, BD=D, C=g.C, R=g.R, MODE=mode, num_warps=warps)
    ms = triton.testing.do_bench(f, warmup=5, rep=200) if dev == "cuda" else 0.0
    ref = vt.triton_apply(k, u, A_starts, g)[0]
    f()
    err = ((Y - ref).norm() / ref.norm()).item() if mode in (0, 5, 6, 7, 8) else float("nan")
    return ms, err


if __name__ == "__main__":
    rows = []
    for D, warps in ((128, 8), (64, 4)):
        for T in (4096, 65536):
            for mode in MODES if D == 128 else (0, 5, 6, 7, 8):
                ms, err = run(T, D, mode, warps)
                rows.append(dict(D=D, T=T, mode=MODES[mode], warps=warps, ms=ms, rel_err=err))
                print(f"d={D:4d} T={T:6d} warps={warps} {MODES[mode]:24s} {ms:8.3f} ms  err vs main {err:.2e}", flush=True)
    json.dump(rows, open(os.path.join(sys.argv[1], "gate_loo.json"), "w"), indent=1)
