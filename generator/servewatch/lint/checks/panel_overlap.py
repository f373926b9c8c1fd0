"""panel-overlap: panels do not overlap in gridPos and fit the 24-column grid.

Grafana resolves an overlap by pushing panels down, so the layout users see is not the one in
the file, and a panel wider than the grid is clipped.
"""

from __future__ import annotations

from ..findings import Severity
from ..subjects import panel_where
from . import Check

GRID_COLUMNS = 24


def _box(panel: dict) -> tuple[int, int, int, int] | None:
    pos = panel.get("gridPos")
    if not isinstance(pos, dict):
        return None
    try:
        return int(pos.get("x", 0)), int(pos.get("y", 0)), int(pos.get("w", 0)), int(pos.get("h", 0))
    except (TypeError, ValueError):
        return None


def _overlap(a, b) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


def _layers(dashboard):
    """Panels laid out together: the top level, and the inside of each collapsed row."""
    top = [(p, path) for p, path in dashboard.panels() if len(path) == 2]
    yield top
    for _, path in top:
        inner = [(p, ip) for p, ip in dashboard.panels() if ip[:2] == path and len(ip) == 4]
        if inner:
            yield inner


def run(dashboard, ctx):
    for layer in _layers(dashboard):
        placed = []
        for panel, path in layer:
            box = _box(panel)
            if box is None:
                continue
            where = panel_where(panel)
            if box[0] + box[2] > GRID_COLUMNS:
                yield CHECK.problem(
                    f"{where} ends at column {box[0] + box[2]}, past the {GRID_COLUMNS}-column grid",
                    f"make x + w at most {GRID_COLUMNS}",
                    at=dashboard.at(path + ("gridPos",), where),
                )
            for other, other_box in placed:
                if _overlap(box, other_box):
                    yield CHECK.problem(
                        f"{where} overlaps {panel_where(other)} (gridPos {box} and {other_box})",
                        "move one of them: Grafana pushes overlapping panels down",
                        at=dashboard.at(path + ("gridPos",), where),
                    )
            placed.append((panel, box))


CHECK = Check(
    id="panel-overlap",
    severity=Severity.WARNING,
    summary="Panels do not overlap in gridPos and fit the 24-column grid.",
    scope="dashboard",
    run=run,
)
