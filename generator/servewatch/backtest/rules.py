"""The generated alerting and recording rules, read from the rule files as Prometheus would load them.

Everything the back-test applies comes from the rule files themselves (``for``, ``keep_firing_for``,
``labels``, the group's ``interval``), so a field added to the generated rules is honoured without
the model being asked about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..render import rules as rule_render
from ..spec.loader import load
from ..spec.schema import seconds
from ..validation import validate


@dataclass(frozen=True)
class Record:
    name: str
    expr: str
    labels: tuple[tuple[str, str], ...]
    interval: float  # seconds between evaluations of its group


@dataclass(frozen=True)
class BacktestAlertRule:
    name: str
    expr: str
    for_s: float
    keep_firing_for_s: float
    labels: tuple[tuple[str, str], ...]  # the rule's own labels (severity, tier, ...)
    group: str
    file: str
    interval: float
    index: int = 0  # the rule's place among the rules of the same alert name (SLO tiers share one)

    @property
    def key(self) -> str:
        """Unique over the rule set: the name, and the tier's labels when the name is shared."""
        own = dict(self.labels)
        extra = ",".join(f"{k}={own[k]}" for k in ("tier", "long", "short") if k in own)
        return f"{self.name}{{{extra}}}" if extra else self.name


@dataclass(frozen=True)
class RuleSet:
    alerts: tuple[BacktestAlertRule, ...]
    records: dict[str, tuple[Record, ...]] = field(default_factory=dict)

    def alert_names(self) -> list[str]:
        return sorted({a.name for a in self.alerts})


def from_files(files: dict[str, str], default_interval: float) -> RuleSet:
    """The rules of the plain rule files among `files` ({path: text}, as the renderers produce them)."""
    alerts: list[BacktestAlertRule] = []
    records: dict[str, list[Record]] = {}
    seen: dict[str, int] = {}
    for path in sorted(files):
        if not (path.startswith("rules/") and path.endswith(".rules.yaml") and path.count("/") == 1):
            continue
        body = yaml.safe_load(files[path]) or {}
        for group in body.get("groups") or []:
            interval = seconds(group["interval"]) if group.get("interval") else default_interval
            for rule in group.get("rules") or []:
                labels = tuple(sorted((rule.get("labels") or {}).items()))
                if "record" in rule:
                    rec = Record(rule["record"], rule["expr"], labels, interval)
                    records.setdefault(rec.name, []).append(rec)
                    continue
                name = rule["alert"]
                seen[name] = seen.get(name, -1) + 1
                alerts.append(
                    BacktestAlertRule(
                        name=name,
                        expr=rule["expr"],
                        for_s=seconds(rule.get("for") or "0s"),
                        keep_firing_for_s=seconds(rule.get("keep_firing_for") or "0s"),
                        labels=labels,
                        group=group["name"],
                        file=path,
                        interval=interval,
                        index=seen[name],
                    )
                )
    return RuleSet(tuple(alerts), {k: tuple(v) for k, v in records.items()})


def generated_files(specs: Path) -> dict[str, str]:
    """The rule files `servewatch generate` would write for `specs` (validated; nothing is written)."""
    return rule_render.render(validate(load(Path(specs))).model)


def from_specs(specs: Path, default_interval: float) -> RuleSet:
    return from_files(generated_files(specs), default_interval)
