"""One proposal: a number for an alert's or an SLO's field with its evidence, or why there is none."""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_TAIL = 5  # a percentile needs this many observations beyond it: n x (1 - q) >= MIN_TAIL


@dataclass(frozen=True)
class Proposal:
    subject: str  # alert name, or "SLO <name>"
    field: str  # threshold | for | objective
    current: str
    proposed: str | None  # None: the data cannot support a number (`reason` says why)
    evidence: str = ""
    rule: str = ""
    reason: str = ""
    value: float | str | None = None  # what --write puts in the specs
    slo: str = ""  # the SLO's name when the subject is one: written to its file, not the overrides
    model: str = ""  # the model_name of the SLO's per_model entry the value is written to ("": the SLO's own)


def sig(x: float, digits: int = 3) -> float:
    """x with `digits` significant digits (the specs allow 6)."""
    if x == 0 or not math.isfinite(x):
        return x
    scale = 10 ** (digits - 1 - math.floor(math.log10(abs(x))))
    return round(x * scale) / scale


def duration(s: float) -> str:
    s = int(math.ceil(s))
    if s % 3600 == 0 and s:
        return f"{s // 3600}h"
    return f"{s // 60}m" if s % 60 == 0 else f"{s}s"
