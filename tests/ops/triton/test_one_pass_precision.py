"""The one-tf32-pass products (`ops/utils/precision.py`) against docs/design.md §4's rule, with Hopper's
arithmetic emulated in the interpreter (`hopper_arithmetic.py`; on a GPU the hardware's own): the cases of
`python -m linattn.bench verify` that take those products, run the way `verify` runs them."""

from __future__ import annotations

import contextlib

import pytest
import torch
import triton
import triton.language as tl

from linattn.bench.verify import Case, check
from linattn.ops.delta_rule.triton.precision import apply_precision, backward_precision, narrow_launch
from linattn.ops.utils.precision import ONE_PASS_TOKENS, grad_precision, raw_operands, state_precision
from tests.ops.cases import rel_err
from tests.ops.triton.hopper_arithmetic import hopper_arithmetic
from tests.ops.triton.test_delta_rule_fwd import DEVICE

BF16 = torch.bfloat16


@triton.jit
def _products(a, b, one, three, rounded):
    """`[16, 16]` float32 tiles: their product in one and in three tf32 passes, and `a` stored as bfloat16."""
    o = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    x, y = tl.load(a + o), tl.load(b + o)
    tl.store(one + o, tl.dot(x, y, input_precision="tf32"))
    tl.store(three + o, tl.dot(x, y, input_precision="tf32x3"))
    tl.store(rounded + o, x)


def _stages(p) -> set[str]:
    """The precisions of a `BackwardPrecision`'s four stages."""
    return {p.wy, p.state, p.walk, p.local}


def _arithmetic():
    return hopper_arithmetic() if DEVICE.type == "cpu" else contextlib.nullcontext()


@pytest.mark.parametrize(
    "case",
    [
        Case(ONE_PASS_TOKENS, 64, 64, BF16, H=1, final_state=False),  # GDN: one pass forward (state) and backward
        Case(ONE_PASS_TOKENS, 64, 64, BF16, H=1, two_key=True, final_state=False),
        Case(ONE_PASS_TOKENS, 32, 32, BF16, H=1, op="vla", final_state=False),  # float32 keys: forward state only
        # no initial state: one pass also in the backward's B1 and B3 (its derived keys)
        Case(ONE_PASS_TOKENS, 32, 32, BF16, H=1, op="vla", initial_state=False, final_state=False),
        Case(ONE_PASS_TOKENS, 32, 32, BF16, H=1, op="ccq", initial_state=False, final_state=False),
        # from K = 64 the one-pass output kernel takes 64 columns a program (`ccq/triton/output.py`)
        Case(ONE_PASS_TOKENS, 64, 64, BF16, H=1, op="ccq", initial_state=False, final_state=False),
        # GLA's per-channel kernels: every product in one pass, forward and backward
        Case(ONE_PASS_TOKENS, 64, 64, BF16, H=1, op="gla", initial_state=False, final_state=False),
    ],
    ids=lambda c: c.label,
)
def test_one_pass_within_twice_naive(case):
    with _arithmetic():
        row = check(case, "triton", DEVICE)
    assert row["ok"], {k: v for k, v in row.items() if isinstance(v, float)}


def test_gla_takes_one_pass_only_in_a_bfloat16_training_call(monkeypatch):
    """GLA's products follow the engine's rule: one pass forward for a bfloat16 `o` alone, backward for bfloat16
    tokens and no final state's gradient; a final state keeps three (one errs 3.6e-4 on it, Hopper emulated). The
    rule's token threshold lowered to one chunk: which precision each call gets is the test, not its error."""
    import importlib

    function = importlib.import_module("linattn.ops.linear_attention.triton.function")
    monkeypatch.setattr(importlib.import_module("linattn.ops.utils.precision"), "ONE_PASS_TOKENS", 64)
    seen = []
    output = function.gla_output
    monkeypatch.setattr(function, "gla_output", lambda *a, **k: seen.append(a[7]) or output(*a, **k))
    calls = ((BF16, False, "tf32"), (BF16, True, "tf32x3"), (torch.float32, False, "tf32x3"))
    for dtype, final_state, expected in calls:
        q, k, v = (torch.randn(1, 64, 1, 16, dtype=dtype, device=DEVICE).requires_grad_() for _ in "qkv")
        g = (-torch.rand(1, 64, 1, 16, device=DEVICE)).requires_grad_()
        seen.clear()
        o, ht = function.gla_triton(q, k, v, g, 1.0, None, final_state, None)
        (o.float().sum() + (ht.sum() if final_state else 0)).backward()
        assert seen == [expected, expected], (dtype, final_state, seen)


