"""The identity labels of the synthetic engines in one SLO's generated tests (the plan render/slo_tests.py
formats).

Each scenario of an SLO runs its own synthetic model beside the others (slo/scenarios.py), named
slo-test/<scenario>. An SLO with a scope (spec/slos.py SloScope) counts only the deployments it
selects, so every engine is moved into the scope: a label the scope constrains takes a value it
accepts, and where that takes the scenario's own model name away (a scope of listed models), another
identity label carries the scenario's name, so the models stay apart. The engines of the
out-of-scope scenario take a value the scope refuses instead, and nothing else.

A scope that fixes every identity label (a listed model and an equality on each other label: "DeepSeek
in llm-prod") selects one deployment, so its engines cannot be kept apart: it is `solo`, and the proof
runs each scenario in its own promtool test (slo/scenarios.py), where one deployment is all there is.

Every value depends on the scenario alone, never on the order of the calls: the proof designs its
series with one mapping and the tests expect alerts with another, which must agree.
"""

from __future__ import annotations

import re
from functools import cached_property

from ..errors import SpecError
from ..model import Model
from ..slo.exprs import MODEL
from ..slo.scenarios import is_outside, scenario_model
from ..spec import matchers as m
from .conform import Conform

SLUG_RE = re.compile(r"[^a-z0-9]+")
# Sample values of the synthetic engines, by label; any other identity label gets "<label>-0".
LABEL_VALUES = {"namespace": "llm", "engine": "0", "job": "vllm", "instance": "10.1.0.1:8000"}


class SloEngines:
    """Identity labels per synthetic model of one SLO: in its scope, apart from each other."""

    def __init__(self, model, name: str, slo, base):
        """`base(model_name)`: an engine's labels without a scope (engine_labels)."""
        self.slo, self.base = slo, base
        self.scope = slo.scope
        self.lb = model.builder.labels
        self.metric_name = model.builder.metric_name
        # a client-side SLI is recorded per model as the gateway sees it: no role or track
        self.identity = self.lb.client_identity() if slo.side == "client" else self.lb.identity("model")
        self.where = model.spec.locate("slo", name, "scope")
        selectors = model.config.selectors.get("vllm", "")
        self.selectors = m.parse(selectors) if selectors else []
        self.matchers = self.scope.parsed() if self.scope else []
        self.labels_of: dict[str, dict[str, str]] = {}

    def labels(self, key: str) -> dict[str, str]:
        if self.scope is None:
            return self.base(key)
        if key not in self.labels_of:
            self.labels_of[key] = self._outside(key) if is_outside(key) else self._inside(key)
        return self.labels_of[key]

    def input_series(self, metric: str, labels: dict[str, str]) -> tuple[str, dict[str, str]]:
        """One input series of the SLI (its name as the SLI's kind gives it, its engine's labels):
        at the client, the configured gateway's histogram with the model name in the source's
        label and without vLLM's own labels (the rank), which a gateway never carries."""
        if self.slo.side != "client":
            return metric, labels
        drop = set(self.lb.vllm_only())
        out = {(self.lb.client_model if k == MODEL else k): v for k, v in labels.items() if k not in drop}
        counter = self.lb.client_metric(metric)  # client_requests: a counter, named as it is
        if counter:
            return counter, out
        base, suffix = metric.rsplit("_", 1)  # client_ttft_bucket: the histogram, then _bucket/_count
        return f"{self.metric_name(base)}_{suffix}", out

    @cached_property
    def solo(self) -> bool:
        """Whether the scope selects one deployment: the scenarios' engines cannot be apart in it."""
        if self.scope is None:
            return False
        probe = scenario_model("steady-burn")
        return self._apart_or_none(probe, self._in_scope(probe)) is None

    # -- in the scope ----------------------------------------------------------------------------------
    def _inside(self, key: str) -> dict[str, str]:
        labels = self._in_scope(key)
        return labels if self.solo else self._apart(key, labels)

    def _in_scope(self, key: str) -> dict[str, str]:
        """The engine's labels with the values the scope needs (model names may now be shared)."""
        out = dict(self.base(key))
        for label in self._constrained():
            old = out.get(label)
            new = next((v for v in self._candidates(label, old, key) if self._fits(label, v, key)), None)
            if new is None:
                raise SpecError(
                    f"the generated SLO tests need a {label} value this scope accepts (and config.selectors "
                    "too), and servewatch finds none; write an equality or an alternative per value",
                    self.where,
                )
            out[label] = new
        return out

    def _constrained(self) -> list[str]:
        labels = [MODEL] if self.scope.models else []
        labels += [x.label for x in self.matchers]
        return list(dict.fromkeys(labels))

    def _fits(self, label: str, value: str, key: str) -> bool:
        """Whether `value` of `label` is in the scope and read by the rules (config.selectors); a
        model with a per_model override is kept for that override's own scenario."""
        if label == MODEL:
            if self.scope.models and value not in self.scope.models:
                return False
            if value in self.slo.per_model and value != key:
                return False
        return self._selected(label, value) and all(
            m.accepts(x.op, x.value, value) for x in self.matchers if x.label == label
        )

    def _selected(self, label: str, value: str) -> bool:
        return all(m.accepts(x.op, x.value, value) for x in self.selectors if x.label == label)

    def _candidates(self, label: str, old: str | None, key: str):
        if old is not None:
            yield old
        if label == MODEL:
            yield from self.scope.models
        base = old or f"{label}-0"
        for x in self.matchers:
            if x.label != label:
                continue
            if x.op == "=":
                yield x.value
            elif x.op == "=~":
                yield from m.examples(x.value, base)
                yield from m.examples(x.value, slug(key))
        yield f"{base}-x"

    def _apart(self, key: str, labels: dict[str, str]) -> dict[str, str]:
        """Where the scope took the scenario's model name away, another identity label carries it."""
        apart = self._apart_or_none(key, labels)
        if apart is not None:
            return apart
        others = ", ".join(x for x in self.identity if x != MODEL)
        raise SpecError(
            "the generated SLO tests run each scenario as its own model in this scope; with the model "
            f"name fixed they need another identity label ({others}) "
            "that the scope and config.selectors leave open, and find none",
            self.where,
        )

    def _apart_or_none(self, key: str, labels: dict[str, str]) -> dict[str, str] | None:
        if labels.get(MODEL) == self.base(key).get(MODEL):
            return labels
        for label in self.identity:
            if label == MODEL:
                continue
            old = labels.get(label, f"{label}-0")
            options = [f"{old}-{slug(key)}", slug(key)]
            for x in self.matchers + self.selectors:
                if x.label == label and x.op == "=~":
                    options += m.examples(x.value, slug(key))
            fits = [v for v in options if self._fits(label, v, key) and slug(key) in v]
            if fits:
                return {**labels, label: fits[0]}
        return None

    # -- outside the scope -------------------------------------------------------------------------------
    def _outside(self, key: str) -> dict[str, str]:
        """An engine just outside the scope: one label off, the rest as an engine in it has them."""
        inside = self._in_scope(key)
        base = self.base(key)
        if self.scope.models and self._selected(MODEL, base[MODEL]):
            return {**inside, MODEL: base[MODEL]}  # its own name, which the list does not hold
        for x in self.matchers:
            old = inside.get(x.label, f"{x.label}-0")
            options = [old, base.get(x.label, old), f"{old}-x", *m.examples(x.value, old)]
            if x.op in ("=", "!="):
                options.append(x.value)
            if self.solo:  # the one label off also keeps the scenario's outside engines apart
                options = [f"{old}-{slug(key)}", *options]
            for value in options:
                if not m.accepts(x.op, x.value, value) and self._selected(x.label, value):
                    labels = {**inside, x.label: value}
                    return labels if self.solo and slug(key) in value else self._apart(key, labels)
        raise SpecError(
            "the generated SLO tests need a deployment outside this scope that config.selectors "
            "still reads, to prove it is never counted, and find none",
            self.where,
        )


