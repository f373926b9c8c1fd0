"""The wrong metric a rule could plausibly read instead of the right one: its closest sibling.

A sibling of a catalog metric has the same source, type, unit and labels (so the mutant stays valid
PromQL that the lint would not flag); of a recorded series, the same aggregation level and operation
(`engine:…:max`). Among siblings the name closest to the original wins (ties by name), exported
metrics before optional ones: the mix-up a person makes when two names look alike.
"""

from __future__ import annotations

import difflib

from servewatch import catalog as catalog_mod


def _closest(name: str, candidates: list[str]) -> str | None:
    if not candidates:
        return None
    return sorted(candidates, key=lambda c: (-difflib.SequenceMatcher(None, name, c).ratio(), c))[0]


def _catalog_sibling(cat: catalog_mod.Catalog, name: str) -> str | None:
    entry = cat.lookup(name)
    if entry is None:
        return None
    suffix = name[len(entry.name) :]  # _bucket / _count / _sum of a histogram, else ""
    same = [
        m
        for m in cat.metrics.values()
        if m.name != entry.name
        and (m.source, m.type, m.unit, m.labels) == (entry.source, entry.type, entry.unit, entry.labels)
    ]
    exported = [m.name for m in same if not m.optional]
    base = _closest(entry.name, exported) or _closest(entry.name, [m.name for m in same])
    return None if base is None else base + suffix


def _record_shape(name: str) -> tuple[str, str] | None:
    parts = name.split(":")
    return (parts[0], parts[-1]) if len(parts) == 3 else None


def sibling(name: str, records: set[str], cat: catalog_mod.Catalog | None = None) -> str | None:
    """The metric to read instead of `name`, or None when it has no sibling."""
    if name in records:
        shape = _record_shape(name)
        if shape is None:
            return None
        return _closest(name, sorted(r for r in records if r != name and _record_shape(r) == shape))
    return _catalog_sibling(cat or catalog_mod.load(), name)
