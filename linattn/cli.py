"""`linattn list | run NAME | progress NAME | report | tables | bench …`: the command line over the named
experiments and benchmarks; `linattn train | tokenizer train | export-hf`: a language model on your own text
(docs/train.md).

Bad input (unknown experiment or mixer, a device that is not there, an output folder that cannot be written)
gets one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from linattn.experiments.mixers import parse_mixers
from linattn.experiments.registry import DIAGNOSTICS, EXPERIMENTS
from linattn.experiments.runner import RunsFailed


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's default prints the usage too)
        print(f"linattn: error: {message}", file=sys.stderr)
        sys.exit(2)


def _fail(message: str) -> int:
    print(f"linattn: error: {message}", file=sys.stderr)
    return 2


def _protocol(asked: str | None, experiment) -> str | None:
    """The protocol asked for (by default "paper" where the experiment has it, else its first), None if it has not."""
    protocol = asked or ("paper" if "paper" in experiment.protocols else experiment.protocols[0])
    return protocol if protocol in experiment.protocols else None


def _parser() -> _Parser:
    parser = _Parser(prog="linattn", description="Stable linear attention: experiments and benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", help="the named experiments and diagnostics")
    run = sub.add_parser("run", help="run (or resume) a named experiment")
    run.add_argument("name", help="experiment name (see `linattn list`)")
    run.add_argument(
        "--protocol",
        help="one of the experiment's protocols, as `linattn list` names them (e.g. 'paper': exactly the paper's "
        "recipe, the default where an experiment has it; 'fair')",
    )
    run.add_argument(
        "--quick", action="store_true", help="a smaller version for a CPU (on 2 cores, minutes to tens of minutes)"
    )
    run.add_argument("--device", default="auto", help="'cpu', 'cuda' or 'auto' (cuda when available)")
    run.add_argument("--mixers", help="comma-separated mixers, the experiment's or others (default: the experiment's)")
    run.add_argument(
        "--jobs",
        type=int,
        help="training runs at a time, as separate processes (default 1); several GPUs share them out",
    )
    run.add_argument(
        "--seeds",
        type=int,
        help="train each setting of the --mixers with this many seeds (the protocol's, then the next ones; default "
        "1; the first sweeps the learning rates, the others train at the one it chose) "
        "and report the median; an existing result's mixers never lose seeds, and those not named keep theirs (so a "
        "cut extension resumes with the same --mixers)",
    )
    run.add_argument(
        "--start-by",
        type=float,
        metavar="SECONDS",
        help="begin no training run later than SECONDS from now (those begun finish), for a job of limited time",
    )
    run.add_argument("--out", default="results", help="results root (default results/)")
    run.add_argument("--force", action="store_true", help="run again even if results exist (discards them)")
    prog = sub.add_parser("progress", help="how far an experiment's runs have got (its archive and run folders)")
    prog.add_argument("name", help="experiment name (see `linattn list`)")
    prog.add_argument("--protocol", help="as for `run` (default: the experiment's first)")
    prog.add_argument("--quick", action="store_true", help="the quick version's runs")
    prog.add_argument(
        "--seeds", type=int, help="every mixer this many (default: each mixer as many as its result and runs show)"
    )
    prog.add_argument("--mixers", help="as `run --mixers` named them (default: the result's, else the experiment's)")
    prog.add_argument("--results", default="results", help="results root (default results/)")
    rep = sub.add_parser("report", help="the claims report (REPORT.md), from results/")
    rep.add_argument("--results", default="results", help="results root (default results/)")
    rep.add_argument("--out", default="REPORT.md", help="where to write it (default REPORT.md)")
    tables = sub.add_parser("tables", help="the results tables of README.md and docs/results.md, from results/")
    tables.add_argument(
        "--write", metavar="FILE", help="fill the generated blocks of this file (README.md, docs/results.md)"
    )
    tables.add_argument("--results", default="results", help="results root (default results/)")
    sub.add_parser("bench", help="benchmarks: `linattn bench cpu …` (see python -m linattn.bench -h)", add_help=False)
    _text_parsers(sub)
    return parser


def _text_parsers(sub) -> None:
    """`train`, `tokenizer train`, `corpus build`, `probe` and `export-hf`: a language model on a text corpus."""
    tr = sub.add_parser("train", help="train (or --resume) a language model on text files (docs/train.md)")
    tr.add_argument("--data", help="the corpus: a text FILE, a DIR (walked for text files) or a GLOB pattern")
    tr.add_argument("--tokenizer", help="'bytes' (the default: 256 ids, no file) or a tokenizers JSON file")
    tr.add_argument("--mixer", help="the sequence mixer (default kla): " + ", ".join(_mixers()))
    tr.add_argument("--preset", help="model + training + data recipe (default tiny): tiny, small, medium, large")
    tr.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change any field of the model, training or data config (repeatable), e.g. --set lr=1e-3",
    )
    tr.add_argument("--out", required=True, metavar="RUN_DIR", help="the run folder (settings, cache, checkpoint)")
    tr.add_argument("--steps", type=int, help="optimizer updates (default: the preset's)")
    tr.add_argument("--device", default="auto", help="'cpu', 'cuda' or 'auto' (cuda when available)")
    tr.add_argument("--resume", action="store_true", help="continue the run in RUN_DIR from its checkpoint")
    tr.add_argument("--cache", metavar="DIR", help="where the tokenised corpus goes (default RUN_DIR/cache)")
    tr.add_argument("--sharding", choices=("ddp", "fsdp"), default="ddp", help="under torchrun (default ddp)")
    tr.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard log even if it is installed")
    tr.add_argument("--prepare-only", action="store_true", help="tokenise the corpus into the cache, then stop")
    tok = sub.add_parser("tokenizer", help="`linattn tokenizer train`: a byte-level BPE tokenizer for a corpus")
    tok_sub = tok.add_subparsers(dest="tokenizer_command", required=True, parser_class=_Parser)
    tt = tok_sub.add_parser("train", help="train a byte-level BPE on the train split of a corpus")
    tt.add_argument("--data", required=True, help="the corpus: a text FILE, a DIR or a GLOB pattern")
    tt.add_argument("--vocab-size", type=int, required=True, help="ids, the end-of-document token included")
    tt.add_argument("--out", required=True, help="the tokenizer JSON file to write")
    tt.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a data-config field, as for `train`"
    )
    tt.add_argument("--force", action="store_true", help="replace an existing --out")
    corpus = sub.add_parser("corpus", help="`linattn corpus build`: a text corpus from Debian and Python packages")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True, parser_class=_Parser)
    cb = corpus_sub.add_parser("build", help="copy the packages' text files, each content once, with a manifest")
    cb.add_argument("out", metavar="OUT", help="the corpus folder to write (then --data OUT)")
    cb.add_argument("--debian", action="append", default=[], metavar="PKG", help="a Debian package (repeatable)")
    cb.add_argument(
        "--installed",
        action="append",
        default=[],
        metavar="DIST",
        help="an installed Python distribution, DIST==VERSION to refuse other versions (repeatable; '*': all)",
    )
    cb.add_argument(
        "--downloads", metavar="DIR", help="where .deb files are kept and reused (default OUT/../.downloads)"
    )
    cb.add_argument("--force", action="store_true", help="replace an existing OUT")
    pr = sub.add_parser("probe", help="a trained text run's loss at several lengths and its passkey recall")
    pr.add_argument("run_dir", metavar="RUN_DIR", help="the run folder of `linattn train` or of a lm-compare run")
    pr.add_argument("--lengths", required=True, help="comma-separated context lengths in tokens, e.g. 512,2048,8192")
    pr.add_argument("--split", default="val", help="val (default), test or train")
    pr.add_argument("--windows", type=int, default=8, help="documents read for the loss at each length (default 8)")
    pr.add_argument("--trials", type=int, default=20, help="passkey trials at each length (default 20)")
    pr.add_argument("--device", default="auto", help="'cpu', 'cuda' or 'auto' (cuda when available)")
    pr.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    ex = sub.add_parser("export-hf", help="a trained run as a HuggingFace model folder, with its tokenizer")
    ex.add_argument("run_dir", metavar="RUN_DIR", help="the run folder of `linattn train` or of a lm-compare run")
    ex.add_argument("out", metavar="OUT", help="the folder to write")
    ex.add_argument("--force", action="store_true", help="replace an existing OUT")


def _mixers() -> list[str]:
    from linattn.layers import LAYERS

    return sorted(LAYERS)


def _device(asked: str) -> str:
    """The device of `--device`: cpu, cuda, or (auto) cuda when available; `ValueError` otherwise."""
    device = ("cuda" if torch.cuda.is_available() else "cpu") if asked == "auto" else asked
    if device not in ("cpu", "cuda"):
        raise ValueError(f"--device: expected 'cpu', 'cuda' or 'auto', got {asked!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device: cuda requested but no CUDA device is available")
    return device


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _main(argv)
        sys.stdout.flush()  # a reader gone shows here, in the handler below, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        print(f"linattn: interrupted{_how_to_go_on(argv)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `linattn list | head`: the reader left; no traceback, and none again at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _how_to_go_on(argv: list[str]) -> str:
    """After Ctrl-C: how the interrupted command goes on, for the commands that keep their work."""
    if argv[:1] == ["run"]:
        diagnostic = DIAGNOSTICS.get(argv[1] if len(argv) > 1 else "")
        if diagnostic is not None and not diagnostic.resumable:
            return "; the same command measures it again from the start"
        same = "the same command without --force" if "--force" in argv else "the same command"
        return f"; {same} resumes (finished runs are kept, the one in progress from its last checkpoint)"
    if argv[:1] == ["train"]:
        from linattn.textlm.run import RUN_NAME

        args, _ = _parser().parse_known_args(argv)
        if args.resume or (Path(args.out) / RUN_NAME).exists():
            return "; the same command with --resume continues the run from its last checkpoint"
        return "; before the run began (its corpus was being read): the same command starts it again"
    return ""


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        from linattn.bench.__main__ import main as bench_main

        return bench_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command in ("train", "tokenizer", "export-hf", "corpus", "probe"):
        from linattn.train.lock import RunFolderLocked

        try:
            return _text_command(args)
        except (ValueError, RunFolderLocked) as e:
            return _fail(str(e))
        except BrokenPipeError:
            raise
        except OSError as e:  # a path the system refuses (a read-only or missing folder): the user's input
            return _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
    if args.command == "list":
        for e in EXPERIMENTS.values():
            print(f"{e.name:<20} {e.description}  [protocols: {', '.join(e.protocols)}]")
        for d in DIAGNOSTICS.values():
            print(f"{d.name:<20} {d.description}  [diagnostic]")
        return 0
    if args.command == "progress":
        from linattn.experiments.progress import progress

        if args.name in DIAGNOSTICS:
            return _fail(f"{args.name!r} is a diagnostic: it trains no runs to follow (`linattn run {args.name}`)")
        experiment = EXPERIMENTS.get(args.name)
        if experiment is None:
            return _fail(f"unknown experiment {args.name!r}; expected one of {sorted(EXPERIMENTS)}")
        protocol = _protocol(args.protocol, experiment)
        if protocol is None:
            return _fail(f"--protocol: expected one of {list(experiment.protocols)}, got {args.protocol!r}")
        if args.seeds is not None and args.seeds < 1:
            return _fail(f"--seeds: expected >= 1, got {args.seeds}")
        try:
            mixers = None if args.mixers is None else parse_mixers(args.mixers, experiment.mixers)
            print(progress(experiment, protocol, args.quick, Path(args.results), args.seeds, mixers), end="")
        except ValueError as e:  # bad --mixers, or an experiment whose plan reads prepared data (lm-compare's corpus)
            return _fail(str(e))
        return 0
    if args.command == "report":
        from linattn.experiments.report import report
        from linattn.io import write_atomic

        if not Path(args.results).is_dir():
            print(f"linattn: warning: --results: no folder {args.results}; every claim reads 'not yet measured'",
                  file=sys.stderr)  # fmt: skip
        try:
            write_atomic(Path(args.out), report(Path(args.results)))
        except OSError as e:
            return _fail(f"--out: cannot write {args.out}: {e.strerror or e}")
        print(f"wrote {args.out}")
        return 0
    if args.command == "tables":
        from linattn.experiments.tables import capacity_tables, write_page, zoology_tables

        try:
            if args.write:
                write_page(Path(args.write), Path(args.results))
                print(f"wrote {args.write}")
            else:
                print(capacity_tables(Path(args.results)) + "\n" + zoology_tables(Path(args.results)), end="")
        except FileNotFoundError as e:
            return _fail(str(e) if str(e).startswith("--results") else f"--write: no such file {args.write}")
        except ValueError as e:
            return _fail(f"--write: {e}")
        return 0
    if args.name not in EXPERIMENTS and args.name not in DIAGNOSTICS:
        return _fail(f"unknown experiment {args.name!r}; expected one of {sorted([*EXPERIMENTS, *DIAGNOSTICS])}")
    diagnostic, experiment = DIAGNOSTICS.get(args.name), EXPERIMENTS.get(args.name)
    if diagnostic is not None:
        for option in ("protocol", "mixers", "jobs", "seeds", "start_by"):
            if getattr(args, option) is not None:
                flag = option.replace("_", "-")
                return _fail(f"--{flag}: not an option of {args.name!r} (a diagnostic: no training runs)")
    else:
        protocol = _protocol(args.protocol, experiment)
        if protocol is None:
            return _fail(f"--protocol: expected one of {list(experiment.protocols)}, got {args.protocol!r}")
        try:
            mixers = parse_mixers(args.mixers, experiment.mixers)
        except ValueError as e:
            return _fail(str(e))
        jobs = 1 if args.jobs is None else args.jobs
        if jobs < 1:
            return _fail(f"--jobs: expected >= 1, got {args.jobs}")
        seeds = 1 if args.seeds is None else args.seeds
        if seeds < 1:
            return _fail(f"--seeds: expected >= 1, got {args.seeds}")
        if args.start_by is not None and not args.start_by >= 0:
            return _fail(f"--start-by: expected seconds >= 0, got {args.start_by}")
        start_by = None if args.start_by is None else time.time() + args.start_by
    try:
        device = _device(args.device)
    except ValueError as e:
        return _fail(str(e))
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as e:
        return _fail(f"--out: cannot write to {out}: {e.strerror or e}")
    command = "linattn " + " ".join(argv)
    if diagnostic is not None:
        diagnostic.run(quick=args.quick, device=device, root=out, force=args.force, command=command)
        return 0
    try:
        experiment.run(
            protocol,
            quick=args.quick,
            mixers=mixers,
            device=device,
            jobs=jobs,
            root=out,
            force=args.force,
            command=command,
            seeds=seeds,
            start_by=start_by,
        )
    except RunsFailed as e:
        print(f"linattn run {args.name}: {e}", file=sys.stderr)
        return 1
    return 0


def _text_command(args: argparse.Namespace) -> int:
    """`train`, `tokenizer train`, `corpus build`, `probe`, `export-hf`; bad input raises `ValueError`."""
    from linattn.data.config import DataConfig
    from linattn.train import distributed

    if args.command == "tokenizer":
        from linattn.data.tokenizer import train_tokenizer
        from linattn.textlm.settings import apply_settings

        (config,) = apply_settings((DataConfig(),), args.set)
        tokenizer = train_tokenizer(args.data, args.out, args.vocab_size, config, overwrite=args.force, progress=True)
        print(f"wrote {args.out}: {tokenizer.vocab_size} ids, end of document {tokenizer.eod_token}")
        return 0
    if args.command == "corpus":
        from linattn.data.assemble import build, summary

        manifest = build(
            args.out, args.debian, args.installed, downloads=args.downloads, force=args.force, progress=True
        )
        print("\n".join(summary(manifest)))
        for source in manifest["sources"]:
            if not source["files"]:
                print(f"linattn: warning: {source['kind']} {source['name']} gave no new text file", file=sys.stderr)
        left_out = manifest["duplicates_left_out"]
        print(f"wrote {args.out}: {manifest['files']:,} files, {manifest['bytes']:,} bytes ({left_out:,} duplicates "
              f"left out); sources in {args.out}/MANIFEST.json")  # fmt: skip
        return 0
    if args.command == "probe":
        from linattn.experiments.lm_compare import is_compared, probe_compared
        from linattn.io import write_atomic
        from linattn.textlm.probes import probe_run, probes_table

        try:
            lengths = [int(x) for x in args.lengths.split(",")]
        except ValueError:
            raise ValueError(f"--lengths: expected comma-separated integers, got {args.lengths!r}") from None
        if not lengths or min(lengths) < 2:
            raise ValueError(f"--lengths: expected lengths of at least 2 tokens, got {args.lengths!r}")
        options = {"split": args.split, "windows": args.windows, "trials": args.trials, "device": _device(args.device)}
        if is_compared(args.run_dir):
            result = probe_compared(args.run_dir, lengths, **options)
        else:
            result = probe_run(args.run_dir, lengths, **options)
        print(f"# {args.run_dir}, {args.split} split\n\n" + probes_table(result["loss"], result["passkey"]))
        if args.json:
            write_atomic(args.json, json.dumps(result, indent=1) + "\n")
        return 0
    if args.command == "export-hf":
        from linattn.experiments.lm_compare import is_compared, load_compared
        from linattn.models.export import export_hf
        from linattn.textlm.run import load_run

        if is_compared(args.run_dir):
            model, tokenizer = load_compared(args.run_dir)
        else:
            _, model, tokenizer = load_run(args.run_dir)
        export_hf(model, tokenizer, args.out, overwrite=args.force)
        print(f"wrote {args.out}: AutoModelForCausalLM / AutoTokenizer.from_pretrained({str(args.out)!r}) open it "
              "(after import linattn.models.hf)")  # fmt: skip
        return 0
    from linattn.textlm.run import resolve_run, train_text

    device = _device(args.device)
    run = resolve_run(
        args.out, resume=args.resume, data=args.data, tokenizer=args.tokenizer, preset=args.preset,
        mixer=args.mixer, settings=args.set, steps=args.steps,
    )  # fmt: skip
    main = distributed.env_info().is_main
    result = train_text(
        run, args.out, cache_dir=args.cache, device=device, progress=main, sharding=args.sharding,
        tensorboard=not args.no_tensorboard, prepare_only=args.prepare_only,
    )  # fmt: skip
    if main and result is None:
        print(f"tokenised {run.data} into {args.cache or Path(args.out) / 'cache'}")
    elif main:
        print(_summary(result, Path(args.out)))
    return 0


def _summary(result, out: Path) -> str:
    """One line on a finished text run: steps, the last eval, the mean tokens/s of its log."""
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()] if result.metrics_path else []
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
    parts = [f"{out}: {result.step} steps"]
    if result.stop_reason:
        parts.append(f"stopped: {result.stop_reason}")
    if result.last_eval:
        parts.append(", ".join(f"{k} {v:.4g}" for k, v in result.last_eval.items()))
    if rates:
        parts.append(f"{sum(rates) / len(rates):,.0f} tokens/s")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
