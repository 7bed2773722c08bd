"""Our naive delta rule agrees with flash-linear-attention's naive gated delta rule (a test-only dependency)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

from linattn.ops import delta_rule
from tests.ops.cases import rel_err


def test_naive_delta_rule_matches_fla():
    gen = torch.Generator().manual_seed(0)
    B, T, H, K, V = 2, 100, 3, 16, 24
    q = torch.randn(B, T, H, K, generator=gen)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    beta = torch.rand(B, T, H, generator=gen)
    g = -torch.rand(B, T, H, generator=gen) * 0.5
    S0 = torch.randn(B, H, K, V, generator=gen)
    want_o, want_S = naive_recurrent_gated_delta_rule(q, k, v, beta, g, initial_state=S0, output_final_state=True)
    for backend in ("naive", "chunk"):
        o, S = delta_rule(q, k, v, beta=beta, g=g, initial_state=S0, output_final_state=True, backend=backend)
        assert rel_err(o, want_o) < 1e-5
        assert rel_err(S, want_S) < 1e-5
