"""`servewatch test`: check the generated rule files and run promtool's unit tests on them.

When a scenario fails because an override in overrides.yaml moved a threshold or a `for` it was
written for, or cannot be computed at all for the tuned alert (scenarios.py), the test says so in one
paragraph: the scenario, its file:line, the override and what to do. promtool's own output is kept for
failures no override explains: those mean the rules or the scenarios are wrong.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from . import promtool_cost, rule_slices, scenarios, tools
from .errors import ServewatchError
from .promtool_runs import PromtoolJob, PromtoolResult, run_all, run_one

FAILED_RE = re.compile(r"^\s+name: (?P<name>.*),\s*$")
TUNABLE = ("threshold", "for_", "keep_firing_for", "min_traffic")  # what moves a scenario's numbers


def rule_files(root: Path) -> list[Path]:
    return sorted((root / "rules").glob("*.rules.yaml"))


def test_files(root: Path, extra: list[Path] = ()) -> list[Path]:
    return sorted((root / "promtool").glob("*.test.yaml")) + list(extra)


def run(
    root: Path,
    extra_tests: list[Path] = (),
    echo=print,
    specs: Path | None = None,
    cache: bool = True,
    jobs: int | None = None,
    whole: bool = False,
) -> bool:
    """Check and unit-test the rules under `root`; `specs` (default: root/specs) explains failures.
    The test files run side by side on `jobs` processes (default: one per core), each test against
    the rules it observes (rule_slices.py) unless `whole`; a run whose promtool, arguments and files
    all passed before is not run again unless `cache` is off."""
    rules = rule_files(root)
    if not rules:
        echo("servewatch: no rule files under rules/; run `servewatch generate` first")
        return False
    tools.ensure("promtool")
    checked = PromtoolJob(
        ("check", "rules", "--lint=all", "--lint-fatal"),
        tuple(rules),
        tuple(rules),
        f"{len(rules)} rule files",
    )
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="servewatch-slices-") as scratch:
        paths = test_files(root, list(extra_tests))
        units = _units(paths, jobs or os.cpu_count() or 1, None if whole else Path(scratch))
        results = run_all([checked, *units], cache, jobs)
        results = [results[0], *(_confirmed(r, cache) for r in results[1:])]
    check_result, files = results[0], _by_file(results[1:])
    failed = [f for f in files if not f.passed]
    out = "\n".join(f.output for f in failed)
    model = _model(specs if specs is not None else root / "specs")
    explained = _explain_failures(model, failed_tests(out)) if model is not None and out else {}
    unadaptable = _unadaptable(model)
    # failures first, in full; then one line per file, the failed ones on top; then the total
    if not check_result.passed:
        echo(_compact(check_result.output))
    for outcome in failed:
        left = _compact(_without(outcome.output, explained))
        if left:  # promtool does not name the file it reports on
            echo(f"{outcome.path}, what promtool said:\n{left}")
    for paragraph in explained.values():
        echo(paragraph)
    for scenario, why in unadaptable:
        echo(cannot_adapt(model, scenario, why))
    if check_result.passed:
        echo(check_result.summary())
    for outcome in failed + [f for f in files if f.passed]:
        echo(outcome.line())
    ok = check_result.passed and not failed and not unadaptable
    echo(_total(check_result, files, len(unadaptable), time.monotonic() - start))
    return ok


def prove(paths: list[Path], cache: bool = True, whole: bool = False) -> list[PromtoolResult]:
    """`promtool test rules` on the test files at `paths`, as `servewatch test` runs them: each test
    against the rules it observes unless `whole`, side by side, a run that passed before on the same
    promtool and bytes not run again, a failure confirmed on the whole file (its output is promtool's
    on the files given)."""
    tools.ensure("promtool")
    with tempfile.TemporaryDirectory(prefix="servewatch-slices-") as scratch:
        jobs = _units(list(paths), os.cpu_count() or 1, None if whole else Path(scratch))
        return [_confirmed(r, cache) for r in run_all(jobs, cache, None)]


def _compact(text: str) -> str:
    """promtool's output without its blank lines."""
    return "\n".join(line for line in text.splitlines() if line.strip())


