"""Cross-file checks on a merged spec: every reference resolves, every metric is in the catalog,
every template is in the supported subset, every alert is proven by scenarios, every dashboard has
its own uid."""

from __future__ import annotations

import math
from datetime import timedelta

from .. import catalog as catalog_mod
from .. import templates
from ..absence import RANK
from ..errors import Location, SpecError
from ..model import effective_alert
from ..signals import CLIENT_PREFIX, SignalBuilder
from ..plan.synthetic import MARGIN_S
from ..spec.fields import MAX_SAMPLES
from ..spec.schema import seconds
from ..spec.translate import did_you_mean
from .scenario_checks import scenario_problems

METRIC_FIELDS = ("metric", "numerator", "partner")
HISTOGRAM_KINDS = ("quantile", "bucket_rate")  # signals whose metric is a histogram's name
TRAFFIC_KINDS = ("counter_ratio", "track_ratio")  # signals whose alerts take min_traffic

# The signals the dashboards read by name (plan/dashboards/), with the kind and level their panels
# are written for. Without one of them a dashboard cannot be built.
DASHBOARD_SIGNALS = {
    "gpu_fb_used_ratio": ("matched_ratio", "gpu"),
    "engine_kv_cache_usage": ("gauge", "engine"),
    "engine_requests_waiting": ("gauge", "engine"),
    "engine_requests_running": ("gauge", "engine"),
    "engine_preemptions_rate": ("rate", "engine"),
    "engine_generation_tokens_rate": ("rate", "engine"),
    "model_requests_rate": ("rate", "model"),
    "model_request_error_ratio": ("counter_ratio", "model"),
    "model_abort_ratio": ("counter_ratio", "model"),
    "model_ttft": ("quantile", "model"),
    "model_itl": ("quantile", "model"),
    "model_e2e_latency": ("quantile", "model"),
}


def _ratio_threshold_problem(builder, signal, threshold: float) -> str | None:
    """A threshold a 0-1 ratio can never cross (or always crosses): most often a percent written
    where a ratio is meant, an alert that would never fire."""
    if 0 <= threshold <= 1 or not builder.is_ratio(signal):
        return None
    hint = f"; for {threshold:g}% write {threshold / 100:g}" if 1 < threshold <= 100 else ""
    return f"threshold {threshold:g} is outside 0-1, the range of a ratio{hint}"


def _test_length_problems(spec) -> list[SpecError]:
    """The generated tests of an alert hold a sample every scrape_interval from the start to past its
    `for` (plus, for an absence alert, its startup grace; plus `keep_firing_for`) and rate window, and
    promtool loads every one: past MAX_SAMPLES per series they could not run (and making them would
    not end). An absence alert has no signal but its tests wait out its `for` all the same."""
    config = spec.config
    scrape, window = seconds(config.scrape_interval), seconds(config.rate_window)
    longest = timedelta(seconds=max(int(MAX_SAMPLES * scrape - window - MARGIN_S), 0))
    out = []
    for group in spec.groups:
        for alert in group.alerts:
            override = spec.overrides.alerts.get(alert.alert)
            tuned = override is not None and override.for_ is not None
            tuned_alert = effective_alert(alert, spec)
            for_ = tuned_alert.for_
            held = seconds(for_) + seconds(tuned_alert.keep_firing_for or "0s")
            if alert.absence is not None:
                held += seconds(alert.absence.startup_grace or "0s")
            samples = math.ceil((held + window + MARGIN_S) / scrape)
            if (alert.signal or alert.absence) and samples > MAX_SAMPLES:
                where = ("override of alert", alert.alert) if tuned else ("alert", alert.alert)
                out.append(
                    SpecError(
                        f"for {for_} makes the generated tests {samples:,} samples long at scrape_interval "
                        f"{config.scrape_interval} and rate_window {config.rate_window}; promtool loads at "
                        f"most {MAX_SAMPLES:,} per series, so `for` can be at most about {_days(longest)}",
                        spec.locate(*where, "for"),
                    )
                )
    return out


