"""Scratch (session 19): one GDN forward + backward (bf16, B = 1, H = 16, K = V = 128, T from argv) and one VLA
forward at d = 128, T = 4K, between cudaProfilerStart/Stop for `ncu --profile-from-start off`."""
import sys
import torch
from linattn.ops.delta_rule import delta_rule
from linattn.ops.vla import vla

T = int(sys.argv[1])
dev, bf = "cuda", torch.bfloat16
torch.manual_seed(0)
B, H, K = 1, 16, 128
q = torch.randn(B, T, H, K, device=dev, dtype=bf, requires_grad=True)
k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device=dev), dim=-1).to(bf).requires_grad_()
v = torch.randn(B, T, H, K, device=dev, dtype=bf, requires_grad=True)
beta = torch.rand(B, T, H, device=dev, requires_grad=True)
g = (-0.1 * torch.rand(B, T, H, device=dev)).requires_grad_()
T2 = 4096
x = {n: torch.randn(B, T2, H, K, device=dev, dtype=bf) for n in "qkvu"}
x["u"] = torch.nn.functional.normalize(x["u"].float(), dim=-1).to(bf) / K**0.5

def run():
    o, _ = delta_rule(q, k, v, beta=beta, g=g, backend="triton")
    o.backward(torch.randn_like(o))
    with torch.no_grad():
        vla(x["q"], x["k"], x["v"], x["u"], backend="triton")

run(); run(); torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
run(); torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")
