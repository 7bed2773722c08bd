"""Session 20 scratch: CCQ's rows and local backward kernels on other warp counts at K = 32 (bench profile of
CCQ-GDN, 64K, fwd+bwd). argv: rows_warps local_warps json."""
import sys

from linattn.bench.__main__ import main
from linattn.ops.ccq.triton import function
from linattn.ops.ccq.triton import local_bwd as lbm

rows_w, local_w, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def with_warps(fn, n):
    def call(*a, **k):
        lbm.LAUNCH_WARPS = n
        try:
            return fn(*a, **k)
        finally:
            lbm.LAUNCH_WARPS = 4
    return call


function.rows_bwd = with_warps(function.rows_bwd, rows_w)
function.local_bwd = with_warps(function.local_bwd, local_w)
main(["profile", "--contenders", "CCQ-GDN", "--K", "32", "--lengths", "65536", "--passes", "fwdbwd", "--json", out])
