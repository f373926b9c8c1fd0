"""The `slos:` section checked against the catalog, the config and the rest of the spec: a latency
threshold is a bucket bound of its histogram (else the nearest bounds are named), an availability
SLI counts failures by values its label really takes, every burn-rate row can fire at the
objective, and an SLO's alert name is its own."""

from __future__ import annotations

import bisect

from .. import catalog as catalog_mod
from ..errors import SpecError
from ..signals import SignalBuilder
from ..slo.exprs import MODEL
from ..slo.kinds import kind_of
from ..slo.plan import group_rule_count
from ..slo.scenarios import SCENARIO_PREFIX
from ..spec import slos as s
from ..spec.matchers import accepts
from ..spec.schema import seconds
from ..spec.translate import did_you_mean

MAX_GROUP_RULES = 20  # Mimir's default ruler limit per group


def slo_problems(spec) -> list[SpecError]:
    errors: list[SpecError] = []
    cat = catalog_mod.load()
    alerts = {a.alert for g in spec.groups for a in g.alerts}
    owners: dict[str, str] = {}
    identity = SignalBuilder(spec.config, cat).labels.identity("model")
    for name, slo in spec.slos.items():

        def err(msg, *field, name=name):
            errors.append(SpecError(msg, spec.locate("slo", name, *field)))

        sli = slo.sli
        if isinstance(sli, s.LatencySLI) and sli.side == "client":
            _client_latency(spec, cat, slo, err)
        elif isinstance(sli, s.LatencySLI):
            _latency(cat, slo, err)
        elif sli.side == "client":
            _client_availability(spec, cat, slo, err)
        else:
            _availability(cat, sli, err)
        for model, over in slo.per_model.items():
            if model.startswith(SCENARIO_PREFIX):
                err(
                    f"model names starting with {SCENARIO_PREFIX!r} are the generated tests'",
                    "per_model",
                    model,
                )
            if over.threshold is not None and not isinstance(sli, s.LatencySLI):
                err(f"a {sli.kind} SLI has no threshold to override", "per_model", model, "threshold")
        if slo.per_model and MODEL not in spec.config.identity.model:
            err(f"per_model needs {MODEL} in config identity.model (SLOs are grouped by it)", "per_model")
        if slo.scope is not None:  # a client-side SLI's records carry no role or track
            client = SignalBuilder(spec.config, cat).labels.client_identity()
            _scope(slo, client if slo.side == "client" else identity, err)
        alert = slo.alerting.alert
        if alert in alerts or alert in owners:
            other = f"SLO {owners[alert]!r}" if alert in owners else "an alert under groups:"
            err(f"alert name {alert!r} is already used by {other}", "alerting", "alert")
        owners.setdefault(alert, name)
        rate_window = seconds(spec.config.rate_window)
        loosest = min([slo.objective] + [o.objective for o in slo.per_model.values() if o.objective])
        for i, row in enumerate(slo.alerting.windows):
            if seconds(row.short) < rate_window:
                err(
                    f"short window {row.short} is shorter than config rate_window {spec.config.rate_window}, "
                    "the SLI's shortest recording",
                    "alerting",
                    "windows",
                    i,
                    "short",
                )
            if row.burn_rate * (1 - loosest) >= 1:
                err(
                    f"burning {row.burn_rate:g}x a {1 - loosest:.3g} error budget needs more than every "
                    "request to fail: this row can never fire; lower the burn rate or raise the objective",
                    "alerting",
                    "windows",
                    i,
                    "burn_rate",
                )
        rules = group_rule_count(slo, spec.config.rate_window)
        if rules > MAX_GROUP_RULES:
            err(
                f"this SLO makes {rules} rules in one group; rulers such as Mimir refuse more than "
                f"{MAX_GROUP_RULES}: use fewer distinct windows",
                "alerting",
                "windows",
            )
    return errors


def _scope(slo: s.SLO, identity: list[str], err) -> None:
    """A scope selects deployments by the labels the SLO's records keep (the model identity): a
    matcher on any other label would select nothing in the records, or split the raw events."""
    scope = slo.scope
    if scope.models and MODEL not in identity:
        need = f"scope.models needs {MODEL} in config identity.model (SLOs are grouped by it)"
        err(need, "scope", "models")
    for m in scope.parsed():
        if m.label not in identity:
            err(
                f"{m.label!r} is not an identity label of a model{did_you_mean(m.label, identity)}; a scope "
                f"matches only {', '.join(identity)} (config identity.model, cluster_label, role, track)",
                "scope",
                "matchers",
            )
    by_model = [m for m in scope.parsed() if m.label == MODEL]
    for model in slo.per_model:
        if scope.models and model not in scope.models:
            err(f"{model!r} is not in scope.models, so no override applies to it", "per_model", model)
        elif not all(accepts(m.op, m.value, model) for m in by_model):
            err(f"scope.matchers leave {model!r} out, so no override applies to it", "per_model", model)


def _latency(cat, slo: s.SLO, err) -> None:
    sli = slo.sli
    entry = cat.lookup(sli.histogram)
    if entry is None or entry.name != sli.histogram:
        err(cat.problem(sli.histogram) or f"{sli.histogram!r} is not a histogram", "sli", "histogram")
        return
    if entry.type != "histogram":
        err(f"{sli.histogram!r} is a {entry.type}, not a histogram", "sli", "histogram")
        return
    if not entry.buckets:
        err(f"the catalog lists no bucket bounds for {sli.histogram!r}", "sli", "histogram")
        return
    _thresholds(entry, slo, err)


