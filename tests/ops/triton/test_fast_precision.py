"""The `precision="fast"` level of the delta-rule engine (docs/design.md §4): bfloat16 intermediates and tensor-core
products, held to its own contract (outputs and gradients within 3× the naive recurrence's error, final states
within bfloat16's rounding) with Hopper's arithmetic emulated in the interpreter (`hopper_arithmetic.py`), run the
way `python -m linattn.bench verify --precision fast` runs them."""

from __future__ import annotations

import contextlib
import importlib

import pytest
import torch

from linattn.bench.verify import Case, bound, check
from linattn.ops import ccq_query, delta_rule, linear_attention, vla
from linattn.ops.delta_rule.triton.forward import delta_rule_fwd
from linattn.ops.delta_rule.triton.precision import backward_precision
from linattn.ops.utils import precision
from linattn.ops.utils.precision import fast_precision
from tests.ops.triton.hopper_arithmetic import hopper_arithmetic
from tests.ops.triton.test_delta_rule_fwd import DEVICE

BF16 = torch.bfloat16


def _arithmetic():
    return hopper_arithmetic() if DEVICE.type == "cpu" else contextlib.nullcontext()


@pytest.mark.parametrize(
    "case",
    [
        Case(130, 32, 48, BF16),  # GDN with an initial state, T not a multiple of the chunk
        Case(130, 32, 32, BF16, gated=False, initial_state=False),  # DeltaNet
        # at T = 97 its dg came just past the bound: the short-call noise that makes the fast backward start at
        # ONE_PASS_TOKENS tokens
        Case(130, 32, 32, BF16, two_key=True),
        Case(0, 32, 32, BF16, varlen=(1, 63, 64, 65, 100)),  # packed: chunks never straddle a sequence
        Case(130, 32, 32, BF16, final_state=False, cut=True),  # the backward cut in two, as from 32K tokens
        Case(130, 32, 32, BF16, op="kla"),
        Case(130, 48, 32, BF16, erase=False),  # scalar-decay GLA on the same kernels
        Case(130, 32, 32, BF16, erase=False, gated=False, varlen=(30, 100)),  # linear attention
        Case(130, 32, 32, BF16, op="ccq"),  # CCQ's sums at the chunk boundaries in bfloat16, with both states
        Case(130, 48, 48, BF16, op="ccq", initial_state=False, final_state=False),  # as in training (kept states)
        Case(0, 32, 32, BF16, op="ccq", varlen=(1, 63, 64, 65, 100)),
        Case(130, 32, 32, BF16, op="vla"),  # the gate's products in one tf32 pass, with both states
        Case(130, 48, 48, BF16, op="vla", initial_state=False, final_state=False),  # as in training
        Case(0, 32, 32, BF16, op="vla", varlen=(1, 63, 64, 65, 100)),
    ],
    ids=lambda c: c.label,
)
def test_fast_level_within_its_contract(case, monkeypatch):
    # the fast backward starts at ONE_PASS_TOKENS tokens (`fast_backward`): lowered so that these short calls take it
    monkeypatch.setattr(precision, "ONE_PASS_TOKENS", 1)
    with _arithmetic():
        row = check(case, "triton", DEVICE, precision="fast")
    assert row["ok"], {k: v for k, v in row.items() if isinstance(v, float)}


def test_fast_level_stores_bfloat16_intermediates():
    """What makes it faster: the WY factors it saves for the backward are bfloat16 (exact keeps float32)."""
    q, k, v = (torch.randn(1, 70, 2, 32, dtype=BF16, device=DEVICE) for _ in "qkv")
    for fast, dtype in ((True, BF16), (False, torch.float32)):
        _, _, saved = delta_rule_fwd(q, k, v, None, None, None, 1.0, None, False, None, fast=fast)
        assert saved.T_inv.dtype == dtype


