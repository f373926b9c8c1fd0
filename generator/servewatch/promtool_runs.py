"""Running `servewatch test`'s promtool jobs side by side: the costliest first, the cheap ones packed.

Each job is one promtool run as verify.py plans it (a test file, a slice of one, a shard, the rule
check). The jobs that passed before on the same promtool and bytes are not run (verdicts.py). Of the
rest, a job costing less than a pack's share (promtool_cost.py) shares a promtool process with other
cheap ones: `promtool test rules a b c d` pays promtool's start and the rule parsing once. A pack that
passes gives each of its files a pass of its own (the same verdict as the file run alone); a pack that
fails runs each of its files again alone, so the failure is named on the file that has it and no
other. promtool runs with GOGC=400 unless the user set GOGC: 10-20% less CPU for a larger heap.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import tools, verdicts

PACKS_PER_WORKER = 4  # the cheap jobs are dealt into this many packs per worker
GOGC = "400"  # Go collects a quarter as often: 10-20% less CPU, about 1.7x the peak memory


@dataclass(frozen=True)
class PromtoolJob:
    args: tuple[str, ...]  # promtool's arguments before the files
    files: tuple[Path, ...]  # the files named on its command line
    reads: tuple[Path, ...]  # every file its verdict depends on
    label: str  # what it proves, for the summary
    tests: int = 0  # the unit tests it runs
    cost: float = 0.0  # its estimated cost (promtool_cost.py), to order and pack the jobs
    origin: Path | None = None  # the test file it proves (files[0] when run whole)
    names: tuple[str, ...] = ()  # the tests it runs, when it runs a slice of them

    @property
    def packable(self) -> bool:
        """Whether it can share a promtool process: one test file, all its tests."""
        return self.args == ("test", "rules") and len(self.files) == 1


@dataclass(frozen=True)
class PromtoolResult:
    job: PromtoolJob
    passed: bool
    output: str
    seconds: float
    cached: bool

    def summary(self) -> str:
        """One line for a passed rule check: which files, how long."""
        how = "passed before on the same bytes" if self.cached else f"{self.seconds:.1f} s"
        return f"promtool check rules: {self.job.label} passed ({how})"


def environment() -> dict[str, str]:
    """promtool's environment: the user's, with GOGC=400 unless the user set GOGC."""
    env = dict(os.environ)
    env.setdefault("GOGC", GOGC)
    return env


def run_all(jobs: list[PromtoolJob], cache: bool, workers: int | None) -> list[PromtoolResult]:
    """Every job's result, in the order given; the costliest runs start first, so the last to finish
    is a short one."""
    workers = workers or os.cpu_count() or 1
    keys = {job: _key(job) for job in jobs}
    kept = [job for job in jobs if cache and verdicts.passed(keys[job])]
    done = {job: PromtoolResult(job, True, "", 0.0, True) for job in kept}
    runs = packed([job for job in jobs if job not in done], workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_run_pack, run, keys) for run in runs]
        for future in futures:
            done.update(future.result())
    return [done[job] for job in jobs]


def packed(jobs: list[PromtoolJob], workers: int) -> list[tuple[PromtoolJob, ...]]:
    """The promtool runs that do `jobs`, costliest first: a job alone when it costs a pack's share or
    more (the total over workers x PACKS_PER_WORKER), the cheaper packable ones dealt into at most
    that many packs, each to the pack that costs least so far."""
    jobs = sorted(jobs, key=lambda j: -j.cost)  # stable: equal costs keep the order given
    share = sum(j.cost for j in jobs) / (workers * PACKS_PER_WORKER)
    alone = [(j,) for j in jobs if j.cost >= share or not j.packable]
    cheap = [j for j in jobs if j.cost < share and j.packable]
    packs: list[list[PromtoolJob]] = [[] for _ in range(min(len(cheap), workers * PACKS_PER_WORKER))]
    for job in cheap:
        min(packs, key=lambda p: sum(j.cost for j in p)).append(job)
    return sorted(alone + [tuple(p) for p in packs], key=lambda run: -sum(j.cost for j in run))


def _run_pack(pack: tuple[PromtoolJob, ...], keys: dict) -> dict[PromtoolJob, PromtoolResult]:
    if len(pack) == 1:
        return {pack[0]: run_one(pack[0], cache=False, run_key=keys[pack[0]])}
    start = time.monotonic()
    res = tools.run("promtool", "test", "rules", *(j.files[0] for j in pack), env=environment())
    if res.returncode != 0:  # each file alone: only the one that fails is named
        return {job: run_one(job, cache=False, run_key=keys[job]) for job in pack}
    seconds, cost = time.monotonic() - start, sum(j.cost for j in pack)
    for job in pack:
        verdicts.remember(keys[job])
    part = {job: job.cost / cost if cost else 1 / len(pack) for job in pack}  # its share of the time
    return {job: PromtoolResult(job, True, "", seconds * part[job], False) for job in pack}


def _key(job: PromtoolJob) -> str:
    return verdicts.key([*job.args, *(p.name for p in job.files)], job.reads)


def run_one(job: PromtoolJob, cache: bool, run_key: str | None = None) -> PromtoolResult:
    """`job` on a promtool process of its own, unless it passed before (`cache`)."""
    run_key = run_key or _key(job)
    if cache and verdicts.passed(run_key):
        return PromtoolResult(job, True, "", 0.0, True)
    start = time.monotonic()
    res = tools.run("promtool", *job.args, *job.files, env=environment())
    seconds = time.monotonic() - start
    if res.returncode == 0:
        verdicts.remember(run_key)
    return PromtoolResult(job, res.returncode == 0, (res.stdout + res.stderr).strip(), seconds, False)
