"""Run the tests against each mutant: killed when a test fails, survived when all pass.

Per mutant, in a throwaway copy of the rules and tests (workspace.py):
  1. `promtool check rules` on the changed file: a mutant it rejects is invalid, not run;
  2. `promtool test rules` on every test file that loads the changed file (the generated tests in
     promtool/ and the hand-written ones in tests/promtool/), with a JUnit report naming what failed
     (with --first-kill one file at a time, smallest first, stopping at the first that fails). As
     `servewatch test` does, each file runs as slices, each test against the rules it observes
     (servewatch/rule_slices.py), and a slice that passed before on the same bytes is not run again
     (servewatch/verdicts.py): a mutant runs only the tests whose rules it changed. `--whole` runs
     every file whole, as the mutation runs before 2026-12-05 did;
  3. with incidents, for a mutant the promtool tests did not kill: the real-Prometheus incident
     tests (tests/test_alerts_on_incidents.py), pointed at the copy by SERVEWATCH_RULES_DIR. A
     failure there counts as a kill only when the failed tests fail again on a rerun: a server test
     that failed once under load (a flake) must not pass for a test that notices the mutant; the
     module then runs once more, and a mutant whose failures never repeat is an error, not a kill.
Mutants run in parallel (a thread per job, each waiting on its own child processes), every child with
GOMAXPROCS=1 so that N jobs use about N cores, and each mutant has one deadline for all its steps.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from servewatch import tools, verdicts, verify, yamlio

from . import tree, workspace
from .mutants import Mutant
from .rules import Rule
from .workspace import Edit

INCIDENT_TESTS = "tests/test_alerts_on_incidents.py"
INCIDENT_OPTIONS = ("--install-tools",)  # pytest's options for them and for a rerun of their failures
RULES_ENV = "SERVEWATCH_RULES_DIR"  # the incident tests read the rule files from this folder when set


@dataclass(frozen=True)
class Options:
    root: Path
    with_incidents: bool = False
    jobs: int = 2
    timeout_s: float = 300.0
    first_kill: bool = False  # stop at the first test file that fails: faster, killed_by names only it
    whole: bool = False  # run test files whole, not each test against the rules it observes
    source: Path | None = None  # where rules/ and the tests are copied from (--specs: a build); None: root
    incidents: tuple[str, ...] = (INCIDENT_TESTS,)  # what the incident stage runs, from root

    @property
    def tests_root(self) -> Path:
        return self.source or self.root


@dataclass(frozen=True)
class Result:
    status: str  # killed | survived | invalid | timeout | error
    killed_by: tuple[str, ...] = ()  # the failing tests, `file: test name`
    detail: str = ""
    seconds: float = 0.0
    stage: str = ""  # what decided it: promtool | incidents


@dataclass
class _Step:
    returncode: int
    output: str
    timed_out: bool = False


class _Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.1)


def _run(cmd: list[str], cwd: Path, deadline: _Deadline, env: dict | None = None) -> _Step:
    """Run cmd in its own process group, so a timeout ends it and every process it started."""
    full_env = {**os.environ, "GOMAXPROCS": "1", **(env or {})}
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=deadline.left())
        return _Step(proc.returncode, out)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return _Step(-9, out, timed_out=True)


def junit_failures(path: Path) -> list[str]:
    """`suite: test case` for each failing case of a promtool JUnit report."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                out.append(f"{suite.get('name')}: {case.get('name')}")
    return out


