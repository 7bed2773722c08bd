"""`python -m linattn.bench cpu|gate|ops|verify|decode|stages|profile|train-step|fuzz [--json FILE]`: benchmarks, as
markdown tables.

- `cpu`: the chunk backend against the naive token loop on the CPU, forward and forward + backward.
- `gate`: VLA's gate at T = 64K and 1M (d = 32, 128): float32 against float64, finite, unit-norm (CPU or GPU).
- `ops`: on a CUDA GPU, our backends beside SDPA (flash) and flash-linear-attention, bf16, B=1 H=16 K=V=128,
  T = 2K…64K plus a B·T = 64K sweep, with roofline fractions against this GPU's measured ceilings.
- `verify`: on a CUDA GPU, a backend's correctness matrix against float64 (dtypes, lengths, head sizes, options).
- `decode`: on a CUDA GPU, one token's step at context 4K / 32K / 64K (B=8): our fused recurrent step vs SDPA
  reading a KV cache.
- `stages`: on a CUDA GPU, each kernel of the Triton delta rule's forward and backward timed on its own.
- `profile`: one `vla-speed` contender's (or on CUDA one `ops` contender's) kernels by time and (CUDA) its tensors
  alive at the memory peak.
- `train-step`: on a CUDA GPU, a tiny model's whole training step (the VLA paper's TinyLM on MQAR, or an
  experiment's runs), eager and replayed from CUDA graphs, alone and as N processes at once (as `linattn run
  --jobs N` shares a GPU).
- `fuzz`: for `--seconds`, random valid inputs (each op's documented domain) and invalid ones to every op and layer
  (CPU or GPU, every backend there); the findings (an unclear error, a non-finite output, backends that disagree
  beyond the contract) with code reproducing each. Exit status 1 if there are any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from linattn.bench.environment import describe, mps_running
from linattn.bench.verify import OPS as VERIFY_OPS
from linattn.io import write_atomic
from linattn.ops.checks import PRECISIONS


def _positive(kind: type):
    """An argparse type: a number of `kind` > 0 (argparse names the option in its error)."""

    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m linattn.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_cpu = sub.add_parser("cpu", help="chunk vs naive backend on the CPU, forward and forward+backward")
    p_cpu.add_argument("--T", type=_positive(int), default=2048, help="sequence length (default 2048)")
    p_cpu.add_argument("--H", type=_positive(int), default=4, help="heads (default 4)")
    p_cpu.add_argument("--K", type=_positive(int), default=64, help="head dim, keys and values (default 64)")
    p_cpu.add_argument("--min-run-time", type=_positive(float), default=2.0, help="seconds per measurement (default 2)")
    p_gate = sub.add_parser("gate", help="VLA's gate at 64K and 1M tokens against float64 (CPU or GPU)")
    p_gate.add_argument("--device", default="cpu", help="'cpu' (default) or 'cuda'")
    p_gate.add_argument(
        "--lengths", type=lambda s: [int(x) for x in s.split(",")], default=[65536, 1 << 20],
        help="comma-separated sequence lengths (default 65536,1048576)",
    )  # fmt: skip
    p_gate.add_argument("--head-dims", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128],
                        help="comma-separated head dims (default 32,128)")  # fmt: skip
    p_gate.add_argument("--rho", type=float, default=1.0, help="the gate's forgetting factor (default 1: none)")
    p_gate.add_argument(
        "--conditioning", action="store_true", help="the float32 error against ||u||^2 / lam0 instead (T = 512)"
    )
    p_ops = sub.add_parser("ops", help="GPU: ours vs SDPA vs fla, bf16, forward and forward+backward")
    p_ops.add_argument(
        "--batch-sweep", action=argparse.BooleanOptionalAction, default=True, help="also B·T = 64K (B = 4, 16, 64)"
    )
    p_ops.add_argument(
        "--only", help="comma-separated: only the contenders whose name contains one of these (SDPA always runs)"
    )
    p_ops.add_argument(
        "--table-from", metavar="FILE", help="print the table of a run saved with --json (no GPU), fractions recomputed"
    )
    p_verify = sub.add_parser("verify", help="GPU: a backend's errors against float64 over the full matrix")
    p_verify.add_argument(
        "--backend",
        default="triton",
        help="backend under test (default triton; 'fla': fla 0.6 on the GDN cases, forward only, and on them "
        "without the decay, DeltaNet's forward and backward)",
    )
    p_verify.add_argument("--jobs", type=int, default=1, help="processes sharing the GPU (default 1)")
    p_verify.add_argument("--quick", action="store_true", help="a screening subset (about a fifth of the cases)")
    p_verify.add_argument(
        "--ops", default=",".join(VERIFY_OPS), help="comma-separated: only these ops' cases (default all)"
    )
    p_verify.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="exact",
        help="the level under test and its contract (default exact; fast: the ops that take the keyword)",
    )
    p_decode = sub.add_parser("decode", help="GPU: per-token decode step, ours vs SDPA with a KV cache")
    p_stages = sub.add_parser("stages", help="GPU: each Triton delta-rule kernel (or VLA gate step) on its own")
    p_stages.add_argument("--op", choices=("delta_rule", "vla-gate"), default="delta_rule", help="what to profile")
    p_stages.add_argument("--K", type=int, default=128, help="head dim of the vla-gate profile (default 128)")
    p_stages.add_argument("--device", default="cuda", help="'cuda' (default), or 'cpu' for --op vla-gate")
    p_stages.add_argument("--batch", type=int, default=1, help="delta_rule: sequences of each length at once")
    p_stages.add_argument("--heads", type=_positive(int), default=16, help="delta_rule: heads (default 16)")
    p_stages.add_argument(
        "--precision", choices=PRECISIONS, default="exact", help="delta_rule: the level (default exact)"
    )
    p_stages.add_argument(
        "--segments", type=_positive(int), default=None,
        help="delta_rule: segments a sequence in the state passes (1: the one pass; default: the library's choice)",
    )  # fmt: skip
    p_stages.add_argument(
        "--value-block", type=int, choices=(16, 32, 64), default=None,
        help="delta_rule: value columns a state walk's program owns, within each walk's tile limits (the backward's "
        "at most 32) and even where the library keeps 16 (default: the library's choice)",
    )  # fmt: skip
    p_prof = sub.add_parser("profile", help="a contender's kernels by time, and its memory at the peak")
    p_prof.add_argument(
        "--contenders", default="VLA triton", help="comma-separated vla-speed contenders (CUDA: or ops contenders)"
    )
    p_prof.add_argument("--K", type=lambda s: [int(x) for x in s.split(",")], default=[128], help="head dims")
    p_prof.add_argument("--passes", default="fwd,fwdbwd", help="comma-separated: fwd, fwdbwd (default both)")
    p_prof.add_argument("--device", default="cuda", help="'cuda' (default) or 'cpu'")
    p_prof.add_argument("--host", action="store_true", help="also the host's Python functions, and GPU waits (CUDA)")
    for p, lengths in (
        (p_prof, [4096, 65536]),
        (p_ops, [2048, 4096, 8192, 16384, 32768, 65536]),
        (p_stages, [8192, 65536]),
    ):
        p.add_argument(
            "--lengths",
            type=lambda s: [int(x) for x in s.split(",")],
            default=lengths,
            help=f"comma-separated sequence lengths at B=1 (default {','.join(map(str, lengths))})",
        )
    p_step = sub.add_parser("train-step", help="GPU: a tiny model's training step, eager vs CUDA graphs, N at once")
    p_step.add_argument("--mixers", default="gated_deltanet,vla,softmax", help="comma-separated `linattn run` mixers")
    p_step.add_argument(
        "--processes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16],
        help="comma-separated counts of processes training at once (default 1,16)",
    )  # fmt: skip
    p_step.add_argument("--steps", type=_positive(int), default=300, help="steps a process (default 300, ≥ 100)")
    p_step.add_argument(
        "--experiment", default=None,
        help="train each mixer's first run of this `linattn run` experiment (default: the TinyLM on MQAR, n = 24)",
    )  # fmt: skip
    p_fuzz = sub.add_parser("fuzz", help="random valid and invalid inputs to every op and layer; findings")
    p_fuzz.add_argument("--seconds", type=_positive(float), default=60.0, help="how long to fuzz (default 60)")
    p_fuzz.add_argument("--device", default="cpu", help="'cpu' (default: naive, chunk) or 'cuda' (also triton, …)")
    p_fuzz.add_argument("--seed", type=int, default=0, help="the cases drawn depend on it alone (default 0)")
    for p in (p_cpu, p_gate, p_ops, p_verify, p_decode, p_stages, p_prof, p_step):
        p.add_argument("--json", metavar="FILE", help="also write the rows and environment as JSON")
    p_fuzz.add_argument("--json", metavar="FILE", help="also write the counts and findings as JSON")
    args = parser.parse_args(argv)

    if args.command == "fuzz":
        return _fuzz(args)

    if args.command == "ops" and args.table_from:
        from linattn.bench import ops

        try:
            saved = json.loads(Path(args.table_from).read_text())
            print(ops.table_from(saved))
        except (OSError, ValueError, KeyError) as e:
            print(f"python -m linattn.bench ops: error: --table-from {args.table_from}: {e!r}", file=sys.stderr)
            return 2
        return 0
    if args.command == "cpu":
        from linattn.bench import cpu

        env = describe("cpu")
        shape = {"B": 1, "H": args.H, "K": args.K, "V": args.K, "T": args.T, "dtype": "float32"}
        print(f"# linattn CPU benchmark: B=1, H={args.H}, K=V={args.K}, T={args.T}, float32")
        print("# " + ", ".join(f"{k}: {v}" for k, v in env.items()))
        rows = cpu.run(T=args.T, H=args.H, K=args.K, V=args.K, min_run_time=args.min_run_time)
        print(cpu.table(rows))
        extra = {"shape": shape}
    else:
        import torch

        device = getattr(args, "device", "cuda")
        allowed = (
            ("cpu", "cuda")
            if args.command in ("gate", "profile") or getattr(args, "op", None) == "vla-gate"
            else ("cuda",)
        )
        if device not in allowed:
            print(f"python -m linattn.bench {args.command}: error: --device: expected one of {allowed}, got {device!r}",
                  file=sys.stderr)  # fmt: skip
            return 2
        if device == "cuda" and not torch.cuda.is_available():
            print(f"python -m linattn.bench {args.command}: error: needs a CUDA GPU (none is visible)", file=sys.stderr)
            return 2
        env = describe(device)
    if args.command == "gate":
        from linattn.bench import gate

        if args.conditioning:
            print("# linattn VLA gate, float32 error against its conditioning: B=1, H=1, T=512, lam0=0.1; "
                  + ", ".join(f"{k}: {v}" for k, v in env.items()))  # fmt: skip
            rows = gate.conditioning_run(device, head_dims=args.head_dims)
            print(gate.conditioning_table(rows))
        else:
            print(f"# linattn VLA gate at length: B=1, H=1, lam0=0.1, rho={args.rho:g}; "
                  + ", ".join(f"{k}: {v}" for k, v in env.items()))  # fmt: skip
            rows = gate.run(device, head_dims=args.head_dims, lengths=args.lengths, rho=args.rho)
            print(gate.table(rows))
        extra = {}
    elif args.command == "verify":
        from linattn.bench import verify

        print(
            f"# linattn verify: backend {args.backend}, precision {args.precision}, against float64; "
            + ", ".join(f"{k}: {v}" for k, v in env.items())
        )
        ops = tuple(args.ops.split(","))
        rows = verify.run(args.backend, jobs=args.jobs, quick=args.quick, ops=ops, precision=args.precision)
        print(verify.table(rows, args.precision))
        extra = {"backend": args.backend, "precision": args.precision}
    elif args.command == "ops":
        from linattn.bench import ops

        print("# linattn GPU op benchmark: bf16, H=16, K=V=128; " + ", ".join(f"{k}: {v}" for k, v in env.items()))
        limits, rows = ops.run(
            lengths=args.lengths,
            batch_sweep=ops.BATCH_SWEEP if args.batch_sweep else (),
            only=tuple(args.only.split(",")) if args.only else (),
        )
        print(
            f"# ceilings measured now: copy {limits['bandwidth'] / 1e12:.2f} TB/s, "
            f"bf16 matmul {limits['bf16_flops'] / 1e12:.0f} TFLOP/s"
        )
        print(ops.table(rows))
        extra = {"ceilings": limits}
    elif args.command == "decode":
        from linattn.bench import decode

        print(
            "# linattn GPU decode benchmark: bf16, B=8, H=16, K=V=128; "
            + ", ".join(f"{k}: {v}" for k, v in env.items())
        )
        rows = decode.run()
        print(decode.table(rows))
        extra = {}
    elif args.command == "stages":
        from linattn.bench import stages

        what = (
            f"VLA chunk gate, float32, B=1, H=16, K={args.K}"
            if args.op == "vla-gate"
            else f"Triton delta rule, GDN configuration, bf16, B={args.batch}, H={args.heads}, K=V=128, "
            f"{args.precision}"
            + ("" if args.segments is None else f", {args.segments} segments")
            + ("" if args.value_block is None else f", value blocks of {args.value_block}")
        )
        print(f"# linattn stage profile: {what}; " + ", ".join(f"{k}: {v}" for k, v in env.items()))
        rows = stages.run(
            args.lengths, op=args.op, K=args.K, device=device, batch=args.batch, heads=args.heads,
            precision=args.precision, segments=args.segments, value_block=args.value_block,
        )  # fmt: skip
        print(stages.table(rows))
        extra = {}
    elif args.command == "train-step":
        from linattn.bench import train_step

        mps = "an MPS daemon's pipe" if mps_running() else "no MPS daemon"
        shape = (
            f"vla-tinylm on MQAR (n = {train_step.N_PAIRS}, {train_step.ROWS} rows)" if args.experiment is None
            else f"{args.experiment}'s first run of each mixer"
        )  # fmt: skip
        print(f"# linattn training step: {shape}, bf16 autocast, {args.steps} steps a process, {mps}; "
              + ", ".join(f"{k}: {v}" for k, v in env.items()))  # fmt: skip
        try:
            rows = train_step.run(args.mixers.split(","), args.processes, args.steps, args.experiment)
        except ValueError as e:
            print(f"python -m linattn.bench train-step: error: {e}", file=sys.stderr)
            return 2
        print(train_step.table(rows))
        extra = {"mps": mps_running(), "steps": args.steps, "experiment": args.experiment}
    elif args.command == "profile":
        from linattn.bench import profile

        print("# linattn profile; " + ", ".join(f"{k}: {v}" for k, v in env.items()))
        rows = []
        for name in args.contenders.split(","):
            for K in args.K:
                for T in args.lengths:
                    for pass_ in args.passes.split(","):
                        rows.append(profile.run(name, T, K, pass_, device, with_host=args.host))
                        print(profile.table(rows[-1]) + "\n", flush=True)
        extra = {}
    if args.json:
        write_atomic(args.json, json.dumps({"environment": env, **extra, "rows": rows}, indent=2))
    return 0


def _fuzz(args: argparse.Namespace) -> int:
    """The `fuzz` command: 0 without findings, 1 with, 2 for a device that is not there."""
    import torch

    from linattn.bench import fuzz

    if args.device not in ("cpu", "cuda"):
        print(f"python -m linattn.bench fuzz: error: --device: expected 'cpu' or 'cuda', got {args.device!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("python -m linattn.bench fuzz: error: --device cuda needs a CUDA GPU (none is visible)", file=sys.stderr)
        return 2
    report = fuzz.fuzz(args.seconds, device=args.device, seed=args.seed)
    print(report.markdown())
    if args.json:
        write_atomic(args.json, json.dumps({"environment": describe(args.device), **report.to_json()}, indent=2))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
