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


INPUTS_ALERT = "SLOInputsMissing"  # one name for every SLO: its `slo` label tells them apart
INPUTS_FOR = "15m"  # as long as the signal-missing alerts wait: a scrape or two missed is no loss


def group_rule_count(slo: s.SLO, rate_window: str) -> int:
    """Rules in an SLO's group: valid, good, objective, one error ratio per window, the remaining
    budget, one alert per row, and for a latency SLI one inputs-missing alert per threshold."""
    thresholds = 1 + sum(o.threshold is not None for o in slo.per_model.values())
    inputs = thresholds if slo.sli.kind == "latency" else 0
    return 4 + len(sli_windows(slo, rate_window)) + len(slo.alerting.windows) + inputs


@dataclass(frozen=True, kw_only=True)
class SloAlert:
    """An alert of an SLO's group. It offers what model.py and its readers ask of a spec Alert
    (name, severity, texts, dashboard; no signal, absence or threshold), plus its SLO."""

    alert: str
    slo: str
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


@dataclass(frozen=True, kw_only=True)
class BurnAlert(SloAlert):
    """One burn-rate row of an SLO as an alert."""

    tier: str
    burn_rate: float
    long: str
    short: str


@dataclass(frozen=True, kw_only=True)
class InputsAlert(SloAlert):
    """A model whose SLI is absent because an input its good events need is not scraped (a latency
    SLI's bucket at the threshold, dropped by a relabelling): named, with the metric and the bucket,
    instead of the model silently leaving its SLO."""


@dataclass(frozen=True)
class PlannedRecord:
    record: str
    expr: str
    labels: dict[str, str]


@dataclass(frozen=True)
class PlannedGroup:
    name: str
    records: tuple[PlannedRecord, ...]
    alerts: tuple[BurnAlert | InputsAlert, ...] = ()


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
        alerts += tuple(self.inputs_alerts(name, slo))
        return PlannedGroup(self.group_name(name), tuple(records), alerts)

    def inputs_alerts(self, name: str, slo: s.SLO) -> list[InputsAlert]:
        """One alert per input whose absence leaves the SLI absent (slo/exprs.py missing_inputs)."""
        out = []
        for expr, labels in self.x.missing_inputs(name, slo):
            described = ", ".join(f'{k}="{v}"' for k, v in labels.items() if k != "metric")
            out.append(
                InputsAlert(
                    alert=INPUTS_ALERT,
                    slo=name,
                    severity=slo.alerting.severity["ticket"],
                    summary="An SLO cannot be measured: an input its good events need is not scraped.",
                    description=(
                        f"{self.subject()} exports {labels['metric'].removesuffix('_bucket')} but not its "
                        f"{labels['metric']}{{{described}}} series, which the {name} SLO counts its good "
                        "events from, so its SLI is absent (not 100% bad) and its burn-rate alerts cannot "
                        "fire. A relabelling that drops histogram buckets must keep this one."
                    ),
                    expr=expr,
                    for_=INPUTS_FOR,
                    labels={"slo": name, **labels, **slo.alerting.labels},
                    dashboard=self.dashboard,
                )
            )
        return out

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
        return text + self.x.counted_where(slo) + self.budget_left(name, slo)

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
