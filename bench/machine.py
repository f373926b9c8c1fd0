"""The machine and the versions a benchmark ran with, and how busy the machine was."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def _first(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "?"


def _version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return "?"
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "?"


def load() -> list[float]:
    """1, 5 and 15 minute load averages (runnable processes; compare with the core count)."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (``/proc/<pid>/stat``, 10 ms ticks).

    Unlike a wall-clock time, it does not grow when other processes compete for the cores."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def describe(prometheus: str, promtool: str) -> dict:
    ram_kib = _first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "cpu": _first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "ram_gib": round(int(ram_kib) / 2**20, 1) if ram_kib.isdigit() else None,
        "os": _first("/etc/os-release", "PRETTY_NAME="),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "prometheus": _version(prometheus),
        "promtool": _version(promtool),
    }


__all__ = ["cpu_seconds", "describe", "load"]
