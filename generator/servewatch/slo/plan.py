"""The SLO rule groups: one group per SLO (its recordings in dependency order, then one burn-rate
alert per window row), and one goodput group. model.py turns them into RuleGroups like the rest.

A group per SLO keeps the recordings an alert reads in the alert's own group, so each evaluation
reads the values just recorded, and keeps every group under the rulers' 20-rule limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..spec import slos as s
from ..spec.schema import Dashboard
from ..templates import humanize_percentage
from .exprs import OBJECTIVE, REMAINING, SloExprs, sli_windows

GROUP_PREFIX = "slo-"
GOODPUT_GROUP = "slo-goodput"
FAMILY = "slo"
TIER_PACE = {"page": "fast", "ticket": "steadily"}


def group_rule_count(slo: s.SLO, rate_window: str) -> int:
    """Rules in an SLO's group: valid, good, objective, one error ratio per window, the remaining
    budget, one alert per row."""
    return 4 + len(sli_windows(slo, rate_window)) + len(slo.alerting.windows)


@dataclass(frozen=True)
class BurnAlert:
    """One burn-rate row of an SLO as an alert. It offers what model.py and its readers ask of a
    spec Alert (name, severity, texts, dashboard; no signal, absence or threshold), plus its SLO."""

    alert: str
    slo: str
    tier: str
    burn_rate: float
    long: str
    short: str
    severity: str
    summary: str
    description: str
    expr: str
    for_: str
    labels: dict[str, str]
    dashboard: Dashboard | None
    annotations: dict[str, str] = field(default_factory=dict)
    keep_firing_for: ClassVar[None] = None
    signal: ClassVar[None] = None
    absence: ClassVar[None] = None
    quantile: ClassVar[None] = None
    threshold: ClassVar[None] = None
    enabled: ClassVar[bool] = True


@dataclass(frozen=True)
class PlannedRecord:
    record: str
    expr: str
    labels: dict[str, str]


@dataclass(frozen=True)
class PlannedGroup:
    name: str
    records: tuple[PlannedRecord, ...]
    alerts: tuple[BurnAlert, ...] = ()


class SloPlan:
    """Everything the spec's SLOs generate, per SLO (sorted by name, so output order is stable)."""

    def __init__(self, slos: dict[str, s.SLO], exprs: SloExprs, dashboard: Dashboard | None):
        self.slos = dict(sorted(slos.items()))
        self.x = exprs
        self.dashboard = dashboard  # the SLO dashboard, with variables for the grouping labels

    def group_name(self, name: str) -> str:
        return GROUP_PREFIX + name

    def alert_names(self) -> dict[str, str]:
        """alert name -> SLO name."""
        return {slo.alerting.alert: name for name, slo in self.slos.items()}

    def groups(self) -> list[PlannedGroup]:
        out = [self._group(name, slo) for name, slo in self.slos.items()]
        goodput = {n: slo for n, slo in self.slos.items() if slo.goodput}
        if goodput:
            record = PlannedRecord(self.x.goodput_record(), self.x.goodput(goodput), {})
            out.append(PlannedGroup(GOODPUT_GROUP, (record,)))
        return out

    def _group(self, name: str, slo: s.SLO) -> PlannedGroup:
        x, own = self.x, {"slo": name}
        records = [
            PlannedRecord(x.valid_record(), x.valid_rate(name, slo), own),
            PlannedRecord(x.good_record(), x.good_rate(name, slo), own),
            PlannedRecord(OBJECTIVE, x.objective(name, slo), own),
            *(PlannedRecord(x.error_record(w), x.error_ratio(name, w), own) for w in x.windows(slo)),
            PlannedRecord(REMAINING, x.remaining(name, slo), own),
        ]
        alerts = tuple(self.burn_alert(name, slo, row) for row in slo.alerting.windows)
        return PlannedGroup(self.group_name(name), tuple(records), alerts)

    # -- the alerts -------------------------------------------------------------------------------
    def burn_alert(self, name: str, slo: s.SLO, row: s.BurnWindow) -> BurnAlert:
        a = slo.alerting
        return BurnAlert(
            alert=a.alert,
            slo=name,
            tier=row.tier,
            burn_rate=row.burn_rate,
            long=row.long,
            short=row.short,
            severity=a.severity[row.tier],
            summary=f"SLO {name} is burning its error budget {TIER_PACE[row.tier]}.",
            description=self.description(name, slo, row),
            expr=self.x.burn_alert(name, slo, row),
            for_=a.for_,
            labels={"slo": name, "tier": row.tier, "long": row.long, "short": row.short, **a.labels},
            dashboard=self.dashboard,
        )

    def subject(self) -> str:
        """The grouping labels of a firing alert, as its description names them."""
        return "/".join(f"{{{{ $labels.{label} }}}}" for label in self.x.grouping)

    def description(self, name: str, slo: s.SLO, row: s.BurnWindow) -> str:
        own = " (some models have their own objective or threshold)" if slo.per_model else ""
        text = (
            f"{self.subject()} burns the {name} error budget {{{{ $value | humanize }}}}x as fast as "
            f"its {slo.window} objective allows over the last {row.long}, and more than {row.burn_rate:g}x "
            f"over the last {row.short} too (good: {slo.description}){own}. "
        )
        return text + self.budget_left(name, slo)

    def budget_left(self, name: str, slo: s.SLO) -> str:
        """The remaining SLO-window budget, read at notification time with the `query` template
        function (promtool evaluates it too: the generated tests expect its text)."""
        matchers = ", ".join(f"{label}=%q" for label in ("slo", *self.x.grouping))
        args = " ".join([f'"{name}"', *(f"$labels.{label}" for label in self.x.grouping)])
        return (
            f'{{{{ with printf "{REMAINING}{{{matchers}}}" {args} | query }}}}'
            f"{{{{ . | first | value | humanizePercentage }}}} of the {slo.window} error budget is left."
            f"{{{{ else }}}}{budget_left_text(slo, None)}{{{{ end }}}}"
        )


def budget_left_text(slo: s.SLO, remaining: float | None) -> str:
    """What `budget_left` prints for a remaining budget (None: no budget recorded)."""
    if remaining is None:
        return f"The {slo.window} error budget left is not recorded yet."
    return f"{humanize_percentage(remaining)} of the {slo.window} error budget is left."
