"""Stream series of any number to one OpenMetrics file, never holding them all in memory.

``to_openmetrics`` builds the whole text in memory; a 4,096-GPU fleet is gigabytes of text, so
this writer formats each batch of series as it comes and appends its lines to one spool file per
family (OpenMetrics wants a family's samples contiguous). ``close`` writes the families in name
order, each after its ``# TYPE`` line, and deletes each spool as soon as it is copied, so the disk
holds about one copy of the text at any time.

Same lines as ``to_openmetrics`` (value and timestamp formats, the ``unknown`` type of a counter
without ``_total``); the order differs only inside a family: series in arrival order, each series'
samples together (histogram parts one after the other, which ``promtool tsdb create-blocks-from
openmetrics`` accepts as well as MetricPoint order).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .openmetrics import _fmt_ts, _fmt_value, _labelstr
from .series import Series

_SHARED_CACHE = 1024  # formatted value columns kept for series that share one values tuple


@dataclass(frozen=True)
class WriteStats:
    families: int
    series: int
    samples: int
    bytes: int


class _Family:
    def __init__(self, path: Path):
        self.file = open(path, "w", buffering=1 << 20)
        self.path = path
        self.kinds: set[str] = set()
        self.all_total = True

    def om_type(self, name: str) -> str:
        if len(self.kinds) != 1:
            raise ValueError(f"family {name!r} mixes kinds {sorted(self.kinds)}")
        kind = next(iter(self.kinds))
        return "unknown" if kind == "counter" and not self.all_total else kind


class OpenMetricsStream:
    """``add`` batches of Series, then ``close`` to write ``path`` (stats returned)."""

    def __init__(self, path: str | Path, start: float, step: float, steps: int):
        self.path = Path(path)
        self._ts = [_fmt_ts(start + i * step) for i in range(steps)]
        self._spool = Path(tempfile.mkdtemp(prefix=".om-spool-", dir=self.path.parent))
        self._families: dict[str, _Family] = {}
        self._seen: set[int] = set()
        self._columns: dict[int, tuple[tuple, list[str]]] = {}
        self.series = self.samples = 0

    def add(self, batch: Iterable[Series]) -> None:
        for s in batch:
            key = hash((s.name, s.labels))
            if key in self._seen:
                raise ValueError(f"duplicate series {s.name}{dict(s.labels)}")
            self._seen.add(key)
            fam = self._families.get(s.family)
            if fam is None:
                fam = self._families[s.family] = _Family(self._spool / f"{len(self._families)}.om")
            fam.kinds.add(s.kind)
            fam.all_total = fam.all_total and s.name.endswith("_total")
            column = self._column(s.values)
            if column:
                prefix = s.name + _labelstr(s.labels) + " "
                fam.file.write(prefix + ("\n" + prefix).join(column) + "\n")
            self.series += 1
            self.samples += len(column)

    def _column(self, values: tuple) -> list[str]:
        """``"<value> <timestamp>"`` per present sample; cached for values tuples shared by series."""
        hit = self._columns.get(id(values))
        if hit is not None and hit[0] is values:
            return hit[1]
        ts = self._ts
        column = [f"{_fmt_value(v)} {ts[i]}" for i, v in enumerate(values) if v is not None]
        if len(self._columns) >= _SHARED_CACHE:
            self._columns.pop(next(iter(self._columns)))
        self._columns[id(values)] = (values, column)
        return column

    def abort(self) -> None:
        """Drop everything spooled so far; ``path`` is left as it was."""
        for fam in self._families.values():
            fam.file.close()
        shutil.rmtree(self._spool, ignore_errors=True)

    def close(self) -> WriteStats:
        for fam in self._families.values():
            fam.file.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "w", buffering=1 << 20) as out:
                for name in sorted(self._families):
                    fam = self._families[name]
                    out.write(f"# TYPE {name} {fam.om_type(name)}\n")
                    with open(fam.path) as src:
                        shutil.copyfileobj(src, out, 1 << 22)
                    fam.path.unlink()
                out.write("# EOF\n")
            tmp.replace(self.path)
        finally:
            tmp.unlink(missing_ok=True)
            shutil.rmtree(self._spool, ignore_errors=True)
        return WriteStats(len(self._families), self.series, self.samples, self.path.stat().st_size)


def write_openmetrics(
    batches: Iterable[Iterable[Series]], path: str | Path, start: float, step: float, steps: int
) -> WriteStats:
    """Write every batch's series to ``path`` (sample ``i`` stamped ``start + i * step``)."""
    stream = OpenMetricsStream(path, start, step, steps)
    try:
        for batch in batches:
            stream.add(batch)
    except BaseException:
        stream.abort()
        raise
    return stream.close()


__all__ = ["OpenMetricsStream", "WriteStats", "write_openmetrics"]
