"""The times and ranges of the command line and the incidents file."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from ..investigate.cli import parse_time
from ..spec.schema import seconds
from .evaluate import BacktestError

_DURATION = r"([0-9]+(ms|s|m|h|d|w|y))+"


def when(text: str | float | int | datetime, now: float, what: str) -> float:
    """RFC 3339, Unix seconds, 'now' or '-<duration>' (that long before now); YAML's own timestamps
    and numbers as they are."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if isinstance(text, datetime):
        return (text if text.tzinfo else text.replace(tzinfo=timezone.utc)).timestamp()
    return parse_time(str(text), now, what)


def span(text: str, now: float | None = None) -> tuple[float, float]:
    """`--range`: a duration ending now (7d), or START..END."""
    now = time.time() if now is None else now
    t = text.strip()
    if re.fullmatch(_DURATION, t):
        return now - seconds(t), now
    if ".." in t:
        a, b = t.split("..", 1)
        start, end = when(a, now, "--range start"), when(b, now, "--range end")
        if end <= start:
            raise BacktestError(f"--range {text!r} ends before it starts")
        return start, end
    raise BacktestError(f"--range {text!r} is neither a duration (7d) nor START..END")


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def human(s: float) -> str:
    """A duration for people: 1h20m, 45s."""
    s = int(round(s))
    if s == 0:
        return "0s"
    out = []
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= n:
            out.append(f"{s // n}{unit}")
            s %= n
    return "".join(out[:2])