def _cadence_problems(spec) -> list[SpecError]:
    """An alert's `for` shorter than its group's interval: Prometheus checks the condition once per
    interval, so the alert would wait a whole interval anyway and the `for` would promise what the
    rules cannot keep. Named at the field that made it so (the group's or the alert's override)."""
    out = []
    for group in spec.groups:
        interval = spec.group_interval(group)
        if not interval:
            continue
        for alert in group.alerts:
            for_ = effective_alert(alert, spec).for_
            if 0 < seconds(for_) < seconds(interval):
                a_override = spec.overrides.alerts.get(alert.alert)
                if a_override is not None and a_override.for_ is not None:
                    where = ("override of alert", alert.alert, "for")
                elif interval != group.interval:
                    where = ("override of group", group.name, "interval")
                else:
                    where = ("alert", alert.alert, "for")
                out.append(
                    SpecError(
                        f"for {for_} of alert {alert.alert} is shorter than the interval {interval} of its "
                        f"group {group.name}: Prometheus evaluates it once per interval; lengthen `for` or "
                        f"set a shorter one (overrides.yaml: groups: {{{group.name}: {{interval: ...}}}})",
                        spec.locate(*where),
                    )
                )
    return out


def _days(span: timedelta) -> str:
    return f"{span.days}d" if span.days else f"{span.seconds // 3600}h"


