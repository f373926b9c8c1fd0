"""dcgm-exporter facts (dcgm.yaml) as typed objects: the fields, the exporter profiles that name them,
and the labels the exporter puts on a series.

A profile answers "what is field X called, and in which unit" for one exporter generation; config
picks a profile and may override single names (`ExporterProfile.with_names`). Nothing else in the
code base spells a DCGM metric or label name.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# Units a profile may give a field. Grafana's unit for each lives with the dashboards
# (plan/dashboards/context.py); the synthetic data converts between them (servewatch_testkit).
Unit = Literal[
    "MiB",
    "bytes",
    "percent",
    "ratio",
    "celsius",
    "watts",
    "MHz",
    "hertz",
    "millijoules",
    "joules",
    "megabytes_per_second",
    "bytes_per_second",
]


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuLabels(_Fact):
    """dcgm-exporter's own per-GPU labels, by role."""

    gpu: str  # per-host index
    uuid: str
    mig_instance: str  # only on MIG instance series
    mig_profile: str
    model: str
    pci_bus_id: str
    device: str

    def all(self) -> tuple[str, ...]:
        return tuple(self.model_dump().values())


class WorkloadLabels(_Fact):
    """The labels naming the pod that holds a GPU, as they arrive in Prometheus."""

    namespace: str
    pod: str
    container: str


class DcgmField(_Fact):
    """What a value means, whatever a profile calls it."""

    type: Literal["gauge", "counter"]  # counter: rate() applies
    scope: Literal["instance", "gpu"] = "instance"  # gpu: repeated on each MIG instance of the GPU
    optional: bool = False
    extra_labels: tuple[str, ...] = ()
    saturation: bool = False  # the fullest GPU fails first: never average it away (servewatch lint)
    exposed_as: Literal["gauge", "counter"] | None = None  # the counters CSV's type, where it differs
    note: str = ""


class FieldName(_Fact):
    """A field's metric name and unit in one profile."""

    name: str
    unit: Unit | None = None
    unconfirmed: str | None = None  # why the name is not certain; None when it is
    configured: bool = False  # set by config.dcgm.metric_names, not the catalog

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if not METRIC_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a Prometheus metric name")
        return v


class ExporterProfile(_Fact):
    """One exporter generation: the name and unit of each field it exports."""

    name: str
    exporter: str  # the versions, e.g. "<= 4.8"
    about: str
    driver_label: str
    metrics: dict[str, FieldName]

    def has(self, field: str) -> bool:
        return field in self.metrics

    def metric(self, field: str) -> str:
        try:
            return self.metrics[field].name
        except KeyError:
            raise KeyError(f"exporter profile {self.name!r} has no name for DCGM field {field!r}") from None

    def unit(self, field: str) -> str | None:
        return self.metrics[field].unit if field in self.metrics else None

    def field_of(self, metric: str) -> str | None:
        """The field a metric name of this profile stands for."""
        return self.field_by_metric.get(metric)

    @cached_property
    def field_by_metric(self) -> dict[str, str]:
        """Metric name -> field (the first field of a name): signals ask it of every selector."""
        out: dict[str, str] = {}
        for field, n in self.metrics.items():
            out.setdefault(n.name, field)
        return out

    def with_names(self, names: dict[str, str]) -> "ExporterProfile":
        """This profile with some fields renamed (config.dcgm.metric_names); units stay the profile's."""
        if not names:
            return self
        metrics = dict(self.metrics)
        for field, name in names.items():
            unit = metrics[field].unit if field in metrics else None
            metrics[field] = FieldName(name=name, unit=unit, configured=True)
        # a new profile, not model_copy: a copy would keep this one's field_by_metric
        # a new profile, not model_copy: a copy would keep this one's field_by_metric
        return type(self)(**{**{k: getattr(self, k) for k in type(self).model_fields}, "metrics": metrics})


def _extended(name: str, profile, profiles: dict) -> dict:
    """A profile's facts with those of the profile it `extends` beneath them."""
    if not isinstance(profile, dict):
        return profile
    own = {"name": name, **profile}
    base_name = own.pop("extends", None)
    if base_name is None:
        return own
    base = profiles.get(base_name)
    if not isinstance(base, dict) or "extends" in base:
        raise ValueError(f"profiles.{name}.extends: {base_name!r} is not a profile that extends none")
    metrics = {**(base.get("metrics") or {}), **(own.get("metrics") or {})}
    return {**{k: v for k, v in base.items() if k != "metrics"}, **own, "metrics": metrics}


class DcgmFacts(_Fact):
    """Everything dcgm.yaml says about the exporter."""

    labels: GpuLabels
    host_labels: dict[str, str]  # spelling -> the exporter versions that use it
    workload_labels: dict[str, WorkloadLabels]  # config.dcgm.workload_labels value -> labels
    fields: dict[str, DcgmField]
    profiles: dict[str, ExporterProfile]

    @model_validator(mode="before")
    @classmethod
    def _profile_names(cls, data):
        """A profile's name is its key; one that `extends` another has the other's names and the
        driver label, with its own `metrics:` in their place (an exporter release that renames a few
        fields is a few lines, not a copy of the whole list)."""
        if isinstance(data, dict) and isinstance(data.get("profiles"), dict):
            raw = data["profiles"]
            data = {**data, "profiles": {k: _extended(k, v, raw) for k, v in raw.items()}}
        return data

    @model_validator(mode="after")
    def _consistent(self):
        problems = []
        seen: dict[str, tuple[str, str | None, str]] = {}
        for profile in self.profiles.values():
            for field, fname in profile.metrics.items():
                where = f"profiles.{profile.name}.metrics.{field}"
                if field not in self.fields:
                    problems.append(f"{where}: no such field under fields:")
                    continue
                earlier = seen.setdefault(fname.name, (field, fname.unit, profile.name))
                if earlier[:2] != (field, fname.unit):
                    problems.append(
                        f"{where}: {fname.name} is {earlier[0]} in {earlier[1]!r} in profile "
                        f"{earlier[2]!r}; one name must mean one field in one unit"
                    )
        if not self.profiles:
            problems.append("profiles: at least one exporter profile is needed")
        if "plain" not in self.workload_labels:  # the exporter's own spelling, which the others rename
            problems.append("workload_labels: needs `plain`, the labels as dcgm-exporter writes them")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # -- lookups ---------------------------------------------------------------------------
    def profile(self, name: str) -> ExporterProfile:
        return self.profiles[name]

    def field(self, name: str) -> DcgmField:
        return self.fields[name]

    def names_of(self, field: str) -> list[str]:
        """Every name a field goes by, in profile order, each once."""
        return list(dict.fromkeys(p.metric(field) for p in self.profiles.values() if p.has(field)))

    def field_of(self, metric: str) -> str | None:
        """The field a metric name of any profile stands for."""
        return next((f for p in self.profiles.values() if (f := p.field_of(metric))), None)

    def driver_labels(self) -> list[str]:
        return list(dict.fromkeys(p.driver_label for p in self.profiles.values()))

    def other_profile(self, name: str) -> ExporterProfile:
        """The first profile that is not `name`: how a rename looks from `name` (itself if alone)."""
        return next((p for p in self.profiles.values() if p.name != name), self.profiles[name])
