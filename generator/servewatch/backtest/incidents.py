"""--incidents FILE: the incidents a team knows of, and whether the back-test caught each.

The file (YAML or JSON) lists ``incidents:``, each with ``name``, ``start``, ``end`` (RFC 3339 or
Unix seconds), the ``alert`` expected to page and the ``labels`` it should carry (a subset of the
alert's labels). An incident is caught by the first episode of that alert whose labels include
those and that was firing at some time between the incident's start and its end; the delay is from
the incident's start to that episode's start (0 when it was already firing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from . import timespec
from .evaluate import BacktestError
from .runner import BacktestResult

FIELDS = {"name", "start", "end", "alert", "labels"}


@dataclass(frozen=True)
class Incident:
    name: str
    start: float
    end: float
    alert: str
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Verdict:
    incident: Incident
    caught: bool
    delay_s: float | None = None
    labels: tuple[tuple[str, str], ...] = ()  # of the episode that caught it


def load(path: Path, now: float) -> list[Incident]:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise BacktestError(f"--incidents {path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise BacktestError(f"{path}{where}: not YAML or JSON ({getattr(exc, 'problem', exc)})") from None
    items = doc.get("incidents") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise BacktestError(f"{path}: want a mapping with a list under `incidents:`")
    out = []
    for i, item in enumerate(items):
        where = f"{path}: incidents[{i}]"
        if not isinstance(item, dict):
            raise BacktestError(f"{where}: want a mapping with {', '.join(sorted(FIELDS))}")
        unknown = set(item) - FIELDS
        missing = {"start", "end", "alert"} - set(item)
        if unknown or missing:
            raise BacktestError(
                f"{where}: "
                + "; ".join(
                    [f"unknown field {k!r}" for k in sorted(unknown)]
                    + [f"missing field {k!r}" for k in sorted(missing)]
                )
            )
        labels = item.get("labels") or {}
        if not isinstance(labels, dict):
            raise BacktestError(f"{where}.labels: want a mapping of label names to values")
        start = timespec.when(item["start"], now, f"{where}.start")
        end = timespec.when(item["end"], now, f"{where}.end")
        if end < start:
            raise BacktestError(f"{where}: end is before start")
        name = str(item.get("name") or f"{item['alert']} #{i + 1}")
        out.append(
            Incident(
                name,
                start,
                end,
                str(item["alert"]),
                tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            )
        )
    return out


def judge(incidents: list[Incident], result: BacktestResult) -> list[Verdict]:
    verdicts = []
    for inc in incidents:
        want = dict(inc.labels)
        best = None
        for a in result.alerts:
            if a.rule.name != inc.alert:
                continue
            for e in a.episodes:
                labels = dict(e.labels)
                end = e.end if e.end is not None else result.end
                if any(labels.get(k) != v for k, v in want.items()):
                    continue
                if e.start <= inc.end and end > inc.start and (best is None or e.start < best.start):
                    best = e
        if best is None:
            verdicts.append(Verdict(inc, False))
        else:
            verdicts.append(Verdict(inc, True, max(0.0, best.start - inc.start), best.labels))
    return verdicts
