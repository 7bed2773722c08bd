"""Scratch (not part of the library): VLA's decode path (`vla(..., backend="fused_recurrent")`, session 33) on the
GPU against the float64 token loop on the CPU, before `bench decode` times it. From the repository root:

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session33/check_vla_decode.py

Per head dim, dtype, forgetting factor and number of tokens: from a prefilled `(S, A)` (the Triton backend over 300
tokens), the relative RMS error of `o`, `S` and `A` after the step against the float64 loop on the same (rounded)
inputs and state: the step's own float32 arithmetic, with `o` rounded to the inputs' dtype on top (~2e-3 in
bfloat16). The interpreter's tests hold float32 to 2e-5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops import vla


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double().cpu() - b).norm() / b.norm()).item()


def main() -> None:
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| K | dtype | rho | tokens | o | S | A |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for K in (32, 64, 128):
        for dtype in (torch.float32, torch.bfloat16):
            for rho in (1.0, 0.99):
                gen = torch.Generator().manual_seed(K)

                def draw(T):
                    x = {n: torch.randn(2, T, 4, K, generator=gen) for n in "qkvu"}
                    x["q"], x["k"] = F.elu(x["q"]) + 1, F.elu(x["k"]) + 1
                    x["u"] = F.normalize(x["u"], dim=-1) / K**0.5
                    return {n: t.to(dtype) for n, t in x.items()}

                with torch.no_grad():
                    prefill = {n: t.cuda() for n, t in draw(300).items()}
                    _, state = vla(**prefill, rho=rho, output_final_state=True, backend="triton")
                    for T in (1, 4):
                        step = draw(T)
                        got = vla(**{n: t.cuda() for n, t in step.items()}, rho=rho, initial_state=state,
                                  output_final_state=True, backend="fused_recurrent")  # fmt: skip
                        want = vla(**{n: t.double() for n, t in step.items()}, rho=rho,
                                   initial_state=tuple(s.double().cpu() for s in state), output_final_state=True,
                                   backend="naive")  # fmt: skip
                        errs = [rel(got[0], want[0]), rel(got[1][0], want[1][0]), rel(got[1][1], want[1][1])]
                        print(f"| {K} | {str(dtype)[6:]} | {rho:g} | {T} | " + " | ".join(f"{e:.1e}" for e in errs)
                              + " |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
