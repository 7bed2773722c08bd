"""Where a measurement was taken: hardware, versions and date, stamped on every benchmark table."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

import torch


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def mps_running() -> bool:
    """Whether an MPS control daemon's pipe (`nvidia-cuda-mps-control -d`) is where this process's CUDA would look for
    one: then the kernels of several processes on one GPU run side by side instead of by turns. (A daemon that died
    may leave its pipe behind.)"""
    return (Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")) / "control").exists()


def describe(device: torch.device | str = "cpu") -> dict[str, str]:
    """A small dict of facts about the machine and software a benchmark ran on."""
    device = torch.device(device)
    info = {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = str(torch.version.cuda)
    else:
        threads = torch.get_num_threads()
        info["cpu"] = f"{cpu_name()} ({threads} thread{'s' if threads != 1 else ''})"
    return info