def test_ccq_fast_level_stores_bfloat16_sums(monkeypatch):
    """CCQ's fast level: the chunk-boundary sums `C` in bfloat16 for bfloat16 inputs (float32 ones keep float32)."""
    function = importlib.import_module("linattn.ops.ccq.triton.function")
    stored = []
    original = function.state_fwd
    monkeypatch.setattr(function, "state_fwd", lambda *a: stored.append(a[-1]) or original(*a))
    lam = torch.rand(1, 70, 2, device=DEVICE)
    for dtype in (BF16, torch.float32):
        q, k = (torch.randn(1, 70, 2, 16, dtype=dtype, device=DEVICE) for _ in "qk")
        for level in ("exact", "fast"):
            ccq_query(q, k, lam, backend="triton", precision=level)
    assert stored == [torch.float32, BF16, torch.float32, torch.float32]


def test_vla_fast_level_takes_the_gate_in_one_tf32_pass(monkeypatch):
    """VLA's fast level: the gate kernel's products (forward and backward) in one tf32 pass for bfloat16 tokens; other
    dtypes, and the exact level, keep three."""
    gate = importlib.import_module("linattn.ops.vla.triton.gate")
    taken = []
    original = gate.triton_apply
    monkeypatch.setattr(gate, "triton_apply", lambda *a, **k: taken.append(k["precision"]) or original(*a, **k))
    for dtype in (BF16, torch.float32):
        q, k, v, x = (torch.randn(1, 40, 2, 16, dtype=dtype, device=DEVICE) for _ in "qkvx")
        # unit rows / √K, as the layer's: a well-conditioned start, which the gate kernel takes (no float64 head)
        u = torch.nn.functional.normalize(x, dim=-1) / 4
        q, k, v, u = (t.requires_grad_() for t in (q, k, v, u))
        for level in ("exact", "fast"):
            vla(q, k, v, u, backend="triton", precision=level)[0].sum().backward()
    assert taken == ["tf32x3"] * 2 + ["tf32"] * 2 + ["tf32x3"] * 4


def test_fast_level_changes_nothing_for_float32_and_float16():
    """float32 would lose its accuracy to tf32 and a float16 state could overflow: both keep the exact level."""
    assert fast_precision(DEVICE, torch.float32) is None and fast_precision(DEVICE, torch.float16) is None
    assert fast_precision(DEVICE, BF16) in ("bf16", "bf16-emulated")
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(1, 70, 2, 16, dtype=dtype, device=DEVICE)
        k = torch.nn.functional.normalize(x.float(), dim=-1).to(dtype)
        exact, fast = (delta_rule(x, k, x, backend="triton", precision=p)[0] for p in ("exact", "fast"))
        assert torch.equal(exact, fast)


def test_a_short_call_takes_the_exact_backward():
    """Below `ONE_PASS_TOKENS` tokens the fast level's backward is the exact one (the bound's ratio is noise there)."""
    short, long = (torch.zeros(1, n, 1, 8, dtype=BF16, device=DEVICE) for n in (precision.ONE_PASS_TOKENS - 1, 1000))
    assert backward_precision((short,) * 4, False, fast=True) == backward_precision((short,) * 4, False)
    assert backward_precision((long,) * 4, False, fast=True).store == BF16


def test_fast_bound_is_three_times_naive_and_a_state_its_rounding():
    assert bound("o", 1e-3, BF16, "exact") == 2e-3 and bound("o", 1e-3, BF16, "fast") == 3e-3
    assert bound("S", 1e-5, BF16, "fast") == 2.0**-8 and bound("dq", 1e-5, BF16, "fast") == pytest.approx(3e-5)


@pytest.mark.parametrize("op", [delta_rule, linear_attention, vla])
def test_precision_must_be_a_level(op):
    x = torch.randn(1, 4, 1, 8)
    with pytest.raises(ValueError, match=r"precision: expected one of \('exact', 'fast'\), got 'fastest'"):
        op(x, x, x, *([x] if op is vla else []), precision="fastest")
