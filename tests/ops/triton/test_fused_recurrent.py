"""The fused recurrent decode kernel against the naive recurrences (Triton's interpreter on CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from linattn.ops.delta_rule import kaczmarz_beta
from linattn.ops.delta_rule.naive import naive_delta_rule
from linattn.ops.delta_rule.triton.fused_recurrent import fused_recurrent
from linattn.ops.linear_attention.naive import naive_gated_linear_attention
from tests.ops.cases import rel_err
from tests.ops.triton.test_delta_rule_fwd import FLOOR, INTERPRETED_BF16_ROUNDING


def inputs(B, T, H, K, V, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)
    return {
        "q": r(B, T, H, K).to(dtype),
        "k": F.normalize(r(B, T, H, K), dim=-1).to(dtype),
        "v": r(B, T, H, V).to(dtype),
        "w": F.normalize(r(B, T, H, K), dim=-1).to(dtype),
        "beta": torch.rand(B, T, H, generator=gen),
        "g": -torch.rand(B, T, H, generator=gen),
        "gk": -torch.rand(B, T, H, K, generator=gen),
        "h0": r(B, H, K, V),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(("K", "V"), [(16, 8), (32, 48), (96, 40)])
@pytest.mark.parametrize("config", ["deltanet", "gdn-two-key", "kla", "linear", "gla"])
def test_matches_naive(config, K, V, dtype):
    """KLA: raw keys (norms from 0.1√K to 5√K), the step `β = η / (‖k‖² + ε)` formed in the kernel."""
    B, T, H = 2, 3, 2
    x = inputs(B, T, H, K, V, dtype)
    kaczmarz_eps = 1e-6 if config == "kla" else None
    if kaczmarz_eps is not None:
        scales = torch.linspace(0.1, 5, B * T * H).reshape(B, T, H, 1)
        x["k"] = (torch.randn(B, T, H, K, generator=torch.Generator().manual_seed(1)) * scales).to(dtype)
    erase = config in ("deltanet", "gdn-two-key", "kla")
    w = x["w"] if config == "gdn-two-key" else None
    beta = x["beta"] if erase else None
    g = {"deltanet": None, "gdn-two-key": x["g"], "kla": x["g"], "linear": None, "gla": x["gk"]}[config]
    o, ht = fused_recurrent(
        x["q"],
        x["k"],
        x["v"],
        w=w,
        beta=beta,
        g=g,
        erase=erase,
        kaczmarz_eps=kaczmarz_eps,
        scale=K**-0.5,
        initial_state=x["h0"],
        output_final_state=True,
    )

    def naive(x):
        beta = None if not erase else x["beta"]
        if kaczmarz_eps is not None:
            beta = kaczmarz_beta(x["k"], x["beta"], kaczmarz_eps)
        if erase:
            gate = None if g is None else x["g"]
            args = (x["q"], x["k"], x["v"], None if w is None else x["w"], beta, gate, x["h0"])
            return naive_delta_rule(*args, scale=K**-0.5)
        gate = None if g is None else x["gk"]
        return naive_gated_linear_attention(x["q"], x["k"], x["v"], gate, x["h0"], scale=K**-0.5)

    want = naive({n: t.double() for n, t in x.items()})
    assert o.dtype == dtype and ht.dtype == torch.float32
    # docs/design.md §4: within 2× the naive recurrence's own error in the same dtype (o in that dtype, float32 states
    # both); the interpreter truncates where a GPU rounds o to bfloat16 (`INTERPRETED_BF16_ROUNDING`)
    own_o, own_h = naive(x)
    rounding = INTERPRETED_BF16_ROUNDING if dtype == torch.bfloat16 else 1.0
    for ours, own, ref, factor in zip((o, ht), (own_o.to(dtype), own_h), want, (rounding, 1.0)):
        bound = max(2 * factor * rel_err(own, ref), FLOOR)
        assert rel_err(ours, ref) <= bound, f"{config} {dtype}: {rel_err(ours, ref):.2e} > {bound:.2e}"


def test_varlen_and_no_state():
    K, V = 16, 16
    x = inputs(1, 7, 2, K, V, torch.float32)
    cu = torch.tensor([0, 1, 4, 7])
    o, ht = fused_recurrent(
        x["q"], x["k"], x["v"], beta=x["beta"], g=x["g"], scale=0.25, output_final_state=True, cu_seqlens=cu
    )
    for i, (bos, eos) in enumerate([(0, 1), (1, 4), (4, 7)]):
        sl = {n: x[n][:, bos:eos] for n in ("q", "k", "v", "beta", "g")}
        want_o, want_h = naive_delta_rule(sl["q"], sl["k"], sl["v"], None, sl["beta"], sl["g"], None, scale=0.25)
        assert rel_err(o[:, bos:eos], want_o) < 2e-6 and rel_err(ht[i : i + 1], want_h) < 2e-6
    o2, none = fused_recurrent(x["q"], x["k"], x["v"], scale=0.25)
    assert none is None and torch.isfinite(o2).all()


def test_public_backend_and_its_errors():
    from linattn.ops import delta_rule, gated_linear_attention, linear_attention

    x = inputs(2, 5, 2, 16, 8, torch.float32)
    with torch.no_grad():
        got = delta_rule(
            x["q"],
            x["k"],
            x["v"],
            beta=x["beta"],
            g=x["g"],
            initial_state=x["h0"],
            output_final_state=True,
            backend="fused_recurrent",
        )
        want = delta_rule(
            x["q"],
            x["k"],
            x["v"],
            beta=x["beta"],
            g=x["g"],
            initial_state=x["h0"],
            output_final_state=True,
            backend="naive",
        )
        assert rel_err(got[0], want[0]) < 2e-6 and rel_err(got[1], want[1]) < 2e-6
        q, k = x["q"].abs(), x["k"].abs()
        got = linear_attention(q, k, x["v"], normalize=True, output_final_state=True, backend="fused_recurrent")
        want = linear_attention(q, k, x["v"], normalize=True, output_final_state=True, backend="naive")
        assert rel_err(got[0], want[0]) < 2e-6 and rel_err(got[1][1], want[1][1]) < 2e-6
        got, _ = gated_linear_attention(q, k, x["v"], x["gk"], backend="fused_recurrent")
        assert rel_err(got, gated_linear_attention(q, k, x["v"], x["gk"], backend="naive")[0]) < 2e-6
    with pytest.raises(ValueError, match="forward-only"):
        delta_rule(x["q"].requires_grad_(), x["k"], x["v"], backend="fused_recurrent")
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        delta_rule(x["q"].double().detach(), x["k"].double(), x["v"].double(), backend="fused_recurrent")
