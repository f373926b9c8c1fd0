"""Panel shorthands the dashboards are written with: time series, stat, tables (problem lists among
them), heatmap, bar gauge, and the threshold steps, always from an alert's resolved threshold."""

from __future__ import annotations

from ... import grafana

GREEN, ORANGE, RED = "green", "orange", "red"


def above(*thresholds: float | None) -> tuple[grafana.Threshold, ...]:
    """Red from the alert's threshold on, a step (a line) for each alert when a panel shows the
    signals of several; all green when no alert watches it (None)."""
    drawn = sorted({t for t in thresholds if t is not None})
    return grafana.thresholds((None, GREEN), *((t, RED) for t in drawn))


def below(threshold: float | None) -> tuple[grafana.Threshold, ...]:
    """Red short of the alert's threshold (an alert with op <), green from it on."""
    if threshold is None:
        return grafana.thresholds((None, GREEN))
    return grafana.thresholds((None, RED), (threshold, GREEN))


def filling(threshold: float | None) -> tuple[grafana.Threshold, ...]:
    """A saturation: orange from 90% of the alert's threshold, red from the threshold."""
    if threshold is None:
        return grafana.thresholds((None, GREEN))
    return grafana.thresholds((None, GREEN), (round(threshold * 0.9, 4), ORANGE), (threshold, RED))


def problems() -> tuple[grafana.Threshold, ...]:
    """A count of things that are wrong: red from the first one."""
    return grafana.thresholds((None, GREEN), (1, RED))


def timeseries(title: str, *targets: grafana.Target, **kw) -> grafana.Panel:
    """A time series; threshold steps, when given, are drawn as lines."""
    kw.setdefault("show_thresholds", len(kw.get("steps", ())) > 1)
    return grafana.Panel("timeseries", title, tuple(targets), **kw)


def stat(title: str, *targets: grafana.Target, **kw) -> grafana.Panel:
    kw.setdefault("w", 4)
    kw.setdefault("h", 4)
    return grafana.Panel("stat", title, tuple(targets), **kw)


def bargauge(title: str, target: grafana.Target, **kw) -> grafana.Panel:
    kw.setdefault("options", {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    return grafana.Panel("bargauge", title, (target,), **kw)


def heatmap(title: str, target: grafana.Target, **kw) -> grafana.Panel:
    """Bucket rates as Grafana's heatmap wants them: one series per `le`, already cumulative."""
    kw.setdefault("options", {"yAxis": {"axisPlacement": "left", "unit": "short"}})
    return grafana.Panel("heatmap", title, (target,), **kw)


def instant_table(expr: str) -> grafana.Target:
    return grafana.Target(expr, instant=True, format="table")


def table(
    title: str, *targets: grafana.Target, value_unit: str = "short", hide: tuple[str, ...] = (), **kw
) -> grafana.Panel:
    """Labels as columns; the Value column coloured by the panel's threshold steps."""
    excluded = {name: True for name in ("Time", "__name__", *hide)}
    kw.setdefault(
        "transformations",
        (
            {
                "id": "organize",
                "options": {
                    "excludeByName": excluded,
                    "includeByName": {},
                    "indexByName": {},
                    "renameByName": {},
                },
            },
        ),
    )
    kw.setdefault(
        "overrides",
        (
            {
                "matcher": {"id": "byName", "options": "Value"},
                "properties": [
                    {"id": "unit", "value": value_unit},
                    {"id": "custom.cellOptions", "value": {"mode": "gradient", "type": "color-background"}},
                ],
            },
        ),
    )
    kw.setdefault("options", {"sortBy": [{"desc": True, "displayName": "Value"}]})
    return grafana.Panel("table", title, tuple(targets), **kw)


def problem_list(title: str, expr: str, empty: str, **kw) -> grafana.Panel:
    """A table of what is wrong now; `empty` is what it says when nothing is."""
    kw.setdefault("steps", problems())
    return table(title, instant_table(expr), no_value=empty, **kw)