def spec_problems(spec) -> list[SpecError]:
    errors: list[SpecError] = []
    cat = catalog_mod.load()
    builder = SignalBuilder(spec.config, cat)
    labels = builder.labels
    tokens = labels.tokens()

    def err(msg, key, *field):
        errors.append(SpecError(msg, spec.locate(key[0], key[1], *field)))

    errors.extend(_dashboard_signal_problems(spec))
    records: dict[str, str] = {}
    for name, signal in spec.signals.items():
        for field in METRIC_FIELDS:
            metric = getattr(signal, field)
            if metric and labels.client_metric(metric):  # client_ttft: the configured source's histogram
                metric = labels.client_metric(metric)
            elif metric and metric.startswith(CLIENT_PREFIX) and labels.client_metric(metric) is None:
                err(_unmeasured(labels.client, metric), ("signal", name), field)
                continue
            if metric in cat.dcgm.fields and labels.unnamed_field(metric):
                err(labels.unnamed_field(metric), ("signal", name), field)
            elif metric and metric not in cat.dcgm.fields:
                probe = metric + ("_bucket" if signal.kind in HISTOGRAM_KINDS else "")
                problem = cat.problem(probe)
                entry = cat.lookup(probe)
                if problem:
                    err(problem, ("signal", name), field)
                elif signal.kind in ("rate", "counter_ratio") and entry.type != "counter":
                    err(f"{metric!r} is a {entry.type}; rate() needs a counter", ("signal", name), field)
                elif signal.kind in HISTOGRAM_KINDS and entry.type != "histogram":
                    err(f"{metric!r} is a {entry.type}, not a histogram", ("signal", name), field)
        if signal.kind == "track_ratio":
            for problem, field in _track_ratio_problems(signal, spec.signals):
                err(problem, ("signal", name), field)
        if signal.record in records and not (signal.kind == "quantile"):
            err(
                f"record {signal.record!r} is already used by signal {records[signal.record]!r}",
                ("signal", name),
                "record",
            )
        records[signal.record] = name

    alert_names = {a.alert for g in spec.groups for a in g.alerts}
    recorded_anywhere = {rec for g in spec.groups for rec in g.records}
    for group in spec.groups:
        for rec in group.records:
            if rec not in spec.signals:
                err(
                    f"group records unknown signal {rec!r}{did_you_mean(rec, spec.signals)}",
                    ("group", group.name),
                    "records",
                )
            elif spec.signals[rec].kind == "track_ratio":
                for problem in _track_group_problems(spec, group, spec.signals[rec], recorded_anywhere):
                    err(problem, ("group", group.name), "records")
        for alert in group.alerts:
            key = ("alert", alert.alert)
            if alert.signal:
                if alert.signal not in spec.signals:
                    err(
                        f"unknown signal {alert.signal!r}{did_you_mean(alert.signal, spec.signals)}",
                        key,
                        "signal",
                    )
                    continue
                if alert.signal not in group.records:
                    err(
                        f"signal {alert.signal!r} must be recorded in the same group (add it to records)",
                        key,
                        "signal",
                    )
                sig = spec.signals[alert.signal]
                if alert.min_traffic is not None and sig.kind not in TRAFFIC_KINDS:
                    err(
                        f"min_traffic needs a counter_ratio or track_ratio signal (it counts the traffic); "
                        f"{alert.signal!r} is a {sig.kind}",
                        key,
                        "min_traffic",
                    )
                if alert.threshold is not None:
                    problem = _ratio_threshold_problem(builder, sig, alert.threshold)
                    if problem:
                        err(problem, key, "threshold")
                if sig.kind == "quantile" and alert.quantile not in sig.quantiles:
                    err(
                        f"alert on quantile signal {alert.signal!r} "
                        f"needs quantile: one of {list(sig.quantiles)}",
                        key,
                        "quantile",
                    )
            if alert.absence and alert.absence.kind in ("no_progress", "rank_idle", "client_missing"):
                for problem, field in _no_progress_problems(alert.absence, spec.signals, _recorded(spec)):
                    err(problem, key, "absence", field)
            if alert.absence and alert.absence.kind == "rank_idle" and RANK not in spec.config.identity.vllm:
                err(
                    f"a rank_idle absence compares the ranks of a pod: config.identity.vllm needs {RANK!r}",
                    key,
                    "absence",
                    "kind",
                )
            if alert.absence and alert.absence.kind == "partner_missing":
                sig = spec.signals.get(alert.absence.signal or "")
                if sig is None or sig.kind != "matched_ratio":
                    err(
                        "absence partner_missing needs signal: a matched_ratio signal",
                        key,
                        "absence",
                        "signal",
                    )
            texts = {
                ("description",): alert.description,
                **{("annotations", k): v for k, v in alert.annotations.items()},
            }
            for field, text in texts.items():
                try:
                    templates.substitute_tokens(text, tokens)
                except KeyError as exc:
                    err(f"unknown token [[{exc.args[0]}]]; known: {', '.join(sorted(tokens))}", key, *field)
                    continue
                for problem in templates.problems(templates.substitute_tokens(text, tokens)):
                    err(problem, key, *field)
                if "{{" in templates.ACTION_RE.sub("", text):
                    err("a template action {{ is not closed with }}", key, *field)

    slo_alerts = {slo.alerting.alert: key for key, slo in spec.slos.items()}
    for section, known in (
        ("alerts", alert_names),
        ("groups", {g.name for g in spec.groups}),
        ("scenarios", {s.name for s in spec.scenarios}),
    ):
        for name in getattr(spec.overrides, section):
            if section == "alerts" and name in slo_alerts:
                err(
                    f"{name!r} is the burn-rate alert of SLO {slo_alerts[name]!r}: tune it under "
                    f"slos.{slo_alerts[name]} (objective, alerting.windows, alerting.min_events), "
                    "not in overrides",
                    (f"override of {section[:-1]}", name),
                )
            elif name not in known:
                err(
                    f"override of unknown {section[:-1]} {name!r}{did_you_mean(name, known)}",
                    (f"override of {section[:-1]}", name),
                )

    # an override may only tune what its alert has: a threshold needs a signal, min_traffic a ratio's
    # denominator
    by_name = {a.alert: a for g in spec.groups for a in g.alerts}
    for name, ov in spec.overrides.alerts.items():
        alert, key = by_name.get(name), ("override of alert", name)
        if alert is None:
            continue
        if ov.threshold is not None and not alert.signal:
            err(f"{name} fires on something missing and has no threshold to override", key, "threshold")
        sig = spec.signals.get(alert.signal) if alert.signal else None
        if sig is not None and ov.threshold is not None:
            problem = _ratio_threshold_problem(builder, sig, ov.threshold)
            if problem:
                err(problem, key, "threshold")
        if ov.min_traffic is not None and (sig is None or sig.kind not in TRAFFIC_KINDS):
            err(
                "min_traffic needs an alert on a counter_ratio or track_ratio signal (it counts the "
                f"traffic); {name} has {'a ' + sig.kind if sig else 'no'} signal",
                key,
                "min_traffic",
            )

    errors.extend(_test_length_problems(spec))
    errors.extend(_cadence_problems(spec))

    # alerts whose annotations show $value: a firing expectation must say which value it expects
    shows_value = {
        a.alert
        for g in spec.groups
        for a in g.alerts
        if any(templates.uses_value(t) for t in (a.description, *a.annotations.values()))
    }
    proven: dict[str, set[str]] = {}
    for scenario in spec.scenarios:
        key = ("scenario", scenario.name)
        if scenario.alert not in alert_names:
            err(
                f"scenario names unknown alert {scenario.alert!r}{did_you_mean(scenario.alert, alert_names)}",
                key,
                "alert",
            )
        for path, text in _scenario_texts(scenario):
            unknown = sorted(set(templates.TOKEN_RE.findall(text)) - set(tokens))
            if unknown:
                err(f"unknown token [[{unknown[0]}]]; known: {', '.join(sorted(tokens))}", key, *path)
        subject = by_name.get(scenario.alert)  # None: named unknown above
        sig = spec.signals.get(subject.signal) if subject is not None and subject.signal else None
        if (
            "min_traffic" in scenario.proves
            and subject is not None
            and (sig is None or sig.kind not in TRAFFIC_KINDS)
        ):
            err(
                f"proves min_traffic, but {scenario.alert} can have no min_traffic guard (only an alert on a "
                "counter_ratio or track_ratio signal has one): the scenario would never be written",
                key,
                "proves",
            )
        for ei, exp in enumerate(scenario.expect):
            name = exp.alert or scenario.alert
            if name not in alert_names:
                err(
                    f"expectation names unknown alert {name!r}{did_you_mean(name, alert_names)}",
                    key,
                    "expect",
                    ei,
                    "alert",
                )
            proven.setdefault(name, set()).add("firing" if exp.firing else "silent")
            for fi, firing in enumerate(exp.firing):
                if name in shows_value and firing.value is None:
                    err(
                        f"{name}'s description shows $value: give the value this alert is expected to have",
                        key,
                        "expect",
                        ei,
                        "firing",
                        fi,
                    )
    disabled = {n for n, o in spec.overrides.alerts.items() if o.enabled is False}
    for group in spec.groups:
        for alert in group.alerts:
            if not alert.enabled or alert.alert in disabled:
                continue
            missing = {"firing", "silent"} - proven.get(alert.alert, set())
            if missing:
                err(
                    f"alert {alert.alert} has no {' and no '.join(sorted(missing))} "
                    "scenario; add one under scenarios:",
                    ("alert", alert.alert),
                )
    errors.extend(_dashboard_problems(spec))
    if not errors:  # expressions are computed on a model: only of a spec sound otherwise
        errors.extend(scenario_problems(spec))
    return errors


