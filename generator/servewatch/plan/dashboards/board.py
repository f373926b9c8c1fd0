"""The frame each dashboard builder fills: its name in the settings, the context, the board being
built, and how a panel goes on it. Adding a panel switches it by its optional key (declared once, in
spec/dashboards.py OPTIONAL_PANELS), completes its description with what it reads and the runbooks
of the alerts it shows, and remembers the alerts it is the view of (their dashboard_url opens it)."""

from __future__ import annotations

from typing import ClassVar, Iterable

import promql_parser as pp

from ... import grafana
from ...promql import tree
from ...promql.variables import substitute_macros
from ...model import AlertRule
from ...promql import builders as promql
from ...spec.dashboards import OPTIONAL_PANELS
from .context import DashboardContext
from .panels import above, filling, problem_list, stat
from .selection import Selection

SOURCE_NAMES = {"vllm": "vLLM", "dcgm": "dcgm-exporter"}
PART_NAMES = {"vllm": ("engine", "engines"), "dcgm": ("GPU or MIG instance", "GPUs and MIG instances")}
# What each kind of 'never silently blind' alert fires on, as a problem list: title, what empty means.
ABSENCE_LISTS = {
    "target_down": ("{source} targets down", "None: every {source} target answers its scrape."),
    "metrics_absent": (
        "{source} targets down or without metrics",
        "None: every {source} target is up and exports its metrics.",
    ),
    "inputs_missing": (
        "{source} metrics the alerts read, missing",
        "None: every {source} target exports every metric the alerts read.",
    ),
    "no_progress": (
        "{source} engines with work in flight and no progress",
        "None: every {source} engine with work in flight computes tokens.",
    ),
    "part_missing": (
        "{source} {parts} seen recently, gone while their target is up",
        "None: every {source} {part} seen within the memory's horizon reports, or its target went with it.",
    ),
    "rank_idle": (
        "{source} engines idle while a sibling rank serves",
        "None: every {source} engine of a serving pod gets work.",
    ),
    "client_missing": (
        "Models with traffic and no client-side latency",
        "None: the gateway or frontend reports first tokens of every model with traffic.",
    ),
    "pool_missing": (
        "Gateway pods without inference pool metrics",
        "None: every gateway pod that routes requests reports its inference pools' ready pods.",
    ),
    "pool_gone": (
        "Inference pools seen recently, reported by no gateway pod now",
        "None: every inference pool seen within the memory's horizon is reported, or went with its gateway.",
    ),
    "partner_missing": (
        "GPUs or exporters without both {numerator} and {partner}",
        "None: every GPU and exporter exports both {numerator} and {partner}.",
    ),
}


