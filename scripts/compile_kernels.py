"""Compile every Triton kernel of linattn for an NVIDIA GPU on a machine without one: registers, spills, SASS size.

    python scripts/compile_kernels.py [--arch 90] [--out DIR] [--only NAME] [--record-python PYTHON]
                                      [--phase record|compile] [--launches FILE]

Two phases, two processes:
1. record: with `TRITON_INTERPRET=1`, run representative calls (forward + backward of the delta rule, KLA's
   in-kernel step, linear attention, GLA's per-channel decay, CCQ, VLA's gate and the decode kernel, at the head
   dims and dtypes users run) with the launchers choosing as for CUDA tensors (`_as_on_the_gpu`), and write down
   each kernel launch: its function, the dtype of every pointer, the type of every scalar, every constexpr and the
   launch options.
2. compile: without the interpreter, build each recorded signature with `triton.compile` for `cuda:<arch>` (the
   compiler needs no GPU), then run the wheel's own `ptxas -v` on the PTX for registers and spill bytes, and its
   `cuobjdump -sass` on the cubin for the number of SASS instructions (a loop body's share shows as a difference
   between two builds of the same launch) and of block-wide barriers (`BAR.SYNC`: reductions and layout changes
   across a program's warps). Each build's TTGIR is kept beside its PTX in `--out`: the layouts Triton chose for
   each tensor, where a barrier count is traced back to the reductions and layout conversions behind it.

Use it before spending GPU time: a kernel that does not compile, or that spills, shows here. The Triton version is
whatever is installed in the Python you run this with (install the GPU machine's, e.g. 3.6, in a scratch venv;
`--record-python .venv/bin/python` records with another one, should that Triton's interpreter be the better one).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # keywords of a launch, not of the kernel
_TYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64", "int32": "i32",
          "int64": "i64", "bool": "i1", "uint8": "u8"}  # fmt: skip


def _calls() -> None:
    """The representative calls whose launches are recorded (small T: the interpreter is slow)."""
    import torch

    from linattn.ops import ccq_query, delta_rule, gated_linear_attention, linear_attention, vla
    from linattn.ops.unit_rows.triton import UnitRowsTriton
    from linattn.ops.utils import precision

    # the backward takes one tf32 pass from ONE_PASS_TOKENS tokens (bfloat16, no final state's gradient): lowered
    # here so that the short calls below also record the launches a training step makes
    precision.ONE_PASS_TOKENS = 1
    torch.manual_seed(0)
    for dtype, K, V in ((torch.bfloat16, 128, 128), (torch.bfloat16, 256, 256), (torch.bfloat16, 96, 96),
                        (torch.float32, 128, 128), (torch.float16, 64, 64)):  # fmt: skip
        shape = (1, 70, 2)
        q, k, w = (torch.randn(*shape, K, dtype=dtype, requires_grad=True) for _ in range(3))
        v = torch.randn(*shape, V, dtype=dtype, requires_grad=True)
        beta = torch.rand(*shape, requires_grad=True)
        g = (-torch.rand(*shape)).requires_grad_()
        h0 = torch.randn(1, 2, K, V, requires_grad=True)
        for wk in (w, None):
            o, s = delta_rule(q, k, v, w=wk, beta=beta, g=g, initial_state=h0, output_final_state=True,
                              backend="triton")  # fmt: skip
            (o.float().sum() + s.sum()).backward()
        o, s = delta_rule(q, k, v, beta=beta, g=g, kaczmarz_eps=1e-6, initial_state=h0, output_final_state=True,
                          backend="triton")  # fmt: skip
        (o.float().sum() + s.sum()).backward()
        o, s = linear_attention(q, k, v, initial_state=h0, output_final_state=True, backend="triton")
        (o.float().sum() + s.sum()).backward()
        z0 = torch.rand(1, 2, K, requires_grad=True)
        o, (s, z) = linear_attention(q.abs(), k.abs(), v, normalize=True, initial_state=(h0, z0),
                                     output_final_state=True, backend="triton")  # fmt: skip
        (o.float().sum() + s.sum() + z.sum()).backward()
        o, _ = gated_linear_attention(q, k, v, g, backend="triton")
        o.float().sum().backward()
        gk = (-torch.rand(*shape, K) / 8).requires_grad_()  # GLA's per-channel decay: its own kernels
        o, s = gated_linear_attention(q, k, v, gk, initial_state=h0, output_final_state=True, backend="triton")
        (o.float().sum() + s.sum()).backward()
        o, _ = gated_linear_attention(q, k, v, gk, backend="triton")
        o.float().sum().backward()
        for wk in (w, None):  # training calls: `o` the only output
            o, _ = delta_rule(q, k, v, w=wk, beta=beta, g=g, backend="triton")
            o.float().sum().backward()
        if dtype == torch.bfloat16:  # the fast level: bfloat16 intermediates and products
            for wk in (w, None):
                o, _ = delta_rule(q, k, v, w=wk, beta=beta, g=g, backend="triton", precision="fast")
                o.float().sum().backward()
            o, _ = linear_attention(q, k, v, backend="triton", precision="fast")
            o.float().sum().backward()
        o, _ = delta_rule(q, k, v, beta=beta, g=g, kaczmarz_eps=1e-6, backend="triton")
        o.float().sum().backward()
        lam = torch.rand(*shape, requires_grad=True)
        state = tuple(x.requires_grad_() for x in (torch.randn(1, 2, K, K), torch.randn(1, 2, K), torch.ones(1, 2)))
        for centered in (True, False):
            y, s = ccq_query(q, k, lam, g=g, centered=centered, initial_state=state, output_final_state=True,
                             backend="triton")  # fmt: skip
            (y.float().sum() + s[0].sum() + s[1].sum() + s[2].sum()).backward()
        y, _ = ccq_query(q, k, lam, backend="triton")
        y.float().sum().backward()
        if dtype == torch.bfloat16:  # the fast level: bfloat16 sums at the chunk boundaries
            y, _ = ccq_query(q, k, lam, g=g, backend="triton", precision="fast")
            y.float().sum().backward()
            y, s = ccq_query(q, k, lam, g=g, initial_state=state, output_final_state=True, backend="triton",
                             precision="fast")  # fmt: skip
            (y.float().sum() + s[0].sum()).backward()
        o, _ = delta_rule(q, k, v, beta=beta, g=g, cu_seqlens=torch.tensor([0, 30, 70]), backend="triton")
        o.float().sum().backward()
        UnitRowsTriton.apply(k).sum().backward()  # `unit_rows` takes its kernels on CUDA only
        if K == V <= 128:  # the gate (u in the inputs' dtype), then the engine with float32 k̂, α̂ beside q, v
            o, _ = vla(q, k, v, w / K, backend="triton")
            o.float().sum().backward()
        with torch.no_grad():
            delta_rule(q[:, :3], k[:, :3], v[:, :3], w=w[:, :3], beta=beta[:, :3], g=g[:, :3], initial_state=h0,
                       output_final_state=True, backend="fused_recurrent")  # fmt: skip
            delta_rule(q[:, :3], k[:, :3], v[:, :3], beta=beta[:, :3], g=g[:, :3], kaczmarz_eps=1e-6,
                       initial_state=h0, output_final_state=True, backend="fused_recurrent")  # fmt: skip
            if K == V <= 128:  # VLA's decode step: the gate's kernel (A in registers), then the delta rule's
                vla(q[:, :1], k[:, :1], v[:, :1], w[:, :1] / K, rho=0.99, backend="fused_recurrent")
    # the state walks on the wider value blocks a full GPU's grid takes (`value_block.py`): a bfloat16 training call
    # of GDN at both levels, at K = 128 and 256
    from linattn.ops.delta_rule.triton import value_block

    value_block.FORCED = 64
    try:
        for K in (128, 256):
            q, k, v = (torch.randn(1, 70, 2, K, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            beta, g = torch.rand(1, 70, 2, requires_grad=True), (-torch.rand(1, 70, 2)).requires_grad_()
            for level in ("exact", "fast"):
                o, _ = delta_rule(q, k, v, beta=beta, g=g, backend="triton", precision=level)
                o.float().sum().backward()
    finally:
        value_block.FORCED = None
    # VLA at d = 32, bfloat16: the gate's one-warp launch, its group inverses in one kernel
    # (`vla/triton/cholesky.py`) and the backward's penalty kernels; CCQ-GDN's training launches at d = 32
    # (`[64, 32]` tiles)
    q, k, v, u = (torch.randn(1, 70, 2, 32, dtype=torch.bfloat16, requires_grad=True) for _ in range(4))
    o, _ = vla(q, k, v, u / 32, backend="triton")
    o.float().sum().backward()
    beta, lam = torch.rand(1, 70, 2, requires_grad=True), torch.rand(1, 70, 2, requires_grad=True)
    g = (-torch.rand(1, 70, 2)).requires_grad_()
    y, _ = ccq_query(q, k, lam, g=g, backend="triton")
    o, _ = delta_rule(y, k, v, beta=beta, g=g, backend="triton")
    o.float().sum().backward()


def _as_on_the_gpu() -> None:
    """Make the launchers pick what they pick for CUDA tensors: `precision.raw_operands` takes bfloat16 tiles as
    loaded (`RAW="native"`) on a GPU and float32 copies on the CPU, where the interpreter's bfloat16 products are
    wrong, so a CPU recording would build the GPU's 16-bit launches with one tf32 pass instead. The recorded calls'
    values then go wrong in the interpreter; only their launches are kept."""
    import pkgutil

    import torch

    import linattn.ops
    from linattn.ops.utils import precision

    for info in pkgutil.walk_packages(linattn.ops.__path__, "linattn.ops."):
        if ".triton" in info.name:
            importlib.import_module(info.name)
    # and `precision.fast_precision` likewise: bfloat16 operands on a GPU, an emulation of them on the CPU
    for name in ("raw_operands", "fast_precision"):
        device_aware = getattr(precision, name)

        def on_the_gpu(device, *dtypes, choose=device_aware):
            return choose(torch.device("cuda"), *dtypes)

        for module in list(sys.modules.values()):
            if getattr(module, name, None) is device_aware:
                setattr(module, name, on_the_gpu)


def record(path: Path) -> None:
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    _as_on_the_gpu()
    seen: dict[str, dict] = {}
    run = InterpretedFunction.run

    def recording_run(self, *args, grid, warmup, **kwargs):
        bound = dict(zip(self.arg_names, args)) | kwargs
        signature, constexprs, options, aligned = {}, {}, {}, []
        params = inspect.signature(self.fn).parameters
        fixed = set(self.kwargs.get("do_not_specialize") or ())
        for name, value in bound.items():
            if name in LAUNCH_OPTIONS:
                if value is not None:
                    options[name] = value
            elif "constexpr" in str(params[name].annotation):
                signature[name], constexprs[name] = "constexpr", value
            elif isinstance(value, torch.Tensor):
                signature[name] = "*" + _TYPES[str(value.dtype).removeprefix("torch.")]
                if value.data_ptr() % 16 == 0:
                    aligned.append(name)
            elif value is None:
                signature[name], constexprs[name] = "constexpr", None
            elif isinstance(value, bool):
                signature[name] = "i1"
            elif isinstance(value, int):
                signature[name] = "i32" if abs(value) < 2**31 else "i64"
                if value % 16 == 0 and name not in fixed:
                    aligned.append(name)
            elif isinstance(value, float):
                signature[name] = "fp32"
            else:
                raise TypeError(f"{self.fn.__name__}: cannot record argument {name} of type {type(value)}")
        # what Triton's launcher specialises on a GPU: 16-byte aligned pointers and multiples of 16 are compiled with
        # that divisibility (vector loads and stores follow from it)
        entry = {"module": self.fn.__module__, "name": self.fn.__name__, "signature": signature,
                 "constexprs": constexprs, "options": options, "aligned": aligned}  # fmt: skip
        seen.setdefault(json.dumps(entry, sort_keys=True), entry)
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording_run
    warnings.simplefilter("ignore")  # the random inputs overflow in places; only the launches matter here
    _calls()
    path.write_text(json.dumps(list(seen.values()), indent=1))
    print(f"recorded {len(seen)} distinct launches", file=sys.stderr)


def _ptxas(arch: int) -> str:
    """The `ptxas` Triton itself assembles this arch's PTX with (newer Tritons bundle two and emit PTX that only the
    newer one reads)."""
    from triton.backends.nvidia import compiler

    try:
        return compiler.get_ptxas(arch).path
    except TypeError:  # Tritons that bundle one take no arch
        return compiler.get_ptxas().path


def _compile(entry: dict, arch: int, out: Path) -> str:
    """One recorded launch -> one report line (`FAIL ...` with the compiler's message when it does not build)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(entry["module"]), entry["name"])
    consts = entry["constexprs"]
    label = f"{entry['name']}(" + ", ".join(f"{k}={v}" for k, v in consts.items() if v is not None) + ")"
    label += " " + ",".join(sorted({t for t in entry["signature"].values() if t.startswith("*")}))
    try:
        attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in entry["aligned"]}
        source = ASTSource(fn, entry["signature"], consts, attrs)
        kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=entry["options"])
    except Exception as error:  # one kernel's compile error should not hide the others'
        return f"FAIL  {label}\n      {type(error).__name__}: {str(error)[:3000]}"
    # the launch options are not in the source's hash: two launches of one source must not share a file
    options = "_".join(f"{k}{v}" for k, v in sorted(entry["options"].items()))
    ptx_file = out / f"{source.hash()[:16]}_{entry['name']}_{options}.ptx"
    ptx_file.write_text(kernel.asm["ptx"])
    ptx_file.with_suffix(".ttgir").write_text(kernel.asm["ttgir"])
    cubin_file = ptx_file.with_suffix(".cubin")
    cubin_file.write_bytes(kernel.asm["cubin"])
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    report = subprocess.run([_ptxas(arch), f"-arch=sm_{arch}a", "-v", str(ptx_file), "-o", os.devnull],
                            capture_output=True, text=True).stderr  # fmt: skip
    regs = re.search(r"Used (\d+) registers", report)
    spill = re.search(r"(\d+) bytes spill stores", report)
    regs, spill = (int(m.group(1)) if m else -1 for m in (regs, spill))
    # SASS instructions of the kernel as built: lines `/*0a30*/  OPCODE ...;` of the disassembly
    sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin_file)], capture_output=True, text=True).stdout
    instructions = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+\S", sass, flags=re.M))
    # block-wide barriers: each a wait of all the program's warps (reductions and layout changes across warps)
    barriers = len(re.findall(r"\bBAR\.SYNC", sass))
    flag = "SPILL" if spill > 0 else "ok"
    return (
        f"{flag:5} regs={regs:3} spill={spill:5}B smem={kernel.metadata.shared:6}B sass={instructions:5} "
        f"bar={barriers:3}  {label}"
    )