def _track_ratio_problems(signal, signals) -> list[tuple[str, str]]:
    """A track_ratio compares a quantile, gauge or ratio signal of its own level, at one quantile
    of a quantile signal."""
    of = signals.get(signal.of)
    if of is None:
        return [(f"unknown signal {signal.of!r}{did_you_mean(signal.of, signals)}", "of")]
    if of.kind not in ("quantile", "gauge", "counter_ratio"):
        return [(f"a track_ratio compares a quantile, gauge or counter_ratio signal, not a {of.kind}", "of")]
    if of.level != signal.level:
        return [(f"{signal.of!r} is per {of.level}; a track_ratio keeps its level", "level")]
    wanted = 1 if of.kind == "quantile" else 0
    if len(signal.quantiles) != wanted or not set(signal.quantiles) <= set(of.quantiles):
        need = f"one of {list(of.quantiles)}" if wanted else "none"
        return [(f"quantiles: {need} ({signal.of!r} is a {of.kind})", "quantiles")]
    return []


def _track_group_problems(spec, group, signal, recorded: set[str]) -> list[str]:
    """A track_ratio compares tracks (config.track) and reads the record of the signal it compares."""
    out = []
    if "track" not in group.needs and spec.config.track is None:
        out.append(f"{signal.record} compares tracks: give the group `needs: [track]` (config.track is null)")
    if signal.of in spec.signals and signal.of not in recorded:
        out.append(f"{signal.of!r}, which {signal.record} compares, is recorded by no group")
    return out


