"""Lay several scenarios out on one time axis, so one Prometheus can serve them all.

Each scenario gets its own span, hour-aligned and in the past; between two spans lies a gap longer
than anything a rule can see back (its longest range or subquery window, its largest ``offset``,
plus the query lookback). A query inside one span then never reads another scenario's samples,
even when the scenarios share label sets.
"""

from __future__ import annotations

import math
import re
import time as _time
from collections.abc import Iterable, Sequence

from servewatch.spec.schema import seconds

from .synth.truth import LOOKBACK_S

__all__ = ["HOUR", "LOOKBACK_S", "horizon", "starts"]

HOUR = 3600.0

_DURATION = r"(?:\d+(?:ms|s|m|h|d|w|y))+"
# a range `[5m]` or subquery `[1h:5m]` (its window is the part before the colon)
_WINDOW = re.compile(rf"\[({_DURATION})(?::{_DURATION}?)?\]")
_OFFSET = re.compile(rf"\boffset\s+-?({_DURATION})")


def horizon(rule_texts: Iterable[str]) -> float:
    """Seconds a rule in ``rule_texts`` can look back: longest window + largest offset + lookback."""
    windows, offsets = [0.0], [0.0]
    for text in rule_texts:
        windows += [seconds(d) for d in _WINDOW.findall(text)]
        offsets += [seconds(d) for d in _OFFSET.findall(text)]
    return max(windows) + max(offsets) + LOOKBACK_S


def starts(lengths: Sequence[float], gap_s: float, now: float | None = None) -> list[float]:
    """Start time of each span of ``lengths`` seconds, in order, ``gap_s`` or more apart.

    Every start is on a whole hour (so on any step grid that divides an hour); the last span ends at
    least an hour before the current hour, so the data lies in the past where backfills go.
    """
    now = _time.time() if now is None else now
    hours = [math.ceil((length + gap_s) / HOUR) * HOUR for length in lengths]
    first = math.floor(now / HOUR) * HOUR - HOUR - sum(hours)
    out, t = [], first
    for h in hours:
        out.append(t)
        t += h
    return out