class BoardBuilder:
    name: ClassVar[str]  # the key in specs/dashboards.yaml and the output file name
    summary: ClassVar[str]  # the dashboard's description

    def __init__(self, ctx: DashboardContext):
        self.ctx = ctx
        self.alert_panels: dict[str, int] = {}  # alert -> the panel its dashboard_url opens
        self.board: grafana.ClassicDashboard | None = None

    # -- what each dashboard module writes --------------------------------------------------------
    def description(self) -> str:
        return self.summary

    def variables(self) -> list[grafana.Variable]:
        raise NotImplementedError

    def annotations(self) -> list[grafana.Annotation]:
        raise NotImplementedError

    def fill(self) -> None:
        """Add the rows and panels, top to bottom."""
        raise NotImplementedError

    # -- the frame ----------------------------------------------------------------------------------
    def build(self) -> grafana.ClassicDashboard:
        self.board = self.ctx.new_dashboard(self.name, self.description())
        self.board.variables = self.variables()
        self.board.annotations = self.annotations()
        self.fill()
        return self.board

    def row(self, title: str, collapsed: bool = True) -> None:
        """A new row; every row but the overview starts collapsed, so its panels query nothing until
        opened."""
        self.board.row(title, collapsed)

    def shows(self, optional: str) -> bool:
        """Whether an optional panel (declared in OPTIONAL_PANELS) is switched on in the settings."""
        if optional not in OPTIONAL_PANELS[self.name]:
            raise KeyError(f"{self.name} declares no optional panel {optional!r} (spec/dashboards.py)")
        return self.ctx.settings.shows(self.name, optional)

    # -- panels more than one dashboard has -----------------------------------------------------------
    def worst_stat(
        self,
        title: str,
        selection: Selection,
        signal: str,
        description: str,
        quantile: float | None = None,
        instant: bool = False,
        **kw,
    ) -> grafana.Panel:
        """A stat of a signal's worst series (the fullest, slowest, longest), coloured by its alert's
        resolved threshold; `instant`: its value now only, no sparkline over the range."""
        ctx = self.ctx
        threshold = ctx.threshold(signal, quantile)
        worst = promql.agg("max", [], selection.signal(signal, quantile))
        if ctx.saturates(signal):
            kw.update(min=0, max=1, steps=filling(threshold))
        return stat(
            title,
            grafana.Target(worst, instant=instant),
            steps=kw.pop("steps", above(threshold)),
            description=description,
            **kw,
        )

    def problem_lists(self, source: str, selection: Selection) -> None:
        """One problem list per 'never silently blind' condition of `source`: what its alerts fire on
        now, read with their own condition; their dashboard_url opens it."""
        conditions: dict[str, list[AlertRule]] = {}  # alerts with the same condition share one list
        for alert in self.ctx.absence_alerts(source):
            conditions.setdefault(selection.absence(alert), []).append(alert)
        for condition, alerts in conditions.items():
            alert = alerts[0]
            absence = alert.spec.absence
            sig = self.ctx.model.signal(absence.signal) if absence.signal else None
            part, parts = PART_NAMES[source]
            words = {"source": SOURCE_NAMES.get(source, source), "part": part, "parts": parts}
            words.update({"numerator": sig.numerator, "partner": sig.partner} if sig else {})
            title, empty = (text.format(**words) for text in ABSENCE_LISTS[absence.kind])
            self.add(
                problem_list(
                    title,
                    condition,
                    empty,
                    w=12,
                    description=f"What {alert.alert} fires on, now. {alert.spec.summary}",
                ),
                alert_view=alerts,
            )

    def add(
        self, panel: grafana.Panel, optional: str | None = None, alert_view: Iterable[AlertRule] = ()
    ) -> None:
        """Put `panel` on the board (hidden, its id kept, when its optional key is off); it becomes
        the panel the dashboard_url of each `alert_view` alert opens."""
        alert_view = list(alert_view)
        panel.description = describe(self.ctx, panel, alert_view)
        shown = optional is None or self.shows(optional)
        self.board.add(panel, show=shown)
        if shown:
            for alert in alert_view:
                self.alert_panels.setdefault(alert.alert, panel.id)


def series_read(panel: grafana.Panel) -> list[str]:
    """The metric and recording rule names a panel's queries select, in order, once each."""
    names: dict[str, None] = {}
    for target in panel.targets:
        for sel in tree.selectors(pp.parse(substitute_macros(target.expr))):
            names.setdefault(sel.name, None)
    return list(names)


def describe(ctx: DashboardContext, panel: grafana.Panel, alert_view: list[AlertRule]) -> str:
    """The panel's own words (what it shows, what to do), then what it reads and the runbooks of the
    alerts on what it shows: one per signal and quantile (the alert whose threshold the panel draws)
    or condition (a spec set with an alert per deployment would otherwise link hundreds)."""
    names = series_read(panel)
    records = {r.record for r in ctx.model.records()}
    reads = ", ".join(f"`{n}` (recording rule)" if n in records else f"`{n}`" for n in names)
    shown = [a for a in ctx.alerts if a.spec.signal and _reads_signal(ctx, a.spec.signal, names)]
    linked: dict[tuple, AlertRule] = {}
    for alert in [*alert_view, *shown]:
        absence = alert.spec.absence
        if alert.spec.signal:
            key = (alert.spec.signal, alert.spec.quantile)
        else:  # an absence condition, or an SLO's burn rate (one runbook for all its rows)
            key = (absence.kind, absence.source) if absence else (alert.alert,)
        linked.setdefault(key, alert)
    runbooks = " ".join(f"[Runbook: {a.alert}]({a.annotations['runbook_url']})" for a in linked.values())
    return " ".join(x for x in (panel.description, f"Reads {reads}.", runbooks) if x)


def _reads_signal(ctx: DashboardContext, signal: str, names: list[str]) -> bool:
    """Whether a panel reading `names` reads the signal: its recording rule or, for a quantile, its
    histogram's buckets."""
    sig = ctx.model.signal(signal)
    return sig.record in names or (sig.kind == "quantile" and f"{sig.metric}_bucket" in names)
