"""Metric facts as data: which names exist, their type, labels and unit, and what was renamed.

The catalogs are YAML files beside this module, so a new exporter release is a data change.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
SOURCES = ("vllm", "dcgm", "kube")


@dataclass(frozen=True)
class Metric:
    name: str
    source: str
    type: str
    labels: tuple[str, ...] = ()
    unit: str | None = None
    buckets: tuple[float, ...] | None = None
    optional: bool = False


@dataclass(frozen=True)
class Rename:
    old: str
    replacement: str | None
    gone_in: str


@dataclass(frozen=True)
class Catalog:
    metrics: dict[str, Metric] = field(default_factory=dict)
    renamed: dict[str, Rename] = field(default_factory=dict)

    def lookup(self, name: str) -> Metric | None:
        """The catalog entry for an exposed series name, histogram suffixes included."""
        if name in self.metrics:
            return self.metrics[name]
        for suffix in HISTOGRAM_SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and base in self.metrics and self.metrics[base].type == "histogram":
                return self.metrics[base]
        return None

    def rename_of(self, name: str) -> Rename | None:
        for suffix in ("",) + HISTOGRAM_SUFFIXES:
            base = name.removesuffix(suffix) if suffix else name
            if base in self.renamed:
                return self.renamed[base]
        return None

    def problem(self, name: str) -> str | None:
        """Why `name` is not a usable metric, with a suggestion; None when it is fine."""
        if self.lookup(name):
            return None
        rename = self.rename_of(name)
        if rename:
            hint = f"use {rename.replacement!r} instead" if rename.replacement else "it has no replacement"
            return f"metric {name!r} was removed (gone in {rename.gone_in}); {hint}"
        close = difflib.get_close_matches(name, list(self.metrics), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"metric {name!r} is not in the vLLM/DCGM catalogs{hint}"


def _load_source(source: str) -> tuple[dict[str, Metric], dict[str, Rename]]:
    raw = yaml.safe_load(resources.files(__package__).joinpath(f"{source}.yaml").read_text())
    named_buckets = raw.get("buckets", {})
    metrics = {}
    for name, facts in raw["metrics"].items():
        buckets = named_buckets.get(facts.get("buckets")) if facts.get("buckets") else None
        metrics[name] = Metric(
            name=name,
            source=source,
            type=facts["type"],
            labels=tuple(facts.get("labels", ())),
            unit=facts.get("unit"),
            buckets=tuple(buckets) if isinstance(buckets, list) else None,
            optional=bool(facts.get("optional", False)),
        )
    renamed = {
        old: Rename(old=old, replacement=r.get("replacement"), gone_in=str(r.get("gone_in")))
        for old, r in (raw.get("renamed") or {}).items()
    }
    return metrics, renamed


@cache
def load() -> Catalog:
    metrics: dict[str, Metric] = {}
    renamed: dict[str, Rename] = {}
    for source in SOURCES:
        m, r = _load_source(source)
        metrics.update(m)
        renamed.update(r)
    return Catalog(metrics=metrics, renamed=renamed)