def compile_all(path: Path, arch: int, out: Path, only: str | None) -> int:
    from concurrent.futures import ProcessPoolExecutor

    entries = [e for e in json.loads(path.read_text()) if only is None or only in e["name"]]
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        for line in pool.map(_compile, entries, [arch] * len(entries), [out] * len(entries)):
            failures += line.startswith("FAIL")
            print(line, flush=True)
    print(f"{len(entries) - failures} of {len(entries)} launches compiled for sm_{arch}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--out", type=Path, default=Path("/tmp/linattn_ptx"), help="where to keep the PTX")
    parser.add_argument("--only", help="compile only the kernels whose name contains this")
    parser.add_argument(
        "--record-python",
        default=sys.executable,
        help="Python that records the launches (its Triton's interpreter runs the calls)",
    )
    parser.add_argument(
        "--phase",
        choices=("record", "compile"),
        help="one phase only: 'compile' rebuilds the launches an earlier run recorded (seconds, where recording "
        "takes minutes), as long as the kernels' signatures have not changed",
    )
    parser.add_argument(
        "--launches", type=Path, default=Path("/tmp/linattn_launches.json"), help="where the recorded launches lie"
    )
    args = parser.parse_args()
    if args.phase == "record":
        record(args.launches)
        return 0
    if args.phase == "compile":
        return 1 if compile_all(args.launches, args.arch, args.out, args.only) else 0
    me = [__file__, "--launches", str(args.launches)]
    env = os.environ | {"TRITON_INTERPRET": "1"}
    subprocess.run([args.record_python, *me, "--phase", "record"], env=env, check=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    extra = ["--arch", str(args.arch), "--out", str(args.out)] + (["--only", args.only] if args.only else [])
    return subprocess.run([sys.executable, *me, "--phase", "compile", *extra], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
