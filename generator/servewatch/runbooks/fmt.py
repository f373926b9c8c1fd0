"""Human-readable numbers for runbook thresholds and investigation results."""

from __future__ import annotations

import math


def value(v: float | None, unit: str) -> str:
    if v is None:
        return "no value"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if unit == "ratio":
        return f"{v * 100:.1f}%"
    if unit == "seconds":
        if abs(v) < 1:
            return f"{v * 1000:.0f} ms"
        return f"{v:.2f} s" if abs(v) < 100 else f"{v:.0f} s"
    if unit == "factor":
        return f"{v:.2f}x"
    if unit == "per_second":
        return f"{_num(v)}/s"
    if unit == "tokens":
        return f"{_num(v)} tokens"
    if unit == "requests":
        return f"{_num(v)} requests"
    if unit == "mib":
        return f"{_num(v)} MiB"
    if unit == "bytes":
        return f"{v / 2**30:.1f} GiB" if abs(v) >= 2**30 else f"{v / 2**20:.0f} MiB"
    if unit == "up":
        return "up" if v >= 1 else "down"
    return _num(v)


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"