def _total(check: PromtoolResult, files: list[FileOutcome], unadaptable: int, seconds: float) -> str:
    tests = sum(f.tests for f in files)
    failed = sum(f.failures for f in files)
    kept = sum(f.cached for f in files)
    passed = check.passed and all(f.passed for f in files) and not unadaptable
    verdict = "passed" if passed else "FAILED"
    parts = [
        f"{len(files)} test files",
        _tests_text(tests),
        f"{failed} failed" if all(f.counted for f in files) else "failures uncounted (see above)",
    ]
    if not check.passed:
        parts.append("rule check failed")
    if unadaptable:
        parts.append(f"{unadaptable} scenario(s) cannot adapt")
    kept_text = f"; {kept} file(s) passed before on the same bytes and were not run again" if kept else ""
    return f"servewatch test: {verdict}: {', '.join(parts)} in {seconds:.1f} s{kept_text}"


# -- planning promtool's runs -------------------------------------------------------------------
@dataclass(frozen=True)
class FileOutcome:
    """What the shards of one test file proved together."""

    path: Path
    tests: int
    passed: bool
    output: str  # promtool's, of the shards that failed
    seconds: float  # promtool time over the shards
    runs: int  # promtool runs that prove it: slices, shards
    kept: int  # of those, the ones that passed before on the same bytes

    @property
    def cached(self) -> bool:
        return self.kept == self.runs

    @property
    def failed_names(self) -> list[str]:
        return list(failed_tests(self.output))

    @property
    def counted(self) -> bool:
        """Whether promtool named the failed tests (it does not when it cannot read the file)."""
        return self.passed or bool(self.failed_names)

    @property
    def failures(self) -> int:
        return len(self.failed_names)

    def line(self) -> str:
        how = "passed before on the same bytes" if self.cached else f"{self.seconds:.1f} s"
        if 0 < self.kept < self.runs:
            how += f"; {self.kept} of {self.runs} runs passed before on the same bytes"
        if self.passed:
            return f"{self.path}: {_tests_text(self.tests)} passed ({how})"
        what = f"{self.failures} of {self.tests} tests FAILED" if self.counted else "FAILED (see above)"
        return f"{self.path}: {what} ({self.seconds:.1f} s)"


def _by_file(results: list[PromtoolResult]) -> list[FileOutcome]:
    """The results of a file's shards, as one outcome per file, in the order the files came."""
    groups: dict[Path, list[PromtoolResult]] = {}
    for result in results:
        groups.setdefault(result.job.origin or result.job.files[0], []).append(result)
    return [
        FileOutcome(
            path,
            sum(r.job.tests for r in parts),
            all(r.passed for r in parts),
            "\n".join(r.output for r in parts if not r.passed),
            sum(r.seconds for r in parts),
            len(parts),
            sum(r.cached for r in parts),
        )
        for path, parts in groups.items()
    ]


class Slice(NamedTuple):
    """Tests of one file that promtool runs together, beside the rule files they load."""

    test_file: Path
    rule_files: tuple[Path, ...]
    names: list[str]
    tests: tuple[dict, ...]
    rules: int  # the rules in rule_files


def _units(paths: list[Path], cores: int, scratch: Path | None = None) -> list[PromtoolJob]:
    """The promtool runs that prove the test files at `paths`: per file, one run per slice of tests
    that observe the same rules (written under `scratch`; None runs every file whole), and a run that
    costs more than a core's share (promtool_cost.py) cut into shards of whole tests (promtool's
    --run), so every core has work."""
    planned, counted = [], {}
    for path in paths:
        doc = _load(path)  # read once: its rule files and its tests' names
        reads = _reads(path, doc)
        cut = sliced(path, doc, scratch) if scratch is not None else None
        if cut is None:
            for rule_path in (p for p in reads[1:] if p not in counted):
                counted[rule_path] = promtool_cost.rule_count([_load(rule_path)])
            tests = tuple(t for t in doc.get("tests") or [] if isinstance(t, dict))
            cut = [Slice(path, reads[1:], _names(doc), tests, sum(counted[p] for p in reads[1:]))]
        step = promtool_cost.interval_s(doc)
        for part in cut:
            costs = [promtool_cost.test_cost(t, step, part.rules) for t in part.tests]
            planned.append((path, part, costs, len(_names(doc))))
    fair = sum(sum(costs) for _, _, costs, _ in planned) / cores
    out = []
    for origin, part, costs, total in planned:
        names = part.names
        shards = min(cores, len(names)) if sum(costs) > fair else 1
        is_slice = part.test_file != origin
        for i in range(shards):
            these = names[i::shards]
            runs = tuple(run_only(n) for n in these) if shards > 1 else ()
            label = _tests_text(len(these)) if len(these) == total else f"{len(these)} of {total} tests"
            out.append(
                PromtoolJob(
                    ("test", "rules", *runs),
                    (part.test_file,),
                    (part.test_file, *part.rule_files),
                    label,
                    len(these),
                    sum(costs[i::shards]),
                    origin,
                    tuple(these) if is_slice else (),
                )
            )
    return out


