"""How long ``servewatch generate`` takes for the default specs and for N deployments' worth.

servewatch's output does not depend on the fleet's size, only on the specs: a team with many model
deployments grows its specs when it gives each deployment its own alert set (own thresholds, own
scenarios). ``scaled_specs(n)`` builds that: the default specs plus n-1 renamed copies of every
alert group and scenario file, so the rules, promtool tests and runbooks grow n-fold while the
three dashboards stay three. Timed in-process (``generate.build``: load, validate, render every
artefact, no disk writes), median of ``repeats``; peak Python heap from one more run under tracemalloc.
"""

from __future__ import annotations

import re
import shutil
import sys
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from servewatch import generate


def scaled_specs(copies: int, src: Path, dst: Path) -> Path:
    """``src`` copied to ``dst`` with ``copies - 1`` renamed copies of every alert group and scenario."""
    shutil.copytree(src, dst)
    alert_files = sorted((dst / "alerts").glob("*.yaml"))
    alerts = re.findall(r"alert: (\w+)", "".join(p.read_text() for p in alert_files))
    originals = alert_files + sorted((dst / "scenarios").glob("*.yaml"))
    for i in range(1, copies):
        for f in originals:
            text = f.read_text()
            for name in alerts:
                text = re.sub(rf"\b{name}\b", f"{name}Copy{i}", text)
            text = re.sub(
                r"- name: ([a-z0-9-]+)\n(\s+)family: (\w+)", rf"- name: \1-copy{i}\n\2family: \3", text
            )
            text = re.sub(r"- name: (.+)\n(\s+)alert:", rf"- name: \1 (copy {i})\n\2alert:", text)
            (f.parent / f"{f.stem}-copy{i}.yaml").write_text(text)
    return dst


def measure(specs: Path, repeats: int) -> dict:
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        _, files = generate.build(specs)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)  # unlike the wall time, not stretched by other processes
    tracemalloc.start()
    generate.build(specs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rules = sum(
        t.count("\n  - record:") + t.count("\n  - alert:")
        for p, t in files.items()
        if p.endswith(".rules.yaml")
    )
    return {
        "median_ms": round(statistics.median(times) * 1000, 1),
        "min_ms": round(min(times) * 1000, 1),
        "cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
        "peak_python_mib": round(peak / 2**20, 1),
        "files": len(files),
        "bytes": sum(len(t.encode()) for t in files.values()),
        "rules": rules,
    }


def run(specs: Path, deployments: tuple[int, ...], repeats: int) -> list[dict]:
    out = []
    for n in deployments:
        with tempfile.TemporaryDirectory() as tmp:
            scaled = specs if n == 1 else scaled_specs(n, specs, Path(tmp) / "specs")
            out.append({"deployments": n, **measure(scaled, repeats)})
    return out


def main(argv: list[str]) -> int:
    """``make bench``: the table for 1, 10 and 100 deployments, median of 5.

    ``python -m bench.generation_cost RESULTS.json`` measures 1 and 100 deployments again into a
    fleet results file (with the time and load of this run) and redraws its report.
    """
    import json

    from . import machine, report

    specs = Path(__file__).resolve().parents[1] / "specs"
    if not argv:
        print("\n".join(report.generation_table(run(specs, (1, 10, 100), repeats=5))))
        return 0
    path = Path(argv[0])
    results = json.loads(path.read_text())
    load = machine.load()
    results["generation"] = run(specs, tuple(g["deployments"] for g in results["generation"]), repeats=5)
    results["generation_measured"] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load": [load, machine.load()],
    }
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    report.write(results, path.with_suffix(".md"), path.with_suffix(".png"))
    return 0


__all__ = ["scaled_specs", "measure", "run", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
