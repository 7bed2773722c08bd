"""Scratch (session 25): one CCQ forward + backward (`ccq_query`, decayed, centred, bf16, B = 1, H = 16, unit keys,
T = 16K) at K = 32 and at K = 128, between cudaProfilerStart/Stop for `ncu --profile-from-start off`."""

import torch
import torch.nn.functional as F

from linattn.ops import ccq_query

T, H = 16384, 16
torch.manual_seed(0)
calls = []
for K in (32, 128):
    q = torch.randn(1, T, H, K, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = F.normalize(torch.randn(1, T, H, K, device="cuda"), dim=-1).bfloat16().requires_grad_()
    g = (-0.1 * torch.rand(1, T, H, device="cuda")).requires_grad_()
    lam = torch.rand(1, T, H, device="cuda", requires_grad=True)
    dy = torch.randn_like(q)
    calls.append(lambda q=q, k=k, g=g, lam=lam, dy=dy: ccq_query(q, k, lam, g=g, normalize_keys=False)[0].backward(dy))
for _ in range(2):
    for call in calls:
        call()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for call in calls:
    call()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")