def _recorded(spec) -> set[str]:
    """The signals an enabled group records (overrides applied)."""
    out = set()
    for group in spec.groups:
        if spec.group_enabled(group):
            out.update(group.records)
    return out


def _no_progress_problems(absence, signals, recorded: set[str]) -> list[tuple[str, str]]:
    """`work` must name gauges and `progress` rates, all of one level (the engine that stalls), each
    recorded by an enabled group: the condition reads their recording rules."""
    out, levels = [], set()
    for field, kinds in (("work", ("gauge",)), ("progress", ("rate",))):
        for name in getattr(absence, field):
            signal = signals.get(name)
            if signal is None:
                out.append((f"unknown signal {name!r}{did_you_mean(name, signals)}", field))
            elif signal.kind not in kinds:
                out.append(
                    (
                        f"{field} signals must be {' or '.join(kinds)} signals; {name!r} is a {signal.kind}",
                        field,
                    )
                )
            elif name not in recorded:
                out.append(
                    (
                        f"signal {name!r} is recorded by no enabled group; the condition reads its record",
                        field,
                    )
                )
            else:
                levels.add(signal.level)
    if len(levels) > 1:
        out.append((f"work and progress signals must share one level, not {sorted(levels)}", "work"))
    return out


def _dashboard_problems(spec) -> list[SpecError]:
    uids: dict[str, str] = {}
    errors = []
    for name, board in spec.dashboards.boards.items():
        if board.uid in uids:
            errors.append(
                SpecError(
                    f"uid {board.uid!r} is already used by dashboard {uids[board.uid]!r}",
                    spec.locate("dashboard", name, "uid"),
                )
            )
        uids[board.uid] = name
    return errors


def _scenario_texts(scenario):
    """(field path, text) of everything in a scenario that may hold [[tokens]]."""
    for si, series in enumerate(scenario.series):
        yield ("series", si, "series"), series.series
    for ei, exp in enumerate(scenario.expect):
        for fi, firing in enumerate(exp.firing):
            for label, value in firing.labels.items():
                yield ("expect", ei, "firing", fi, "labels", label), f"{label} {value}"


def _dashboard_signal_problems(spec) -> list[SpecError]:
    out = []
    for name, (kind, level) in DASHBOARD_SIGNALS.items():
        signal = spec.signals.get(name)
        if signal is None:
            out.append(
                SpecError(
                    f"the dashboards read signal {name!r} ({kind}, level {level}); define it",
                    _signals_section(spec),
                )
            )
        elif (signal.kind, signal.level) != (kind, level):
            out.append(
                SpecError(
                    f"the dashboards read {name!r} as a {kind} signal at level {level}, "
                    f"not {signal.kind} at level {signal.level}",
                    spec.locate("signal", name, "kind"),
                )
            )
    return out


def _signals_section(spec):
    """Where the specs define signals (a `signals:` key), to point at when one is missing."""
    for (kind, _), (doc, _) in spec.sources.items():
        if kind == "signal":
            return doc.locate(("signals",))
    return Location(spec.root)  # no file defines any


def _unmeasured(source, metric: str) -> str:
    """Why a signal's client-side quantity (client_itl) names nothing: the gateway or frontend of
    config.client_side has no histogram of it."""
    quantity = metric.removeprefix(CLIENT_PREFIX)
    has = ", ".join(f for f, _ in source.fields) or "none"
    return (
        f"{source.name} measures no {quantity} (catalog/gateway.yaml clients.{source.name}.fields: {has}), "
        f"so {metric!r} reads nothing"
    )
