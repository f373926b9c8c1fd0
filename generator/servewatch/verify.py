"""`servewatch test`: check the generated rule files and run promtool's unit tests on them.

When a scenario fails because an override in overrides.yaml moved a threshold or a `for` it was
written for, or cannot be computed at all for the tuned alert (scenarios.py), the test says so in one
paragraph: the scenario, its file:line, the override and what to do. promtool's own output is kept for
failures no override explains: those mean the rules or the scenarios are wrong.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import scenarios, tools
from .errors import ServewatchError

FAILED_RE = re.compile(r"^\s+name: (?P<name>.*),\s*$")
TUNABLE = ("threshold", "for_", "keep_firing_for", "min_traffic")  # what moves a scenario's numbers


def rule_files(root: Path) -> list[Path]:
    return sorted((root / "rules").glob("*.rules.yaml"))


def test_files(root: Path, extra: list[Path] = ()) -> list[Path]:
    return sorted((root / "promtool").glob("*.test.yaml")) + list(extra)


def run(root: Path, extra_tests: list[Path] = (), echo=print, specs: Path | None = None) -> bool:
    """Check and unit-test the rules under `root`; `specs` (default: root/specs) explains failures."""
    ok = True
    rules = rule_files(root)
    if not rules:
        echo("servewatch: no rule files under rules/; run `servewatch generate` first")
        return False
    res = tools.run("promtool", "check", "rules", "--lint=all", "--lint-fatal", *rules)
    echo((res.stdout + res.stderr).strip())
    ok &= res.returncode == 0
    tests = test_files(root, list(extra_tests))
    res = tools.run("promtool", "test", "rules", *tests)
    out = (res.stdout + res.stderr).strip()
    model = _model(specs if specs is not None else root / "specs")
    explained = _explain_failures(model, failed_tests(out)) if model is not None else {}
    echo(_without(out, explained))
    ok &= res.returncode == 0
    for paragraph in explained.values():
        echo(paragraph)
    for scenario, why in _unadaptable(model):
        echo(cannot_adapt(model, scenario, why))
        ok = False
    return ok


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
    from .render import unit_tests

    if model is None:
        return []
    try:
        return unit_tests.scenario_tests(model)[1]
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