def engine_labels(model: Model, model_name: str) -> dict[str, str]:
    """The identity labels of one synthetic engine serving `model_name`."""
    pod = model_name.rsplit("/", 1)[-1].lower().replace(".", "-") + "-0"
    deployment = model.builder.labels.deployment_defaults()  # role and track, where configured
    values = {**LABEL_VALUES, **deployment, "model_name": model_name, "pod": pod}
    if model.config.cluster_label:
        values[model.config.cluster_label] = "cluster-a"
    labels = {label: values.get(label, f"{label}-0") for label in model.builder.labels.identity("engine")}
    # the values config.selectors needs; all synthetic models share them, so a selector that would
    # give two models one pod or model name is refused by `check` (validation/selector_checks.py)
    conformed = Conform(model).labels("vllm", labels)
    return {k: conformed[k] for k in labels if k in conformed}


def slo_engines(model: Model, name: str, slo) -> SloEngines:
    """The synthetic engines of one SLO's tests, moved into its scope. A client-side SLI's are
    gateway pods: no role or track (a client sees neither)."""
    if slo.side == "client":
        deployment = set(model.builder.labels.deployment())
        base = lambda m: {k: v for k, v in engine_labels(model, m).items() if k not in deployment}  # noqa: E731
    else:
        base = lambda m: engine_labels(model, m)  # noqa: E731
    return SloEngines(model, name, slo, base)


def slug(key: str) -> str:
    """A scenario's name as a label value that reads like a namespace: slo-test-steady-burn."""
    return SLUG_RE.sub("-", key.lower()).strip("-")
