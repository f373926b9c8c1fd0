"""Write Series as OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics``.

Layout (same input -> same bytes):
  * one ``# TYPE`` line per family, families sorted by name; a counter family is named without
    ``_total``; a counter whose samples lack ``_total`` (dcgm-exporter's) is typed ``unknown``,
    because OpenMetrics requires counter samples to end in ``_total``;
  * all samples of a family are contiguous; series sorted by label set;
  * histograms are written MetricPoint by MetricPoint (per label set, per timestamp: buckets in
    ``le`` order, then ``_count``, then ``_sum``), other series one after the other, each with
    ascending timestamps, which is what the backfiller needs to append in order;
  * timestamps are in seconds; ``# EOF`` ends the text.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Iterable

from .series import Series

_SUFFIX_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2}


def prom_float(f: float) -> str:
    """Format a float the way Prometheus normalises ``le``/``quantile`` label values.

    Go's ``strconv.FormatFloat(f, 'g', -1, 64)`` plus ``.0`` for integral values, so ``1`` -> ``1.0``,
    ``0.001`` -> ``0.001``, ``1e6`` -> ``1e+06``. Writing that form keeps the text equal to what the
    TSDB stores (Prometheus 3 rewrites ``le="1"`` to ``le="1.0"`` on ingestion).
    """
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    d = Decimal(repr(float(f)))  # repr is the shortest round-tripping form, like Go's -1 precision
    if d == 0:
        return "0.0"
    exp = d.adjusted()
    if exp < -4 or exp >= 6:  # strconv's shortest 'g' switches to %e outside [1e-4, 1e6)
        sign, digits, _ = d.normalize().as_tuple()
        mant = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        s = ("-" if sign else "") + f"{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    else:
        s = format(d, "f")
    if "." not in s and "e" not in s and "Inf" not in s:
        s += ".0"
    return s


def _fmt_value(v: float) -> str:
    # a backfill writes millions of samples: the common case (finite, below 1e15) is asked first
    if -1e15 < v < 1e15:  # also false for NaN, as every comparison with it is
        return str(int(v)) if v.is_integer() else repr(v)
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def _fmt_ts(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labelstr(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _om_type(group: list[Series]) -> str:
    kinds = {s.kind for s in group}
    if len(kinds) != 1:
        raise ValueError(f"family {group[0].family!r} mixes kinds {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "counter" and not all(s.name.endswith("_total") for s in group):
        return "unknown"
    return kind


def _le_key(s: Series) -> float:
    le = s.label("le")
    if le is None:
        raise ValueError(f"histogram bucket {s!r} has no le label")
    return float(le)


def to_openmetrics(series: Iterable[Series], start: float, step: float) -> str:
    """OpenMetrics text of ``series``.

    Sample ``i`` of each series is stamped ``start + i * step`` (seconds).
    """
    families: dict[str, list[Series]] = {}
    seen: set[tuple] = set()
    for s in series:
        key = (s.name, s.labels)
        if key in seen:
            raise ValueError(f"duplicate series {s.name}{dict(s.labels)}")
        seen.add(key)
        families.setdefault(s.family, []).append(s)
    names = {s.name for group in families.values() for s in group}
    clash = sorted(f for f in families if f in names and any(s.name != f for s in families[f]))
    if clash:
        raise ValueError(f"family names collide with sample names of other families: {clash}")

    out: list[str] = []
    ts_cache: dict[int, str] = {}

    def ts(i: int) -> str:
        if i not in ts_cache:
            ts_cache[i] = _fmt_ts(start + i * step)
        return ts_cache[i]

    for fam in sorted(families):
        group = families[fam]
        om_type = _om_type(group)
        out.append(f"# TYPE {fam} {om_type}\n")
        if om_type == "histogram":
            _write_histogram(group, out, ts)
        else:
            for s in sorted(group, key=lambda s: (s.labels, s.name)):
                prefix = s.name + _labelstr(s.labels) + " "
                out.extend(
                    f"{prefix}{_fmt_value(v)} {ts(i)}\n" for i, v in enumerate(s.values) if v is not None
                )
    out.append("# EOF\n")
    return "".join(out)


def _write_histogram(group: list[Series], out: list[str], ts) -> None:
    points: dict[tuple, list[Series]] = {}
    for s in group:
        ident = tuple((k, v) for k, v in s.labels if k != "le")
        points.setdefault(ident, []).append(s)
    for ident in sorted(points):
        parts = points[ident]

        def order(s: Series) -> tuple:
            suffix = s.name[len(s.family) :]
            return (_SUFFIX_ORDER[suffix], _le_key(s) if suffix == "_bucket" else 0.0)

        parts.sort(key=order)
        prefixes = [(s.name + _labelstr(s.labels) + " ", s.values) for s in parts]
        steps = max(len(s.values) for s in parts)
        for i in range(steps):
            t = None
            for prefix, values in prefixes:
                if i < len(values) and values[i] is not None:
                    t = t or ts(i)
                    out.append(f"{prefix}{_fmt_value(values[i])} {t}\n")


def sample_count(series: Iterable[Series]) -> int:
    """Number of samples ``to_openmetrics`` writes for ``series`` (what the TSDB blocks must hold)."""
    return sum(sum(v is not None for v in s.values) for s in series)


__all__ = ["to_openmetrics", "prom_float", "sample_count"]
