"""``python -m bench.backtest``: `servewatch backtest` over a synthetic fleet in a real Prometheus 3.5.

The fleet (``servewatch_testkit.synth.scaled_fleet``, ``--gpus`` GPUs for ``--minutes``) is streamed to
OpenMetrics and backfilled; no recording rule is backfilled unless ``--records``, so by default every
record is evaluated in place (the back-test's worst case: a new rule set on raw history). Then
``servewatch backtest`` runs over the whole range as a user would run it, with ``--html``; measured:
its wall time, its peak memory (RUSAGE_CHILDREN), Prometheus's peak memory (VmHWM) and the episodes
found. Before writing, the fleet's size is estimated from a two-step sample, and a run that would not
fit the disk stops there with the figure. Times are not asserted anywhere (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "generator"))

from servewatch import tools  # noqa: E402
from servewatch_testkit.localprom import LocalPrometheus, backfill_start  # noqa: E402
from servewatch_testkit.synth.scaled_fleet import FleetShape, write_fleet  # noqa: E402

from . import machine  # noqa: E402

SERVEWATCH = REPO / ".venv" / "bin" / "servewatch"


def _vm_hwm_mib(pid: int | None) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) >> 10
    except (OSError, ValueError):
        return None
    return None


BLOCK_S = 7200  # promtool writes 2 h blocks, and reads the whole input file once per block


def split_by_block(om: Path, out: Path) -> list[Path]:
    """The OpenMetrics file cut into one file per 2 h block (each family's header in each), so that
    promtool reads every sample once instead of once per block of a long history."""
    files: dict[int, object] = {}
    header: list[str] = []
    with om.open() as src:
        for line in src:
            if line.startswith("#"):
                if line.startswith("# EOF"):
                    break
                family = line.split()[2] if len(line.split()) > 2 else ""
                if header and header[0].split()[2] != family:  # the next family's metadata
                    header = []
                header.append(line)
                for f in files.values():  # a family header goes to every file that has begun
                    f.write(line)
                continue
            block = int(float(line.rsplit(" ", 1)[1]) // BLOCK_S)
            f = files.get(block)
            if f is None:
                f = files[block] = (out / f"block-{block}.om").open("w")
                f.writelines(header)
            f.write(line)
    for f in files.values():
        f.write("# EOF\n")
        f.close()
    return [out / f"block-{b}.om" for b in sorted(files)]


class BlockwisePrometheus(LocalPrometheus):
    """LocalPrometheus backfilled from one OpenMetrics file per block."""

    def __init__(self, parts: list[Path], **kw):
        super().__init__(None, **kw)
        self.parts = parts

    def prepare(self) -> None:
        self.data_dir.mkdir()
        for part in self.parts:
            self._promtool(
                "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(part), str(self.data_dir),
                what=f"promtool tsdb create-blocks-from openmetrics {part.name}",
            )  # fmt: skip
            part.unlink()
        if self.rule_files and self.backfill_rules:
            self.timed("backfill_rules", self._backfill_rules)


def estimate(shape: FleetShape, workdir: Path) -> dict:
    """Series, samples and OpenMetrics bytes of the full run, from the same fleet written for 2 steps."""
    small = FleetShape(**{**shape.__dict__, "steps": 2})
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        stats = write_fleet(small, Path(tmp) / "two.om", 0)
    per_sample = stats.bytes / stats.samples
    samples = stats.samples // 2 * shape.steps
    return {
        "series": stats.series,
        "samples": samples,
        "openmetrics_gib": round(samples * per_sample / 2**30, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.backtest", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=512)
    p.add_argument("--models", type=int, default=8, help="served models (8 needs at least 128 GPUs)")
    p.add_argument("--minutes", type=int, default=7 * 24 * 60, help="history length (default: 7 days)")
    p.add_argument("--records", action="store_true", help="backfill the recording rules first")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--out", type=Path, help="write the measurements as JSON here")
    p.add_argument("--openmetrics", type=Path, help="reuse this fleet file (written for --start) instead")
    p.add_argument("--start", type=float, help="the first sample's time in --openmetrics")
    args = p.parse_args(argv)

    shape = FleetShape.sized(args.gpus, models=args.models, minutes=args.minutes)
    size = estimate(shape, args.workdir)
    free_gib = shutil.disk_usage(args.workdir).free / 2**30
    result = {
        "shape": shape.summary(),
        "estimate": size,
        "machine": machine.describe(tools.find("prometheus"), tools.find("promtool")),
        "load": machine.load(),
    }
    print(f"bench.backtest: {json.dumps(size)}; {free_gib:.0f} GiB free", file=sys.stderr)
    # the OpenMetrics file and the blocks made from it are on disk at once for a moment
    if size["openmetrics_gib"] * 1.5 > free_gib:
        print(f"bench.backtest: does not fit {args.workdir}: {json.dumps(result)}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-backtest-", dir=args.workdir) as tmp:
        om = args.openmetrics or Path(tmp) / "fleet.om"
        start = args.start if args.openmetrics else backfill_start(shape.steps, shape.step)
        end = start + (shape.steps - 1) * shape.step
        t0 = time.perf_counter()
        if not args.openmetrics:
            write_fleet(shape, om, start)
        result["write_s"] = round(time.perf_counter() - t0, 1)
        rules = sorted((REPO / "rules").glob("*.rules.yaml")) if args.records else []
        t0 = time.perf_counter()
        parts = split_by_block(om, Path(tmp))
        result["split_s"] = round(time.perf_counter() - t0, 1)
        om.unlink()
        t0 = time.perf_counter()
        with BlockwisePrometheus(parts, rule_files=rules, ready_timeout=3600) as prom:
            result["backfill_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            rng = f"{int(start)}..{int(end)}"
            cmd = [str(SERVEWATCH), "backtest", "--prometheus", prom.url, "--range", rng, "--format", "json"]
            cmd += [
                "--evaluation-interval",
                "30s",
                "--html",
                str(Path(tmp) / "html"),
                "--specs",
                str(REPO / "specs"),
            ]
            with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
                proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
                _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory
                proc.returncode = os.waitstatus_to_exitcode(status)
                out.seek(0), err.seek(0)
                stdout, stderr = out.read(), err.read()
            result["backtest_s"] = round(time.perf_counter() - t0, 1)
            result["backtest_peak_rss_mib"] = usage.ru_maxrss >> 10
            result["prometheus_peak_rss_mib"] = _vm_hwm_mib(prom.pid)
        if proc.returncode:
            result["error"] = stderr.strip()[-2000:]
        else:
            doc = json.loads(stdout)
            result["episodes"] = {
                a["key"]: len(a["episodes"]) for a in doc["sets"][0]["alerts"] if a["episodes"]
            }
            result["records_in_place"] = sum(v != "history" for v in doc["sets"][0]["records"].values())
    result["load_after"] = machine.load()
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
