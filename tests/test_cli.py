"""The command line: listing, and one-line errors with exit status 2 for bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from linattn.cli import main


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "vla-mqar-capacity" in out and "vla-copy" in out
    assert "vla-state-norm" in out and "vla-jacobian" in out and "vla-speed" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "nope"], "unknown experiment 'nope'"),
        (["run", "vla-copy", "--mixers", "vla,foo"], "--mixers: unknown mixer"),
        (["run", "vla-copy", "--mixers", "linear,vla,linear"], "--mixers: expected each mixer once, got ['linear']"),
        (["tables", "--results", "/no/such/results"], "--results: no /no/such/results/vla-mqar-capacity/paper"),
        (["tables", "--write", "/no/such/README.md"], "--write: no such file /no/such/README.md"),
        (["run", "vla-copy", "--device", "tpu"], "--device: expected"),
        (["run", "vla-copy", "--protocol", "mine"], "--protocol: expected"),
        (["run", "vla-copy", "--jobs", "0"], "--jobs: expected >= 1"),
        (["run", "vla-jacobian", "--protocol", "paper"], "--protocol: not an option of 'vla-jacobian'"),
        (["run", "vla-state-norm", "--mixers", "vla"], "--mixers: not an option of 'vla-state-norm'"),
        (["run", "vla-state-norm", "--jobs", "2"], "--jobs: not an option"),
        (["run", "kla-mqar", "--seeds", "0"], "--seeds: expected >= 1, got 0"),
        (["run", "vla-jacobian", "--seeds", "3"], "--seeds: not an option of 'vla-jacobian'"),
        (["run", "kla-mqar", "--start-by=-5"], "--start-by: expected seconds >= 0, got -5.0"),
        (["run", "vla-jacobian", "--start-by", "60"], "--start-by: not an option of 'vla-jacobian'"),
        (["progress", "vla-jacobian"], "'vla-jacobian' is a diagnostic: it trains no runs to follow"),
        (["progress", "nope"], "unknown experiment 'nope'; expected one of"),
        (["progress", "kla-mqar", "--mixers", "vla,foo"], "--mixers: unknown mixer"),
        (["run", "vla-copy", "--mixers", ""], "--mixers: expected comma-separated names"),
        (["run", "vla-copy", "--mixers", " , "], "--mixers: expected comma-separated names"),
        (["progress", "kla-mqar", "--protocol", "mine"], "--protocol: expected"),
        (["progress", "kla-mqar", "--seeds", "0"], "--seeds: expected >= 1, got 0"),
        (["run", "vla-jacobian", "--device", "tpu"], "--device: expected"),
        (["run", "vla-copy", "--out", "/proc/linattn-results"], "--out: cannot write"),
        (["run"], "required: name"),
        (["fly"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("linattn: error: ") and message in err and err.count("\n") == 1


def test_cuda_requested_without_cuda(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["run", "vla-copy", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_bench_passes_through(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "--help"])
    assert e.value.code == 0 and "cpu" in capsys.readouterr().out


def test_an_interrupt_is_one_line_that_says_how_to_go_on(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("linattn.experiments.experiment.Experiment.run", interrupted)
    assert main(["run", "vla-copy", "--quick", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err.startswith("linattn: interrupted; the same command resumes") and err.count("\n") == 1
    assert main(["run", "vla-copy", "--quick", "--force", "--out", str(tmp_path)]) == 130
    assert "; the same command without --force resumes" in capsys.readouterr().err  # --force would discard them
    monkeypatch.setattr("linattn.textlm.run.resolve_run", interrupted)  # while the corpus is read
    train = ["train", "--data", str(tmp_path), "--out", str(tmp_path / "run")]
    assert main(train) == 130
    assert "the same command starts it again" in capsys.readouterr().err  # no run.json: nothing to resume
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    assert main(train) == 130
    assert "the same command with --resume continues" in capsys.readouterr().err


def test_python_dash_m_and_a_closed_pipe():
    """`python -m linattn` is the command; a reader that leaves before it writes (`| true`, gone long before
    Python has started) gets no traceback, also when the output is buffered until the end."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(f"{sys.executable} -m linattn list | head -1", shell=True, capture_output=True, text=True,
                          env=env, check=True)  # fmt: skip
    assert done.stdout.startswith("vla-mqar-capacity") and done.stderr == ""
    command = f"{sys.executable} -m linattn list; echo $? >&2"
    done = subprocess.run(f"({command}) | true", shell=True, capture_output=True, text=True, env=env, check=True)
    assert done.stderr == "1\n"


def test_report_of_a_missing_results_folder_warns(tmp_path, capsys):
    assert main(["report", "--results", str(tmp_path / "typo"), "--out", str(tmp_path / "REPORT.md")]) == 0
    assert "warning: --results: no folder" in capsys.readouterr().err


def test_no_command_imports_torchs_cpp_extension():
    """`torch.utils.cpp_extension` (which `torch.utils.benchmark` imports) warns "No CUDA runtime is found" on a CPU
    machine with a CUDA build of torch: no module a command imports may import it at import time (a fresh
    interpreter, since this one's tests may have imported it)."""
    code = (
        "import sys, linattn.cli, linattn.experiments.registry, linattn.bench.__main__; "
        "print([m for m in sys.modules if 'cpp_extension' in m])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_progress_of_an_experiment_whose_corpus_is_not_prepared(capsys, monkeypatch, tmp_path):
    """`progress` only reads: lm-compare's corpus is made by `run`, not by asking how far it has got."""
    monkeypatch.setenv("LINATTN_DATA", str(tmp_path))
    assert main(["progress", "lm-compare", "--quick"]) == 2
    assert "is not prepared yet; `linattn run lm-compare` makes it" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