def _names(doc: dict) -> list[str]:
    return [t.get("name", "") for t in doc.get("tests") or [] if isinstance(t, dict)]


def sliced(path: Path, doc: dict, scratch: Path) -> list[Slice] | None:
    """The test file at `path` as slices written under `scratch`; None when it runs whole (a name
    the closure cannot follow, a rule file that does not load, or one slice that keeps every rule)."""
    import yaml

    named = doc.get("rule_files") or []
    if not doc.get("tests") or not all(isinstance(r, str) and not GLOB_RE.search(r) for r in named):
        return None  # promtool expands globs; their order is its own
    rule_paths = [path.parent / r for r in named]
    if not all(p.is_file() for p in rule_paths):
        return None
    rule_docs = [_load(p) for p in rule_paths]
    try:
        cut = rule_slices.slices(doc, rule_docs)
    except rule_slices.Unsliceable:
        return None
    if len(cut) == 1 and cut[0].rules == promtool_cost.rule_count(rule_docs):
        return None
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    out = []
    for i, part in enumerate(cut):
        folder = scratch / f"{path.parent.name}-{path.stem}-{i}"
        folder.mkdir(parents=True)
        rule_files = []
        for k, (rule_path, rule_doc) in enumerate(zip(rule_paths, part.rule_docs, strict=True)):
            rule_file = folder / f"rules-{k}-{rule_path.name}"
            rule_file.write_text(yaml.dump(rule_doc, Dumper=dumper, sort_keys=False))
            rule_files.append(rule_file)
        test = {k: v for k, v in doc.items() if k not in ("rule_files", "tests")}
        test["rule_files"] = [f.name for f in rule_files]
        if "group_eval_order" in test:
            test["group_eval_order"] = [g for g in test["group_eval_order"] if g in part.group_names]
        test["tests"] = list(part.tests)
        test_file = folder / path.name
        test_file.write_text(yaml.dump(test, Dumper=dumper, sort_keys=False))
        out.append(Slice(test_file, tuple(rule_files), _names(test), tuple(part.tests), part.rules))
    return out


def _confirmed(result: PromtoolResult, cache: bool) -> PromtoolResult:
    """A slice that failed, run again on its whole test file, so what is reported is promtool's word
    on the files the user has; a slice that fails where the whole file passes is a servewatch bug,
    reported as such, never a pass."""
    job = result.job
    if result.passed or not job.names:
        return result
    failed = [n for n in failed_tests(result.output) if n in job.names] or job.names
    runs = tuple(run_only(n) for n in failed)
    reads = _reads(job.origin, _load(job.origin))
    whole = PromtoolJob(("test", "rules", *runs), (job.origin,), reads, job.label)
    again = run_one(whole, cache)
    output = again.output
    if again.passed:
        output = (
            f"servewatch: these tests failed against the rules they observe (a slice of the rule files) "
            f"and passed against the whole files: a servewatch bug; `servewatch test --whole` runs whole "
            f"files.\n{result.output}"
        )
    return PromtoolResult(job, False, output, result.seconds + again.seconds, False)


def _tests_text(n: int) -> str:
    return "1 test" if n == 1 else f"{n} tests"


def _load(path: Path) -> dict:
    import yaml

    from . import yamlio

    try:
        doc = yamlio.load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}  # promtool says what is wrong with it
    return doc if isinstance(doc, dict) else {}


def _reads(test_file: Path, doc: dict) -> tuple[Path, ...]:
    """The test file and the rule files its `doc` names (relative to it, as promtool reads them)."""
    rules = [test_file.parent / r for r in doc.get("rule_files") or [] if isinstance(r, str)]
    found = sorted({p for pattern in rules for p in (sorted(pattern.parent.glob(pattern.name)) or [pattern])})
    return (test_file, *(p for p in found if p.is_file()))


GLOB_RE = re.compile(r"[*?\[]")
GO_SPECIAL = set("\\.+*?()|[]{}^$")


def run_only(name: str) -> str:
    """promtool's `--run` flag that selects the test named `name` and no other."""
    return f"--run=^{_go_literal(name)}$"


def _go_literal(text: str) -> str:
    """`text` as a Go regular expression matching it literally."""
    return "".join("\\" + c if c in GO_SPECIAL else c for c in text)


