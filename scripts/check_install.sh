#!/usr/bin/env bash
# The README's two install routes, each into a fresh venv with torch ($TORCH) installed first, then a smoke test:
#   pip install -e .                          (core only: torch, triton) — ops forward + backward, a layer, the CLI
#   pip install "linattn[hf] @ git+file://…"  (this checkout's HEAD, with the hf extra) — an HF model round trip
# Run from the repository root: `make install-check` (CI runs it after the test suite).
set -euo pipefail
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}  # as the Makefile: a CPU build, installed first
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh() {  # name: a venv with torch ($TORCH) installed first, so that the package's install never replaces it
  "$PYTHON" -m venv "$work/$1"
  "$work/$1/bin/pip" install -q --upgrade pip
  # shellcheck disable=SC2086  # $TORCH may hold pip options (--index-url …)
  "$work/$1/bin/pip" install -q $TORCH
}

fresh editable
"$work/editable/bin/pip" install -q -e "$root"
(cd "$work" && "$work/editable/bin/python" - <<'EOF'
import sys

import torch
import torch.nn.functional as F

from linattn.layers import build_layer
from linattn.ops import delta_rule

q, k, v = (torch.randn(1, 100, 2, 16, requires_grad=True) for _ in range(3))
o, S = delta_rule(q, F.normalize(k, dim=-1), v, beta=torch.rand(1, 100, 2), output_final_state=True)
o.sum().backward()
y, state = build_layer("kla", d_model=32, n_heads=2)(torch.randn(2, 10, 32))
assert torch.isfinite(o).all() and k.grad is not None and y.shape == (2, 10, 32)
for extra in ("tqdm", "matplotlib", "transformers"):
    assert extra not in sys.modules, f"the core imported {extra}, which is an extra"
print("editable install: ops, layers ok")
EOF
)
"$work/editable/bin/linattn" list > /dev/null
echo "editable install: linattn list ok"

fresh git
"$work/git/bin/pip" install -q "linattn[hf] @ git+file://$root"
(cd "$work" && "$work/git/bin/python" - <<'EOF'
import tempfile

import torch
from transformers import AutoModelForCausalLM

from linattn.models import preset
from linattn.models.hf import LinAttnConfig, LinAttnForCausalLM

model = LinAttnForCausalLM(LinAttnConfig.from_model_config(preset("debug", mixer="gated_deltanet")))
with tempfile.TemporaryDirectory() as d:
    model.save_pretrained(d)
    again = AutoModelForCausalLM.from_pretrained(d)
ids = torch.randint(0, 16, (1, 8))
assert torch.equal(model(ids).logits, again(ids).logits)
print("git install with [hf]: save_pretrained / AutoModelForCausalLM.from_pretrained ok")
EOF
)