def _thresholds(entry, slo: s.SLO, err, hint: str = "") -> None:
    """Each threshold of a latency SLO (its own and the per-model ones) is a bound of `entry`."""
    problem = bound_problem(entry, slo.sli.threshold)
    if problem:
        err(problem + hint, "sli", "threshold")
    for model, over in slo.per_model.items():
        problem = bound_problem(entry, over.threshold) if over.threshold is not None else None
        if problem:
            err(problem + hint, "per_model", model, "threshold")


def _client_latency(spec, cat, slo: s.SLO, err) -> None:
    """A client-side SLI reads the configured gateway's twin of its histogram, from the record of
    its bucket rates (the raw series need the gateway's deduplication and model label, which that
    record does once). Where the catalog lists the twin's bucket bounds (catalog/gateway.yaml) each
    threshold must be one; elsewhere they are not documented, and a bound the gateway lacks fires
    SLOInputsMissing with the `le` it misses."""
    sli = slo.sli
    client = spec.config.client_side
    if client is None:
        sources = ", ".join(sorted(cat.clients))
        err(
            "side: client needs a gateway or frontend source in config.client_side (one of "
            f"{sources}); without one, only the engines measure {sli.histogram}",
            "sli",
            "side",
        )
        return
    quantity = cat.client_quantity(sli.histogram)
    if quantity is None or client.metric(quantity) is None:
        twins = ", ".join(h for h in cat.engine_twins.values() if client.metric(cat.client_quantity(h)))
        can = (
            f"at the client an SLO can read {twins}"
            if twins
            else "it measures none of the engines' histograms"
        )
        err(
            f"{client.source} measures no client-side twin of {sli.histogram!r}; {can}; or set side: "
            "instance, the engines' own",
            "sli",
            "histogram",
        )
        return
    twin = cat.lookup(client.metric(quantity))
    if twin.buckets:
        hint = f" (measured at the client, by {client.source}); or set side: instance to read the engines' "
        hint += sli.histogram
        _thresholds(twin, slo, err, hint)
    builder = SignalBuilder(spec.config, cat, _recorded_signals(spec))
    if builder.histograms.native:
        err("a client-side SLI reads classic buckets; config.histograms reads native ones", "sli", "side")
    elif kind_of(sli).recording(builder, sli, spec.config.rate_window) is None:
        err(
            f"a client-side SLI reads the recorded bucket rates of {client.metric(quantity)} (signal "
            "a bucket_rate signal), and no enabled rule group records them (its group switched off?)",
            "sli",
            "side",
        )


def _client_availability(spec, cat, slo: s.SLO, err) -> None:
    """A client-side availability SLI counts the configured source's requests less those it failed,
    from the records of their rates (the raw series need the gateway's deduplication and model
    label, which those records do once). A source whose error counter servewatch does not know
    (its labels undocumented) cannot measure it."""
    sli = slo.sli
    client = spec.config.client_side
    counting = ", ".join(sorted(n for n, c in cat.clients.items() if c.measures_errors))
    if client is None:
        err(
            f"side: client needs a source that counts failed requests in config.client_side ({counting}); "
            f"without one, only the engines count them ({sli.metric})",
            "sli",
            "side",
        )
        return
    if not client.client.measures_errors:
        err(
            f"{client.source} measures no errors servewatch knows (catalog/gateway.yaml lists no request "
            f"and error counters of it), so availability cannot be measured at the client; a source that "
            f"does: {counting}; or side: instance, the engines' {sli.metric}",
            "sli",
            "side",
        )
        return
    if sli.metric != s.ENGINE_REQUESTS:
        err(
            f"at the client an availability SLI counts {client.source}'s requests and errors, not "
            f"{sli.metric!r}: leave metric out, or set side: instance",
            "sli",
            "metric",
        )
        return
    builder = SignalBuilder(spec.config, cat, _recorded_signals(spec))
    if not kind_of(sli).records(builder, sli, spec.config.rate_window):
        names = f"{client.metric('requests')} and {client.metric('errors')}"
        err(
            f"a client-side availability SLI reads the recorded rates of {names} (rate signals over "
            "client_requests and client_errors), and no enabled rule group records both (its group "
            "switched off?)",
            "sli",
            "side",
        )


def _recorded_signals(spec) -> list:
    """The signals an enabled rule group records (model.py reads the SLOs' rates from them too)."""
    signals = spec.signals
    return [signals[n] for g in spec.groups if spec.group_enabled(g) for n in g.records if n in signals]


def bound_problem(entry, threshold: float) -> str | None:
    """Why `threshold` cannot be a latency SLI's threshold: it is not one of the bucket bounds, so
    the SLI would silently count against the next bound instead."""
    bounds = sorted(entry.buckets)
    if threshold in bounds:
        return None
    i = bisect.bisect_left(bounds, threshold)
    near = [f"{b:g}" for b in bounds[max(0, i - 1) : i + 1]]
    return (
        f"{threshold:g} s is not a bucket bound of {entry.name}, so the SLI would silently count against "
        f"another bound; the nearest bounds are {' and '.join(near)}"
    )


def _availability(cat, sli: s.AvailabilitySLI, err) -> None:
    entry = cat.lookup(sli.metric)
    if entry is None:
        err(cat.problem(sli.metric), "sli", "metric")
        return
    if entry.type != "counter":
        err(
            f"{sli.metric!r} is a {entry.type}; an availability SLI counts requests with a counter",
            "sli",
            "metric",
        )
        return
    if sli.label not in entry.labels:
        err(
            f"{sli.metric!r} has no label {sli.label!r}{did_you_mean(sli.label, entry.labels)}",
            "sli",
            "label",
        )
        return
    known = entry.label_values(sli.label)
    for value in sli.bad:
        if known and value not in known:
            err(
                f"{sli.label} {value!r} is not a value vLLM reports{did_you_mean(value, known)} "
                f"(known: {', '.join(known)})",
                "sli",
                "bad",
            )
