"""Benchmark: how long `generate` takes and how much memory it needs, for the default specs and
for specs scaled up N times (each alert group copied with renamed alerts and scenarios).

Comparison point: `promtool check rules` on the same generated rule files, run on the same machine.
Prints a Markdown table; bench/README.md keeps the reviewed numbers.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "generator"))

from servewatch import generate, tools, writer  # noqa: E402


def scaled_specs(factor: int, dst: Path) -> Path:
    """Copy specs/ and add factor-1 renamed copies of every alert group and its scenarios."""
    shutil.copytree(REPO / "specs", dst)
    alerts = re.findall(r"alert: (\w+)", "".join(p.read_text() for p in (dst / "alerts").glob("*.yaml")))
    for i in range(1, factor):
        for src in list((dst / "alerts").glob("*.yaml")) + list((dst / "scenarios").glob("*.yaml")):
            if "-copy" in src.name:
                continue
            text = src.read_text()
            for name in alerts:
                text = re.sub(rf"\b{name}\b", f"{name}Copy{i}", text)
            text = re.sub(
                r"- name: ([a-z-]+)\n(\s+)family: (\w+)", rf"- name: \1-copy{i}\n\2family: \3", text
            )
            text = re.sub(r"- name: (.+)\n(\s+)alert:", rf"- name: \1 (copy {i})\n\2alert:", text)
            (src.parent / f"{src.stem}-copy{i}.yaml").write_text(text)
    return dst


def measure(specs: Path, runs: int = 5) -> dict:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        _, files = generate.build(specs)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    generate.build(specs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = Path(tempfile.mkdtemp())
    writer.write(out, files)
    rules = sorted((out / "rules").glob("*.rules.yaml"))
    t0 = time.perf_counter()
    tools.run("promtool", "check", "rules", *rules, check=True)
    check_s = time.perf_counter() - t0
    shutil.rmtree(out)
    n_rules = sum(
        t.count("\n  - record:") + t.count("\n  - alert:")
        for p, t in files.items()
        if p.endswith(".rules.yaml")
    )
    return {
        "median_s": statistics.median(times),
        "peak_mib": peak / 2**20,
        "files": len(files),
        "rules": n_rules,
        "promtool_check_s": check_s,
    }


def main() -> None:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "?",
    )
    print(f"machine: {platform.machine()} {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| specs | rules | files | generate (median of 5) | peak Python memory | promtool check rules |")
    print("|---|---|---|---|---|---|")
    for factor in (1, 10, 50):
        with tempfile.TemporaryDirectory() as tmp:
            specs = REPO / "specs" if factor == 1 else scaled_specs(factor, Path(tmp) / "specs")
            m = measure(specs)
        print(
            f"| default x{factor} | {m['rules']} | {m['files']} | {m['median_s'] * 1000:.0f} ms | "
            f"{m['peak_mib']:.1f} MiB | {m['promtool_check_s'] * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    main()
