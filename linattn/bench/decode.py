"""GPU decode benchmark: one generated token's mixer step at a given context length, ours vs SDPA with a KV cache.

Run on a CUDA machine: `python -m linattn.bench decode [--json FILE]`. Per head the recurrent step reads and writes
its fixed `[K, V]` float32 state whatever the context (`delta_rule(..., backend="fused_recurrent")`, one token, the
state carried in and out; VLA's step also its `[K, K]` inverse penalty `A`, `vla(..., backend="fused_recurrent")`:
the gate's step kernel, then the delta rule's), while attention reads its whole KV cache:
`F.scaled_dot_product_attention` of one query against `L` cached keys and values after writing the new token's key
and value into a preallocated cache (what a KV-cache decoder does per step). Timed with `triton.testing.do_bench`
(median, `timing.median_ms`); the memory column is what each method keeps per sequence between steps (state, or cache
at that context).

The state that starts our step is the final state of a real prefill over the context (`backend="triton"`), so
the number measured at 64K is a step from a 64K-token state, not from zeros.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.bench.timing import median_ms
from linattn.ops import delta_rule, vla


def _inputs(B: int, T: int, H: int, K: int, dtype, gen):
    def r(*shape):
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    q, v = r(B, T, H, K), r(B, T, H, K)
    k = F.normalize(torch.randn(B, T, H, K, device="cuda", generator=gen), dim=-1).to(dtype)
    beta = torch.rand(B, T, H, device="cuda", generator=gen)
    g = -0.1 * torch.rand(B, T, H, device="cuda", generator=gen)
    return q, k, v, beta, g


def ours(B: int, L: int, H: int, K: int, dtype) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        q, k, v, beta, g = _inputs(B, L, H, K, dtype, gen)
        _, state = delta_rule(q, k, v, beta=beta, g=g, output_final_state=True, backend="triton")
        del q, k, v, beta, g
        step = _inputs(B, 1, H, K, dtype, gen)

        def fn():
            q, k, v, beta, g = step
            return delta_rule(
                q, k, v, beta=beta, g=g, initial_state=state, output_final_state=True, backend="fused_recurrent"
            )

        ms = median_ms(fn, "cuda")
    return {"ms": ms, "state_mib_per_seq": state[0].numel() * state.element_size() / 2**20}


def ours_vla(B: int, L: int, H: int, K: int, dtype) -> dict:
    """VLA's step from a prefilled `(S, A)`: `q, k = ELU(·) + 1`, `u` unit rows over `√K`, as `vla-speed` draws them."""
    gen = torch.Generator(device="cuda").manual_seed(0)

    def draw(T):
        q, k, v, _, _ = _inputs(B, T, H, K, dtype, gen)
        u = F.normalize(torch.randn(B, T, H, K, device="cuda", generator=gen), dim=-1) / K**0.5
        return {"q": F.elu(q) + 1, "k": F.elu(k * K**0.5) + 1, "v": v, "u": u.to(dtype)}

    with torch.no_grad():
        _, state = vla(**draw(L), output_final_state=True, backend="triton")
        step = draw(1)

        def fn():
            return vla(**step, initial_state=state, output_final_state=True, backend="fused_recurrent")

        ms = median_ms(fn, "cuda")
    kept = sum(s[0].numel() * s.element_size() for s in state)
    return {"ms": ms, "state_mib_per_seq": kept / 2**20}


def sdpa(B: int, L: int, H: int, K: int, dtype) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(0)
    cache_k = torch.randn(B, H, L + 1, K, device="cuda", generator=gen).to(dtype)
    cache_v = torch.randn(B, H, L + 1, K, device="cuda", generator=gen).to(dtype)
    q, k, v = (torch.randn(B, H, 1, K, device="cuda", generator=gen).to(dtype) for _ in range(3))

    def fn():
        cache_k[:, :, L : L + 1] = k
        cache_v[:, :, L : L + 1] = v
        return F.scaled_dot_product_attention(q, cache_k, cache_v)

    with torch.no_grad():
        ms = median_ms(fn, "cuda")
    cache = 2 * H * (L + 1) * K * cache_k.element_size()
    return {"ms": ms, "state_mib_per_seq": cache / 2**20}


def run(contexts=(4096, 32768, 65536), B: int = 8, H: int = 16, K: int = 128, dtype=torch.bfloat16) -> list[dict]:
    if not torch.cuda.is_available():
        raise RuntimeError("python -m linattn.bench decode needs a CUDA GPU")
    rows = []
    contenders = {"ours fused_recurrent GDN": ours, "ours fused_recurrent VLA": ours_vla, "sdpa + KV cache": sdpa}
    for L in contexts:
        for name, fn in contenders.items():
            row = {"contender": name, "context": L, "B": B, "H": H, "K": K}
            try:
                row |= fn(B, L, H, K, dtype)
            except Exception as e:  # a contender that cannot run here says why, the others go on
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            finally:
                torch.cuda.empty_cache()
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: per-step time and kept memory per sequence, with ours / SDPA at the same context."""
    ref = {r["context"]: r.get("ms") for r in rows if r["contender"].startswith("sdpa")}
    lines = ["| context | contender | step ms | SDPA / this | MiB kept per sequence |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        if "ms" not in r:
            lines.append(f"| {r['context']} | {r['contender']} | {r['error']} |||")
            continue
        speedup = f"{ref[r['context']] / r['ms']:.1f}×" if ref.get(r["context"]) else "—"
        lines.append(
            f"| {r['context']} | {r['contender']} | {r['ms']:.4f} | {speedup} | {r['state_mib_per_seq']:.2f} |"
        )
    return "\n".join(lines)
