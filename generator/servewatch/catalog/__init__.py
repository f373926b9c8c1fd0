"""Metric facts as data: which names exist, their type, labels and unit, and what was renamed.

The catalogs are YAML files beside this module, so a new exporter release is a data change. The DCGM
metrics are not listed one by one: they are every name an exporter profile of dcgm.yaml gives a field
(see exporter.py), so a profile added there is known to every check that reads the catalog.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from pydantic import ValidationError

from .. import yamlio
from ..errors import ServewatchError
from .exporter import DcgmFacts, ExporterProfile, FieldName

# Where the catalog files are read from; a test may point it at a scratch copy (then load.cache_clear()).
DIRECTORY = resources.files(__package__)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
SOURCES = ("vllm", "dcgm", "kube", "gateway")


@dataclass(frozen=True)
class Metric:
    name: str
    source: str
    type: str
    labels: tuple[str, ...] = ()
    unit: str | None = None
    buckets: tuple[float, ...] | None = None
    optional: bool = False
    saturation: bool = False  # the fullest engine/GPU fails first: never average it away
    buckets_per_deployment: bool = False  # bucket bounds depend on the deployment (max_model_len)
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (label, every value it takes)
    observes: str = "requests"  # what one observation of a histogram is: an SLI's events

    def label_values(self, label: str) -> tuple[str, ...]:
        """Every value the catalog knows `label` takes on this metric (empty: not listed)."""
        return dict(self.values).get(label, ())


POOL_PREFIX = "pool_"  # a client source's pool gauge by quantity: pool_ready_pods
CLIENT_COUNTERS = ("requests", "errors")  # a client source's counters, by what they count


@dataclass(frozen=True)
class ClientOutcome:
    """How a gateway or frontend tells a request's outcome (gateway.yaml, `outcome:`): valid events
    are its requests but those of an excluded cause (the client's own doing), bad events the failed
    ones among them."""

    requests: str  # the counter of every request
    errors: str  # the counter of failed requests: `requests` itself where `failed` tells them apart
    cause: str  # the label that says why a request failed
    failed: tuple[tuple[str, str], ...] = ()  # label=value marking a failure on `errors`; none: all are
    succeeded: tuple[tuple[str, str], ...] = ()  # label=value marking a success, where `failed` is set
    excluded: tuple[str, ...] = ()  # causes that are no valid event (cancelled by the client, ...)
    test_causes: tuple[str, ...] = ()  # the causes the generated tests fail requests with: any would do

    def counter(self, what: str) -> str | None:
        return {"requests": self.requests, "errors": self.errors}.get(what)

    def matchers(self, what: str) -> tuple[str, ...]:
        """The matchers that keep the valid events of counter `what` (requests) or the bad ones (errors)."""
        valid = (f'{self.cause}!~"{"|".join(sorted(self.excluded))}"',) if self.excluded else ()
        failed = tuple(f'{label}="{value}"' for label, value in self.failed)
        return failed + valid if what == "errors" else valid


@dataclass(frozen=True)
class ClientSource:
    """A gateway or frontend that sees each request as its client does (gateway.yaml, `clients:`)."""

    name: str
    about: str
    model_label: str | None  # the label carrying the model name; None: undocumented, config names it
    fields: tuple[tuple[str, str], ...]  # client-side quantity (ttft, itl) -> its histogram
    # the inference pool's gauges (ready_pods, kv_cache, queue) -> metric; empty: it reports no pool
    pool: tuple[tuple[str, str], ...] = ()
    # how it counts requests and failed ones; None: it counts none servewatch knows
    outcome: ClientOutcome | None = None
    # a histogram field (ttft) -> the label=value pairs of its series that measure that quantity
    only: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def metric(self, field: str) -> str | None:
        """A client-side histogram (ttft, itl), a counter (requests, errors), or a pool gauge as
        pool_<quantity>."""
        pool = {f"{POOL_PREFIX}{f}": m for f, m in self.pool}
        counter = self.outcome.counter(field) if self.outcome else None
        return dict(self.fields).get(field) or counter or pool.get(field)

    def matchers(self, field: str) -> tuple[str, ...]:
        """The matchers a read of `field` needs: a counter's valid or bad events, a histogram's
        series that measure its quantity (`only`); none elsewhere."""
        if field in CLIENT_COUNTERS:
            return self.outcome.matchers(field) if self.outcome else ()
        return tuple(f'{label}="{value}"' for label, value in dict(self.only).get(field, ()))

    def measuring(self, series: str) -> dict[str, str]:
        """The label values (`only`) of those series of one of its histograms (`_bucket`, `_count`)
        that measure its quantity; none where all do."""
        base = series.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
        field = next((f for f, m in self.fields if m == base), None)
        return dict(dict(self.only).get(field, ()))

    def only_of(self, series: str) -> tuple[str, ...]:
        """The matchers a read of one of its histograms' series needs to measure its quantity."""
        return tuple(f'{label}="{value}"' for label, value in self.measuring(series).items())

    @property
    def measures_errors(self) -> bool:
        """Whether it counts both every request and the failed ones (a client-side availability SLI)."""
        return self.outcome is not None


@dataclass(frozen=True)
class VllmProfile:
    """How a Prometheus names vLLM's series (vllm.yaml, `profiles:`): vLLM's name behind a prefix."""

    name: str
    prefix: str
    about: str

    def metric(self, name: str) -> str:
        return self.prefix + name


@dataclass(frozen=True)
class Rename:
    old: str
    replacement: str | None
    gone_in: str


class CatalogError(ServewatchError):
    """A catalog file that does not describe what the code needs (a bad edit of catalog/*.yaml)."""


@dataclass(frozen=True)
class Catalog:
    dcgm: DcgmFacts
    vllm_liveness: str  # the gauge every running vLLM engine exports
    metrics: dict[str, Metric] = field(default_factory=dict)
    renamed: dict[str, Rename] = field(default_factory=dict)
    clients: dict[str, ClientSource] = field(default_factory=dict)  # config.client_side.source
    # the bounds generated tests give a gateway histogram: its own are not documented
    gateway_test_buckets: tuple[float, ...] = ()
    vllm_profiles: dict[str, VllmProfile] = field(default_factory=dict)  # config.vllm_profile
    # a client-side quantity (ttft, itl) -> the vLLM histogram of the same quantity at the engines
    engine_twins: dict[str, str] = field(default_factory=dict)
    # a hash of the files it was read from: plans kept on disk are keyed by it (plan/kept.py), as a
    # catalog read from another folder (DIRECTORY: the tests, a user's copy) is not the code's
    read_from: str = ""

    def client_quantity(self, histogram: str) -> str | None:
        """The client-side quantity a vLLM histogram has a gateway twin of (ttft), or None."""
        return next((q for q, h in self.engine_twins.items() if h == histogram), None)

    def lookup(self, name: str) -> Metric | None:
        """The catalog entry for an exposed series name, histogram suffixes included; a vLLM metric
        also under the name a vLLM profile gives it."""
        if name in self.metrics:
            return self.metrics[name]
        for suffix in HISTOGRAM_SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and base in self.metrics and self.metrics[base].type == "histogram":
                return self.metrics[base]
        vllm = self.vllm_name(name)
        return self.lookup(vllm) if vllm != name else None

    def vllm_name(self, name: str) -> str:
        """vLLM's own name of a series a vLLM profile renamed (kserve_vllm:x -> vllm:x); any other
        name as it is."""
        for profile in self.vllm_profiles.values():
            own = name.removeprefix(profile.prefix) if profile.prefix else name
            if own != name and (entry := self.lookup(own)) is not None and entry.source == "vllm":
                return own
        return name

    def test_buckets(self, name: str) -> tuple[float, ...]:
        """The bucket bounds generated tests give histogram `name`: the catalog's, or for a gateway
        histogram (whose bounds are not documented) gateway.yaml's test layout."""
        entry = self.lookup(name)
        if entry is None:
            return ()
        return entry.buckets or (self.gateway_test_buckets if entry.source == "gateway" else ())

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


def _load_source(raw: dict, source: str) -> tuple[dict[str, Metric], dict[str, Rename]]:
    named_buckets = raw.get("buckets", {})
    metrics = {}
    for name, facts in (raw.get("metrics") or {}).items():
        buckets = named_buckets.get(facts.get("buckets")) if facts.get("buckets") else None
        metrics[name] = Metric(
            name=name,
            source=source,
            type=facts["type"],
            labels=tuple(facts.get("labels", ())),
            unit=facts.get("unit"),
            buckets=tuple(buckets) if isinstance(buckets, list) else None,
            optional=bool(facts.get("optional", False)),
            saturation=bool(facts.get("saturation", False)),
            buckets_per_deployment=isinstance(buckets, str),
            values=tuple((label, tuple(v)) for label, v in (facts.get("values") or {}).items()),
            observes=facts.get("observes", "requests"),
        )
    renamed = {
        old: Rename(old=old, replacement=r.get("replacement"), gone_in=str(r.get("gone_in")))
        for old, r in (raw.get("renamed") or {}).items()
    }
    return metrics, renamed


def load_dcgm_facts(raw: dict) -> DcgmFacts:
    try:
        return DcgmFacts.model_validate({k: raw.get(k) for k in DcgmFacts.model_fields})
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise CatalogError("catalog/dcgm.yaml: " + "; ".join(problems)) from None


def profile_metrics(facts: DcgmFacts) -> dict[str, Metric]:
    """Each name a profile gives a field, as a catalog metric (one name is one field: see DcgmFacts)."""
    out = {}
    # what the exporter itself puts on every GPU series, in any version (lint reads them)
    plain = facts.workload_labels["plain"]
    series_labels = tuple(
        dict.fromkeys(
            [
                *facts.labels.all(),
                *facts.host_labels,
                *facts.driver_labels(),
                plain.namespace,
                plain.pod,
                plain.container,
            ]
        )
    )
    for profile in facts.profiles.values():
        for field_name, named in profile.metrics.items():
            f = facts.field(field_name)
            out[named.name] = Metric(
                name=named.name,
                source="dcgm",
                type=f.type,
                labels=series_labels + f.extra_labels,
                unit=named.unit,
                optional=f.optional,
                saturation=f.saturation,
            )
    return out


@cache
def load() -> Catalog:
    metrics: dict[str, Metric] = {}
    renamed: dict[str, Rename] = {}
    texts = {source: DIRECTORY.joinpath(f"{source}.yaml").read_text() for source in SOURCES}
    raw = {source: yamlio.load(text) for source, text in texts.items()}
    dcgm = load_dcgm_facts(raw["dcgm"])
    for source in SOURCES:
        m, r = _load_source(raw[source], source)
        metrics.update(profile_metrics(dcgm) if source == "dcgm" else m)
        renamed.update(r)
    liveness = raw["vllm"].get("liveness")
    if liveness not in metrics:
        raise CatalogError(f"catalog/vllm.yaml: liveness: {liveness!r} is not a vLLM metric of the catalog")
    clients = _clients(raw["gateway"], metrics)
    test_buckets = tuple(float(x) for x in raw["gateway"].get("test_buckets") or ())
    profiles = _vllm_profiles(raw["vllm"])
    twins = dict(raw["gateway"].get("engine_twins") or {})
    for quantity, histogram in twins.items():
        if metrics.get(histogram) is None or metrics[histogram].type != "histogram":
            where = f"catalog/gateway.yaml: engine_twins.{quantity}"
            raise CatalogError(f"{where}: {histogram!r} is not a histogram of the catalog")
    return Catalog(
        dcgm=dcgm,
        vllm_liveness=liveness,
        metrics=metrics,
        renamed=renamed,
        clients=clients,
        gateway_test_buckets=test_buckets,
        vllm_profiles=profiles,
        engine_twins=twins,
        read_from=hashlib.sha256("\0".join(texts.values()).encode()).hexdigest(),
    )


def _vllm_profiles(raw: dict) -> dict[str, VllmProfile]:
    out = {}
    for name, facts in (raw.get("profiles") or {}).items():
        prefix = facts.get("prefix") if isinstance(facts, dict) else None
        if not isinstance(prefix, str) or not re.fullmatch(r"[a-zA-Z_:]?[a-zA-Z0-9_:]*", prefix):
            raise CatalogError(
                f"catalog/vllm.yaml: profiles.{name}.prefix: {prefix!r} is no metric name prefix"
            )
        out[name] = VllmProfile(name, prefix, " ".join(str(facts.get("about", "")).split()))
    if not any(p.prefix == "" for p in out.values()):
        raise CatalogError('catalog/vllm.yaml: profiles: needs one with prefix "", vLLM\'s own names')
    return out


def _clients(raw: dict, metrics: dict[str, Metric]) -> dict[str, ClientSource]:
    out = {}
    for name, facts in (raw.get("clients") or {}).items():
        fields = tuple((f, m) for f, m in (facts.get("fields") or {}).items())
        for f, m in fields:
            if metrics.get(m) is None or metrics[m].type != "histogram":
                where = f"catalog/gateway.yaml: clients.{name}.fields.{f}"
                raise CatalogError(f"{where}: {m!r} is not a histogram of the catalog")
        pool = tuple((f, m) for f, m in (facts.get("pool") or {}).items())
        for f, m in pool:
            if metrics.get(m) is None or metrics[m].type != "gauge":
                raise CatalogError(
                    f"catalog/gateway.yaml: clients.{name}.pool.{f}: {m!r} is not a gauge of the catalog"
                )
        outcome = _outcome(name, facts["outcome"], metrics) if facts.get("outcome") else None
        only = _only(name, facts.get("only") or {}, dict(fields), metrics)
        about = " ".join(facts["about"].split())
        out[name] = ClientSource(name, about, facts.get("model_label"), fields, pool, outcome, only)
    return out


def _only(name: str, raw: dict, fields: dict[str, str], metrics: dict[str, Metric]):
    """A source's `only:` checked against its fields' histograms: each label one the histogram has."""
    out = []
    for f, pairs in raw.items():
        where = f"catalog/gateway.yaml: clients.{name}.only.{f}"
        if f not in fields:
            raise CatalogError(f"{where}: {name} has no field {f!r}")
        for label in pairs:
            if label not in metrics[fields[f]].labels:
                raise CatalogError(f"{where}: {fields[f]} has no label {label!r}")
        out.append((f, tuple((label, str(v)) for label, v in pairs.items())))
    return tuple(out)


def _outcome(name: str, raw: dict, metrics: dict[str, Metric]) -> ClientOutcome:
    where = f"catalog/gateway.yaml: clients.{name}.outcome"
    try:
        outcome = ClientOutcome(
            requests=raw["requests"],
            errors=raw["errors"],
            cause=raw["cause"],
            failed=tuple((label, str(v)) for label, v in (raw.get("failed") or {}).items()),
            succeeded=tuple((label, str(v)) for label, v in (raw.get("succeeded") or {}).items()),
            excluded=tuple(str(c) for c in raw.get("excluded") or ()),
            test_causes=tuple(str(c) for c in raw.get("test_causes") or ()),
        )
    except KeyError as exc:
        raise CatalogError(f"{where}: needs {exc.args[0]}") from None
    for what in CLIENT_COUNTERS:
        m = outcome.counter(what)
        if metrics.get(m) is None or metrics[m].type != "counter":
            raise CatalogError(f"{where}.{what}: {m!r} is not a counter of the catalog")
    labels = metrics[outcome.errors].labels
    for label in (outcome.cause, *dict(outcome.failed), *dict(outcome.succeeded)):
        if label not in labels:
            raise CatalogError(f"{where}: {outcome.errors} has no label {label!r}")
    if bool(outcome.failed) != bool(outcome.succeeded):
        raise CatalogError(f"{where}: `failed` and `succeeded` go together (the outcome as a label)")
    if outcome.excluded and not outcome.failed:  # a requests counter without the cause cannot leave any out
        raise CatalogError(f"{where}.excluded: only where one counter tells the outcome (`failed`)")
    if len(outcome.test_causes) < 2 or set(outcome.test_causes) & set(outcome.excluded):
        raise CatalogError(f"{where}.test_causes: two or more causes of failure, none excluded")
    return outcome


__all__ = [
    "Catalog",
    "CatalogError",
    "CLIENT_COUNTERS",
    "POOL_PREFIX",
    "ClientOutcome",
    "ClientSource",
    "ExporterProfile",
    "FieldName",
    "Metric",
    "Rename",
    "VllmProfile",
    "load",
]
