"""What the checks know: the catalogs, the recording rules in sight, and the identity of a series.

A recording rule is known by name when the specs or any linted rule file define it, and by its
expression when a linted rule file (or the specs' model) gives one: checks then follow a record
back to the catalog metrics it reads (`lineage`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import promql_parser as pp

from .. import catalog as catalog_mod
from ..promql import tree

# Labels Prometheus or the Prometheus Operator put on every scraped series (the target's labels).
SCRAPE_LABELS = frozenset({"job", "instance", "namespace", "pod", "container", "service", "endpoint", "node"})
# Series whose labels are those of whatever produced them (the alert's labels).
OPEN_LABEL_METRICS = frozenset({"ALERTS", "ALERTS_FOR_STATE"})

# What tells one series from another, per source (catalog/dcgm.yaml labels, catalog/vllm.yaml).
GPU_LABELS = frozenset({"UUID", "gpu", "device", "pci_bus_id"})  # which GPU
GPU_INDEX_LABELS = GPU_LABELS - {"UUID"}  # indices repeat on every host
HOST_LABELS = frozenset({"Hostname", "hostname", "instance", "node"})
MIG_LABEL = "GPU_I_ID"  # MIG instances of one GPU share UUID and gpu
ENGINE_LABEL = "engine"  # vLLM's data-parallel rank: "0" on every server
SERVER_LABELS = frozenset({"pod", "instance"})


@dataclass(frozen=True)
class RecordDef:
    """One definition of a recording rule (a record name may have several, with different labels)."""

    name: str
    expr: str
    labels: tuple[tuple[str, str], ...] = ()

    @cached_property
    def ast(self):
        try:
            return pp.parse(self.expr)
        except Exception:  # a broken record is reported where it is defined
            return None


@dataclass
class LintContext:
    catalog: catalog_mod.Catalog
    records: set[str] = field(default_factory=set)  # recording rules known to exist
    min_range_s: float | None = None  # 4 x the scrape interval: the shortest range a rule may use
    definitions: dict[str, list[RecordDef]] = field(default_factory=dict)
    scrape_interval_s: float | None = None
    # histograms the linted-against Prometheus stores only as native ones (lint --prometheus)
    native_histograms: frozenset[str] = frozenset()

    def add_record(self, record: RecordDef) -> None:
        self.records.add(record.name)
        self.definitions.setdefault(record.name, []).append(record)

    def is_record(self, name: str | None) -> bool:
        return bool(name) and (name in self.records or name in self.definitions)

    def metric(self, name: str | None) -> catalog_mod.Metric | None:
        return self.catalog.lookup(name) if name else None

    def record_asts(self, name: str) -> list:
        return [d.ast for d in self.definitions.get(name, ()) if d.ast is not None]

    @cached_property
    def label_universe(self) -> frozenset[str]:
        """Every label some catalog metric or scrape target has: a label outside it is the user's own."""
        labels = {label for m in self.catalog.metrics.values() for label in m.labels}
        labels |= SCRAPE_LABELS | {f"exported_{label}" for label in SCRAPE_LABELS} | {"le"}
        return frozenset(labels)


def lineage(node, ctx: LintContext, _seen: frozenset[str] = frozenset()) -> set[catalog_mod.Metric]:
    """Catalog metrics an expression reads, following recording rules to their expressions."""
    out: set[catalog_mod.Metric] = set()
    for sel in tree.selectors(node):
        metric = ctx.metric(sel.name)
        if metric is not None:
            out.add(metric)
        elif sel.name in ctx.definitions and sel.name not in _seen:
            for ast in ctx.record_asts(sel.name):
                out |= lineage(ast, ctx, _seen | {sel.name})
    return out


def identity_source(metric: catalog_mod.Metric) -> str | None:
    """Whose identity rules a metric's series follow: a GPU's (dcgm), an engine's (vllm), or none."""
    if metric.source == "dcgm" and "UUID" in metric.labels:
        return "dcgm"
    if metric.source == "vllm" and ENGINE_LABEL in metric.labels:
        return "vllm"
    return None


def whole_gpus_only(node) -> bool:
    """Whether every series `node` reads is selected as a whole GPU (`GPU_I_ID=""`): there `UUID`
    names one GPU, since only MIG instances share it."""
    found = list(tree.selectors(node))
    return bool(found) and all(
        any(tree.matcher_text(m) == f'{MIG_LABEL}=""' for m in sel.matchers.matchers) for sel in found
    )


def identity_sources(node, ctx: LintContext) -> set[str]:
    return {s for m in lineage(node, ctx) if (s := identity_source(m))}


IDENTITY_NOUN = {"dcgm": "GPU (or MIG instance)", "vllm": "engine"}
IDENTITY_PLURAL = {"dcgm": "GPUs (and MIG instances)", "vllm": "engines"}


def identity_gaps(labels: set[str] | frozenset[str], source: str, whole_gpus: bool = False) -> list[str]:
    """Why `labels` do not tell one series of `source` from another (empty: they do). With
    `whole_gpus` the series are whole GPUs, which no MIG instance shares a UUID with."""
    gaps = []
    if source == "dcgm":
        if not labels & GPU_LABELS:
            gaps.append("it names no GPU (UUID, or gpu with the host)")
        elif "UUID" not in labels and not labels & HOST_LABELS:
            which = ", ".join(sorted(labels & GPU_INDEX_LABELS))
            gaps.append(f"{which} repeats on every host: add UUID (or the host label)")
        if MIG_LABEL not in labels and not whole_gpus:
            gaps.append("MIG instances of one GPU share its UUID and index: add GPU_I_ID")
    elif source == "vllm":
        if ENGINE_LABEL not in labels:
            gaps.append("a data-parallel server has one series per engine: add engine")
        if not labels & SERVER_LABELS:
            gaps.append('engine "0" exists on every server: add pod (or instance)')
    return gaps


def partial_key_gaps(labels: set[str] | frozenset[str], source: str, whole_gpus: bool = False) -> list[str]:
    """Gaps of a label list that means to name one GPU or engine (it names a GPU or an engine)."""
    if source == "dcgm" and labels & GPU_LABELS:
        return identity_gaps(labels, "dcgm", whole_gpus)
    if source == "vllm" and ENGINE_LABEL in labels and not labels & SERVER_LABELS:
        return ['engine "0" exists on every server: add pod (or instance)']
    return []