# -- reading promtool ----------------------------------------------------------------------------
def failed_tests(output: str) -> dict[str, list[str]]:
    """name -> promtool's lines about it, for every failed test in `output`."""
    out: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        m = FAILED_RE.match(line)
        if m:
            current = m.group("name")
            out.setdefault(current, [])
        if line.strip() == "FAILED:":
            current = None
            continue
        if current is not None:
            out[current].append(line)
    return out


def _without(output: str, names) -> str:
    """promtool's output without the entries of tests in `names` (explained elsewhere), and without a
    FAILED: heading left with no entry under it."""
    kept, skipping = [], False
    for line in output.splitlines():
        m = FAILED_RE.match(line)
        if m:
            skipping = m.group("name") in names
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    out = [
        line
        for i, line in enumerate(kept)
        if line.strip() != "FAILED:" or (i + 1 < len(kept) and FAILED_RE.match(kept[i + 1]))
    ]
    return "\n".join(out).strip()


# -- explaining ----------------------------------------------------------------------------------
def _model(specs: Path):
    """The model of `specs`, or None when there are none (or they do not load: `check` says why)."""
    from .model import Model
    from .spec.loader import load

    if not specs.is_dir():
        return None
    try:
        return Model(load(specs))
    except ServewatchError:
        return None


def _unadaptable(model) -> list:
    from .plan.scenario_tests import scenario_tests

    if model is None:
        return []
    try:
        return scenario_tests(model)[1]
    except (ServewatchError, scenarios.ExpressionError):
        return []


def tunings(model, alert_names) -> list[str]:
    """'overrides.yaml:4: X threshold 0.99 (specs: 0.95)' for each override that moves a number of an
    alert in `alert_names`."""
    spec, out = model.spec, []
    written = {a.alert: a for g in spec.groups for a in g.alerts}
    for name in sorted(set(alert_names)):
        ov = spec.overrides.alerts.get(name)
        if ov is None or name not in written:
            continue
        moved = [
            f"{field.rstrip('_')} {_show(getattr(ov, field))} (specs: {_show(getattr(written[name], field))})"
            for field in TUNABLE
            if getattr(ov, field) is not None and getattr(ov, field) != getattr(written[name], field)
        ]
        if moved:
            out.append(f"{_line(spec.locate('override of alert', name))}: {name} {', '.join(moved)}")
    return out


def _line(location) -> str:
    """file:line of a spec location, without its field path."""
    return location.file if location.line is None else f"{location.file}:{location.line}"


def _show(value) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _alerts_of(scenario) -> set[str]:
    return {scenario.alert} | {e.alert for e in scenario.expect if e.alert}


def _is_relative(scenario) -> bool:
    texts = [text for s in scenario.series for text in (s.series, s.values)]
    return (
        bool(scenario.let)
        or any(scenarios.is_relative(text) for text in texts)
        or any(not scenarios.is_duration(e.at) for e in scenario.expect)
    )


def _what_to_do(scenario) -> str:
    return (
        f'or disable it (overrides: {{scenarios: {{"{scenario.name}": {{enabled: false}}}}}}) and prove '
        "your tuning with a scenario of your own"
    )


def _explain_failures(model, failed: dict[str, list[str]]) -> dict[str, str]:
    """name -> paragraph, for each failed scenario whose alerts an override tuned."""
    by_name = {s.name: s for s in model.spec.scenarios}
    out = {}
    for name in failed:
        scenario = by_name.get(name)
        moved = tunings(model, _alerts_of(scenario)) if scenario is not None else []
        if not moved:
            continue
        where = _line(model.spec.locate("scenario", name))
        if _is_relative(scenario):
            written = (
                "It is written against the resolved threshold and `for`, but one of its literal numbers "
                "or times still assumes the specs' values"
            )
        else:
            written = "Its values and times are literal numbers, written for the specs' threshold and `for`"
        out[name] = (
            f"servewatch: scenario {name!r} ({where}) no longer holds after tuning: "
            f"{'; '.join(moved)}. {written}. Write them against the resolved values ('${{above}}x${{span}}', "
            "at: 'for + 2m'; README, \"Tuning thresholds and the scenarios\") "
            f"{_what_to_do(scenario)}."
        )
    return out


def cannot_adapt(model, scenario, why: str) -> str:
    where = _line(model.spec.locate("scenario", scenario.name))
    moved = tunings(model, _alerts_of(scenario))
    cause = f"; the tuning: {'; '.join(moved)}" if moved else ""
    return (
        f"servewatch: scenario {scenario.name!r} ({where}) cannot adapt to the alerts as tuned: "
        f"{why}{cause}. Change the tuning, {_what_to_do(scenario)}."
    )