def pytest_failures(output: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", output, re.M)]


def pytest_reason(output: str) -> str:
    """The first failure's reason: the first `E` line of its traceback (the short summary cuts it to
    the terminal's width)."""
    m = re.search(r"^E\s+(.+)$", output, re.M)
    return m.group(1).strip() if m else ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


@dataclass
class _Checker:
    """The test steps for one workspace; `check` returns None when every test passed."""

    opts: Options
    promtool: str = field(init=False)

    def __post_init__(self):
        self.promtool = str(tools.find("promtool"))

    def check(self, work: Path, changed: set[str], deadline: _Deadline) -> Result | None:
        step = _run(
            [self.promtool, "check", "rules", *(f"rules/{f}" for f in sorted(changed))], work, deadline
        )
        if step.timed_out:
            return Result("timeout", detail="promtool check rules")
        if step.returncode != 0:
            return Result("invalid", detail="promtool check rules: " + _first_line(step.output))
        tests = [t for t in workspace.test_files(work) if changed & workspace.rule_files_of(work, t)]
        if self.opts.first_kill:  # the smallest files first: most mutants die in a cheap one
            batches = [[t] for t in sorted(tests, key=lambda t: ((work / t).stat().st_size, str(t)))]
        else:
            batches = [tests] if tests else []
        for batch in batches:
            result = self._promtool_tests(work, batch, deadline)
            if result is not None:
                return result
        if self.opts.with_incidents:
            return self._incidents(work, deadline)
        return None

    def _promtool_tests(self, work: Path, tests: list[Path], deadline: _Deadline) -> Result | None:
        if self.opts.whole:
            return self._whole_files(work, tests, deadline)
        kills = []
        with tempfile.TemporaryDirectory(prefix="slices-", dir=work) as scratch:
            for test in tests:
                result = self._slices(work, test, Path(scratch), deadline)
                if result is not None and result.status != "killed":
                    return result  # a timeout decides the mutant
                kills += [result] if result is not None else []
        if not kills:
            return None
        failed = tuple(name for k in kills for name in k.killed_by)
        return Result("killed", failed, "" if failed else kills[0].detail, stage="promtool")

    def _slices(self, work: Path, test: Path, scratch: Path, deadline: _Deadline) -> Result | None:
        """`test`'s slices that did not pass before on the same bytes, each run as promtool reads it
        from its own folder; the failures are named after the test file the user has."""
        path = work / test
        doc = yamlio.load(path.read_text()) or {}
        cut = verify.sliced(path, doc, scratch)
        if cut is None:
            return self._whole_files(work, [test], deadline)
        failed, detail = [], ""
        for test_file, rule_files, *_ in cut:
            run_key = verdicts.key(["test", "rules", test_file.name], [test_file, *rule_files])
            if verdicts.passed(run_key):
                continue
            junit = test_file.parent / "junit.xml"
            cmd = [self.promtool, "test", "rules", f"--junit={junit}", test_file.name]
            step = _run(cmd, test_file.parent, deadline)
            if step.timed_out:
                return Result("timeout", detail="promtool test rules")
            if step.returncode == 0:
                verdicts.remember(run_key)
                continue
            failed += [f"{test}: {line.split(': ', 1)[-1]}" for line in junit_failures(junit)]
            detail = detail or _first_line(step.output)
        if failed or detail:
            return Result("killed", tuple(failed), "" if failed else detail, stage="promtool")
        return None

    def _whole_files(self, work: Path, tests: list[Path], deadline: _Deadline) -> Result | None:
        junit = work / "junit.xml"
        step = _run([self.promtool, "test", "rules", f"--junit={junit}", *map(str, tests)], work, deadline)
        if step.timed_out:
            return Result("timeout", detail="promtool test rules")
        if step.returncode != 0:
            failed = junit_failures(junit)
            detail = "" if failed else _first_line(step.output)
            return Result("killed", tuple(failed), detail, stage="promtool")
        return None

    def _incidents(self, work: Path, deadline: _Deadline) -> Result | None:
        unrepeated: list[str] = []  # `test: reason` of each failure that passed when run again
        for _ in range(2):  # a second run only after failures that did not repeat
            step = self._pytest(work, self.opts.incidents, deadline)
            if step.returncode == 0:
                # the mutant passed the module; a flake before it is kept for whoever chases it
                return Result("survived", detail=self._flakes(unrepeated)) if unrepeated else None
            if step.returncode != 1 or step.timed_out:
                return self._incident_error(step)
            failed = pytest_failures(step.output)
            again = self._pytest(work, failed, deadline) if failed else step
            if again.returncode == 1:  # the same tests fail again: the mutant's doing
                reason = pytest_reason(again.output) or pytest_reason(step.output)
                return Result("killed", tuple(pytest_failures(again.output)), reason, stage="incidents")
            if again.returncode != 0 or again.timed_out:
                return self._incident_error(again)
            unrepeated.append(f"{', '.join(failed)}: {pytest_reason(step.output) or '(no reason shown)'}")
        return Result("error", detail="failures that never repeated: " + self._flakes(unrepeated))

    @staticmethod
    def _flakes(unrepeated: list[str]) -> str:
        return "incident tests failed once and passed on a rerun: " + "; ".join(unrepeated)

    def _pytest(self, work: Path, tests, deadline: _Deadline) -> _Step:
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *INCIDENT_OPTIONS]
        cmd += tests
        return _run(cmd, self.opts.root, deadline, {RULES_ENV: str(work / workspace.RULES)})

    @staticmethod
    def _incident_error(step: _Step) -> Result:
        if step.timed_out:
            return Result("timeout", detail="incident tests")
        tail = " | ".join(step.output.strip().splitlines()[-3:])
        return Result("error", detail=f"incident tests exited {step.returncode}: {tail}")


def run_edits(opts: Options, edits: list[Edit], checker: _Checker | None = None) -> Result:
    """The tests' verdict on the repo's rules with these edits."""
    checker = checker or _Checker(opts)
    started = time.monotonic()
    deadline = _Deadline(opts.timeout_s)
    work = workspace.create(opts.tests_root, edits)
    try:
        result = checker.check(work, {e.rule.file for e in edits}, deadline) or Result("survived")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return replace(result, seconds=round(time.monotonic() - started, 1))


def baseline(opts: Options, rules: list[Rule]) -> Result:
    """Every rule printed back through the mutator's tree, nothing changed: every test must pass.

    This proves the harness itself (the copy, the printer, the test selection) before any mutant
    is blamed on the tests."""
    edits = [Edit(r, tree.render(tree.parse(r.expr))) for r in rules]
    return run_edits(opts, edits)


def run(opts: Options, mutants: list[Mutant], progress: Callable[[str], None] = print) -> dict[str, Result]:
    """Each mutant's result, by id; invalid mutants are not run."""
    checker = _Checker(opts)
    results: dict[str, Result] = {}
    lock = threading.Lock()
    done = [0]

    def one(m: Mutant) -> None:
        if m.invalid:
            result = Result("invalid", detail=m.invalid)
        else:
            result = run_edits(opts, [Edit(m.rule, m.expr, m.for_)], checker)
        with lock:
            results[m.id] = result
            done[0] += 1
            progress(f"[{done[0]}/{len(mutants)}] {result.status:8} {result.seconds:6.1f}s  {m.id}")

    with ThreadPoolExecutor(max_workers=max(opts.jobs, 1)) as pool:
        for future in [pool.submit(one, m) for m in mutants]:
            future.result()
    return results
