"""Where a measurement was taken: hardware, versions and date, stamped on every benchmark table."""

from __future__ import annotations

import datetime
import platform

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
