"""Grid layout: Grafana's grid is 24 columns wide; panels flow left to right and wrap.

A row header always starts a new line and spans the full width; a panel that does not fit in what
is left of the line goes to the next one, below the tallest panel of the current line. The result
never overlaps and never leaves the 24 columns.

A collapsed row takes one line: its panels are placed below it as they will be when it is opened
(Grafana pushes what follows down then), and the next row starts right under the collapsed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, TypeVar

COLUMNS = 24


@dataclass(frozen=True)
class GridPos:
    x: int
    y: int
    w: int
    h: int

    def to_dict(self) -> dict:
        return {"h": self.h, "w": self.w, "x": self.x, "y": self.y}

    def overlaps(self, other: "GridPos") -> bool:
        return (
            self.x < other.x + other.w
            and other.x < self.x + self.w
            and self.y < other.y + other.h
            and other.y < self.y + self.h
        )


class Sized(Protocol):
    w: int
    h: int


T = TypeVar("T", bound=Sized)


def flow(items: Iterable[T]) -> list[tuple[T, GridPos]]:
    out: list[tuple[T, GridPos]] = []
    x = y = line_h = 0
    resume: int | None = None  # where the next row goes while inside a collapsed row
    for item in items:
        full = getattr(item, "full_width", False)
        if not 1 <= item.w <= COLUMNS or item.h < 1:
            raise ValueError(f"{item!r}: width must be 1..{COLUMNS} and height >= 1")
        if full:
            y, x, line_h = (y + line_h if resume is None else resume), 0, 0
        elif x + item.w > COLUMNS:
            y, x, line_h = y + line_h, 0, 0
        out.append((item, GridPos(x, y, COLUMNS if full else item.w, item.h)))
        if full:
            y += item.h
            resume = y if getattr(item, "collapsed", False) else None
        else:
            x += item.w
            line_h = max(line_h, item.h)
    return out