def test_backward_takes_one_pass_only_for_bfloat16_tokens_and_no_state_gradient():
    x = torch.zeros(1, ONE_PASS_TOKENS, 1, 8, dtype=BF16)
    tokens = (x, x, x, x, x)
    assert grad_precision(tokens, final_state_grad=False) == "tf32"
    assert grad_precision(tokens, final_state_grad=True) == "tf32x3"  # a float32 cotangent, exact in the naive run
    assert grad_precision((x[:, :-1],) * 5, final_state_grad=False) == "tf32x3"  # too short to matter (docstring)
    # VLA's float32 keys: one pass there erred 2.2 – 5.3× the naive recurrence's error (this emulation, T = 1000)
    assert grad_precision((x, x.float(), x, x.float(), x), final_state_grad=False) == "tf32x3"


def test_derived_keys_take_one_pass_in_two_stages_without_an_initial_state():
    """VLA's float32 `k̂`, `α̂` derived from bfloat16 tokens: one pass in B1 and B3 only, and not with an initial
    state; other calls take one precision for every stage."""
    x = torch.zeros(1, ONE_PASS_TOKENS, 1, 8, dtype=BF16)
    split = backward_precision((x, x, x), final_state_grad=False, derived_keys=True)
    assert (split.wy, split.state, split.walk, split.local) == ("tf32x3", "tf32", "tf32x3", "tf32")
    assert _stages(backward_precision((x, x, x), False, derived_keys=True, initial_state=True)) == {"tf32x3"}
    assert _stages(backward_precision((x,) * 5, final_state_grad=False)) == {"tf32"}
    assert grad_precision((x.half(),) * 5, final_state_grad=False) == "tf32x3"


def test_forward_rows_and_outputs_take_one_pass_only_beside_a_one_pass_state_and_16_bit_keys():
    one = state_precision(BF16, output_final_state=False)
    assert one == "tf32" and state_precision(BF16, output_final_state=True) == "tf32x3"
    assert apply_precision(one, BF16, BF16) == "tf32"
    # VLA's float32 k̂, α̂: one pass puts its bfloat16 o at 4.1 – 4.4× the naive recurrence's error in stage 2, 1.7× in
    # stage 4 (`python -m linattn.bench verify --ops vla`)
    assert apply_precision(one, torch.float32, torch.float32) == "tf32x3"
    assert apply_precision("tf32x3", BF16, BF16) == "tf32x3"


def test_only_sixteen_bit_keys_take_the_narrow_launch():
    assert narrow_launch(BF16, BF16) and narrow_launch(torch.float16)
    # VLA's float32 α̂ beside bfloat16 queries: two warps make its K = 128 forward + backward 7% slower (`narrow_launch`)
    assert not narrow_launch(BF16, torch.float32)


def test_raw_products_of_one_16_bit_dtype_multiply_as_loaded():
    """Two raw 16-bit inputs multiply on the 16-bit tensor cores (exact products), but bfloat16 on the CPU keeps
    float32 copies, as the interpreter's bfloat16 products are wrong; float16 runs the native path in the interpreter
    (the float16 cases of the op tests check it against the naive recurrence)."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert raw_operands(cpu, torch.float16, torch.float16) == raw_operands(cuda, BF16, BF16) == "native"
    assert raw_operands(cpu, BF16, BF16) == "tf32"
    assert raw_operands(cuda, BF16, torch.float32) == raw_operands(cuda, torch.float32) == "tf32x3"
    assert raw_operands(cuda, BF16, torch.float16) == "tf32"  # one tensor-core dtype per product


@pytest.mark.skipif(DEVICE.type != "cpu", reason="the emulation patches the interpreter")
def test_emulation_rounds_as_the_tensor_cores_do():
    a, b = torch.randn(16, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64)
    one, three, rounded = torch.empty(16, 16), torch.empty(16, 16), torch.empty(16, 16, dtype=BF16)
    with hopper_arithmetic():
        _products[(1,)](a.float(), b.float(), one, three, rounded)
    exact = a.float().double() @ b.float().double()
    assert 1e-4 < rel_err(one, exact) < 2e-3  # ten mantissa bits
    assert rel_err(three, exact) < 1e-6  # about float32's
    assert torch.equal(rounded, a.float().to(BF16))  # round to nearest even, as torch does
