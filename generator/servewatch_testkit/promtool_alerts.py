"""Prometheus's own alert states on synthetic series: the ALERTS that promtool's rule engine writes.

``promtool test rules`` runs Prometheus's rule manager (the code a server runs: rules/alerting.go,
``for``, ``keep_firing_for``, ALERTS and ALERTS_FOR_STATE) on a simulated clock over input series, so
it evaluates a day of rules in seconds. It only checks what a test expects, so ``firing`` asks it for
``ALERTS{alertstate="firing"}`` at every evaluation, expecting nothing, and reads what it got from
its failure report. Caveat of the simulated clock: every group is evaluated at the test's
``evaluation_interval`` (promtool ignores a group's own ``interval``), at 0, interval, 2 x interval, ...
Groups are evaluated producers first (``group_eval_order``): a group that reads another's records
sees their values of the same instant, as a back-test that evaluates them in place does. Only the
alerts and the records they read, directly or through other records, are evaluated, over only the
series those rules select: nothing else can change an alert's state.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Collection, Iterable, Sequence


from servewatch.spec.schema import seconds

from .rule_reads import alerts_closure, names_read
from .rule_stages import reads
from .synth.series import Series

_SAMPLE = re.compile(r'\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\} \S+')
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_HEADER = re.compile(r'expr: ".*", time: (\S+),$')

Labels = tuple[tuple[str, str], ...]


def _selector(s: Series) -> str:
    labels = ", ".join(f"{k}={json.dumps(v)}" for k, v in s.labels)
    return f"{s.name}{{{labels}}}"


def _values(s: Series) -> str:
    return " ".join("_" if v is None else repr(float(v)) for v in s.values)


def _eval_order(groups: list[dict]) -> list[str]:
    """The names of `groups`, each after the groups whose records it reads (their order otherwise)."""
    producer = {r["record"]: g["name"] for g in groups for r in g.get("rules") or [] if "record" in r}
    needs = {
        g["name"]: {producer[n] for r in g.get("rules") or [] for n in reads(r["expr"]) if n in producer}
        - {g["name"]}
        for g in groups
    }
    order: list[str] = []
    placing: set[str] = set()

    def place(name: str) -> None:
        if name in order or name in placing:  # placed, or a cycle: keep file order
            return
        placing.add(name)
        for dep in sorted(needs[name]):
            place(dep)
        order.append(name)

    for g in groups:
        place(g["name"])
    return order


def firing(
    series: Iterable[Series],
    steps: int,
    step: float,
    rule_files: Sequence[Path],
    evaluations: int | None = None,
    alerts: Collection[str] | None = None,
) -> dict[Labels, list[float]]:
    """alert labels -> the evaluation times (seconds from the first sample) at which it was firing,
    for the alerts named in ``alerts`` (every alert when None)."""
    from servewatch import promtool_runs, tools

    evaluations = steps if evaluations is None else evaluations
    interval = f"{int(step)}s"
    groups = alerts_closure(rule_files, alerts)
    if not groups:
        return {}  # no alert to evaluate, so none fires
    test = {
        "rule_files": ["alerts.rules.yaml"],
        "evaluation_interval": interval,
        "group_eval_order": _eval_order(groups),
        "tests": [
            {
                "interval": interval,
                "input_series": [],
                "promql_expr_test": [
                    {
                        "expr": 'ALERTS{alertstate="firing"}',
                        "eval_time": f"{int(i * step)}s",
                        "exp_samples": [],
                    }
                    for i in range(evaluations)
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory(prefix="servewatch-alerts-") as tmp:
        rules = Path(tmp) / "alerts.rules.yaml"
        rules.write_text(json.dumps({"groups": groups}))
        names = names_read(groups)
        test["tests"][0]["input_series"] = [
            {"series": _selector(s), "values": _values(s)} for s in series if names is None or s.name in names
        ]
        path = Path(tmp) / "alerts.test.yaml"
        path.write_text(json.dumps(test))  # JSON is YAML, and written in a fraction of the time
        p = subprocess.run(
            [tools.find("promtool"), "test", "rules", str(path)],
            capture_output=True,
            text=True,
            env=promtool_runs.environment(),
        )
    out: dict[Labels, list[float]] = {}
    at = None
    for line in (p.stdout + "\n" + p.stderr).splitlines():
        line = line.strip()
        if m := _HEADER.match(line):
            at = seconds(m.group(1))
        elif line.startswith("got:") and at is not None:
            for sample in _SAMPLE.finditer(line):
                labels = {
                    k: json.loads(f'"{v}"')
                    for k, v in _PAIR.findall(sample.group(1))
                    if k not in ("__name__", "alertstate")
                }
                out.setdefault(tuple(sorted(labels.items())), []).append(at)
    if p.returncode and not out:
        raise RuntimeError(
            f"promtool test rules failed without reporting alerts:\n{p.stdout[-2000:]}{p.stderr[-2000:]}"
        )
    return {k: sorted(v) for k, v in out.items()}


def episodes(times: list[float], step: float, last: float) -> list[tuple[float, float | None]]:
    """(start, end) of each firing stretch: end is the first evaluation no longer firing, None when it
    was still firing at `last`, the last evaluation."""
    out: list[tuple[float, float | None]] = []
    for t in times:
        if out and out[-1][1] == t:
            out[-1] = (out[-1][0], t + step)
        else:
            out.append((t, t + step))
    return [(a, None if b > last else b) for a, b in out]
