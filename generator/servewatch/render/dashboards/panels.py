"""Panel shorthands the dashboards are written with: time series, stat, table, threshold steps."""

from __future__ import annotations

from ... import grafana as g

GREEN, ORANGE, RED = "green", "orange", "red"


def pct_steps(threshold: float | None) -> tuple[g.Threshold, ...]:
    if threshold is None:
        return g.thresholds((None, GREEN))
    return g.thresholds((None, GREEN), (round(threshold * 0.9, 4), ORANGE), (threshold, RED))


def over(threshold: float | None) -> tuple[g.Threshold, ...]:
    return g.thresholds((None, GREEN)) if threshold is None else g.thresholds((None, GREEN), (threshold, RED))


def ts(title: str, *targets: g.Target, **kw) -> g.Panel:
    return g.Panel("timeseries", title, tuple(targets), **kw)


def stat(title: str, *targets: g.Target, **kw) -> g.Panel:
    kw.setdefault("w", 4)
    kw.setdefault("h", 4)
    return g.Panel("stat", title, tuple(targets), **kw)


def table(
    title: str, *targets: g.Target, value_unit: str = "short", hide: tuple[str, ...] = (), **kw
) -> g.Panel:
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
    return g.Panel("table", title, tuple(targets), **kw)


def instant_table(expr: str) -> g.Target:
    return g.Target(expr, instant=True, format="table")
