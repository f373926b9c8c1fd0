"""The promtool tests servewatch derives from the rules themselves, beside the scenarios' (README, "Tuning"):

- boundaries of every threshold alert: just past its threshold it fires exactly `for` after its signal
  has the value and not one evaluation earlier; just short of it, and exactly at it where the value can
  be written exactly, it stays silent (promtool/<family>.boundaries.test.yaml);
- every recording rule: each thing it records, with its labels and value, and nothing more: a ratio
  whose denominator is 0 gives nothing, a thing scraped twice is one thing, things that differ in one
  identity label stay apart, a model's engines add up; a track ratio's each track over its own stable
  twin, nothing without one (promtool/<family>.records.test.yaml).

Thresholds and durations are the alerts' as resolved (overrides applied), so the tests follow any
tuning; the inputs come from plan/synthetic.py. render/rule_tests.py writes them, one file per kind
and family.
"""

from __future__ import annotations

import json
import math

import promql_parser as pp

from .. import alert_context as ctx
from .. import scenarios, templates
from ..model import Model
from ..promql import builders as b
from ..promql import tree
from ..promql.histograms import LE, count_below
from ..spec.deployment import ROLES
from ..spec.schema import seconds
from . import kept
from .traffic_guard import guard_tests
from .synthetic import (
    MARGIN_S,
    deployment_apart,
    REQUESTS,
    Synth,
    bucket_quantile,
    exact_total,
    matcher_split,
    numerator_alternatives,
    ratio_traffic,
    series_text,
)
from .scenario_tests import series_with_selectors

TOLERANCE = 1e-9  # relative: recorded values are checked within it, not to the last bit
KINDS = ("boundaries", "records")


def rule_tests(model: Model) -> list[tuple[str, str, dict]]:
    """(kind, family, promtool test) of every rule-derived test; made once per model (validation's
    selector check designs them too), and taken from servewatch's cache when the same model was
    designed with the same code before (plan/kept.py): every command validates, and designing them
    was a third of it."""
    return model.planned("rule_tests", _kept_or_designed)


CACHE_KIND = "rule-tests"


def _kept_or_designed(model: Model) -> list[tuple[str, str, dict]]:
    return kept.kept_or_designed(
        model, CACHE_KIND, _rule_tests, lambda _, tests: json.dumps(tests), _from_json
    )


def _from_json(_: Model, data) -> list[tuple[str, str, dict]]:
    out = []
    for kind, family, test in data:
        if kind not in KINDS or not isinstance(family, str) or not isinstance(test, dict):
            raise ValueError("not a rule test")
        out.append((kind, family, test))
    return out


def _rule_tests(model: Model) -> list[tuple[str, str, dict]]:
    return [
        *(("boundaries", family, test) for family, test in boundary_tests(model)),
        *(("records", family, test) for family, test in record_tests(model)),
    ]


def _interval(model: Model) -> float:
    return float(seconds(model.config.scrape_interval))


def _test(model: Model, name: str, series, interval: float, **checks) -> dict:
    return {
        "name": name,
        "interval": scenarios.duration(interval),
        "input_series": [{"series": series_with_selectors(model, s), "values": v} for s, v in series],
        **checks,
    }


# -- alert boundaries ------------------------------------------------------------------------------
def boundary_tests(model: Model) -> list[tuple[str, dict]]:
    out = []
    for alert in model.alerts():
        if alert.spec.threshold is not None:
            out += [(alert.family, test) for test in _boundaries(model, alert)]
    return out


def _boundaries(model: Model, alert) -> list[dict]:
    signal = model.signal(alert.spec.signal)
    interval = _interval(model)
    names = scenarios.alert_names(model, alert, interval)
    upward = alert.spec.op in (">", ">=")
    past, short = (
        (names["just_above"], names["just_below"]) if upward else (names["just_below"], names["just_above"])
    )
    for_s = float(seconds(alert.for_))
    onset = Synth(model, interval, 1).onset(signal)
    if signal.kind == "rate" and upward and names["threshold"] == 0:
        onset = interval  # any increase passes 0: the first rate, not the full window, is the onset
    fires_at = onset + for_s
    synth = Synth(model, interval, math.ceil((fires_at + MARGIN_S) / interval))
    labels = synth.identity(signal.level)
    if signal.kind == "track_ratio":  # the alert names the track compared with the stable one
        labels = synth.other_track(labels)
    guard = alert.spec.min_traffic or 0.0
    quantile = alert.spec.quantile

    def series(value):
        if signal.kind == "quantile":
            counts = synth.quantile_counts(signal, value, quantile)
            return None if counts is None else synth.histogram(signal.metric, labels, counts)
        made = synth.signal(signal, value, labels, guard)
        return None if made is None else made.series

    def check(at_s, firing: list[dict]) -> dict:
        return {"eval_time": scenarios.duration(at_s), "alertname": alert.alert, "exp_alerts": firing}

    tests = []
    inputs = series(past) if past is not None else None
    if inputs is not None:
        checks = [check(fires_at - float(seconds(scenarios.EVAL_INTERVAL)), [])] if for_s > 0 else []
        checks.append(check(fires_at, [_expected(model, alert, signal, labels, past)]))
        tests.append(
            _test(
                model,
                f"boundary: {alert.alert} just past its threshold",
                inputs,
                interval,
                alert_rule_test=checks,
            )
        )
    inputs = series(short) if short is not None else None
    if inputs is not None:
        checks = [check(fires_at, [])]
        tests.append(
            _test(
                model,
                f"boundary: {alert.alert} just short of its threshold",
                inputs,
                interval,
                alert_rule_test=checks,
            )
        )
    exact = (
        _exact(model, alert, signal, names["threshold"], labels, fires_at)
        if alert.spec.op in (">", "<")
        else None
    )
    if exact is not None:
        inputs, at_s = exact
        tests.append(
            _test(
                model,
                f"boundary: {alert.alert} exactly at its threshold",
                inputs,
                interval,
                alert_rule_test=[check(at_s, [])],
            )
        )
    tests += guard_tests(
        model,
        alert,
        names,
        lambda thing, value: _expected(model, alert, signal, thing, value),
        lambda name, inputs, **checks: _test(model, name, inputs, interval, **checks),
    )
    return tests


EXACT_SCALES = range(1, 17)  # how many times REQUESTS observations a quantile's exact case may try
# Evaluations a search for the exact case may work out per layout (a week of them at 30s): a `for` of
# weeks would take minutes for a quantile; such an alert keeps its just-past and just-short cases only.
EXACT_EVALS_MAX = 20_000


def _exact(model: Model, alert, signal, threshold: float, labels: dict, fires_at: float):
    """(series, when to check) that give the signal exactly `threshold`, to the last bit, at every
    evaluation of the `for` before the check; None where servewatch cannot show that it does. Only then
    is "silent at the threshold" a test: a comparison that includes the threshold fires there.

    A gauge is read as written; a used / (used + free) is checked as Prometheus divides. A rate, a
    quantile or a track ratio (a canary's quantile over its stable twin's, with the canary's traffic
    past the alert's guard) is worked out as Prometheus 3.5 computes it (plan/synthetic.py, rate_at,
    quantile_at and track_ratio_at), at each evaluation time: a rate's window and a quantile's bucket
    rates only settle once the window is full, so the check may move later, never past the data."""
    interval = _interval(model)
    if signal.kind == "gauge":
        synth = Synth(model, interval, math.ceil((fires_at + MARGIN_S) / interval))
        return synth.signal(signal, threshold, labels).series, fires_at
    if signal.kind == "matched_ratio":
        total = exact_total(threshold)
        part = threshold * total
        if part / (part + (total - part)) != threshold:
            return None
        synth = Synth(model, interval, math.ceil((fires_at + MARGIN_S) / interval))
        return synth.signal(signal, threshold, labels).series, fires_at
    if signal.kind not in ("rate", "quantile", "counter_ratio", "track_ratio"):
        return None
    if signal.kind == "counter_ratio" and matcher_split(signal.matchers) is None:
        return None  # no two counters servewatch can write whose ratio the matchers pick
    window = float(seconds(model.config.rate_window))
    for_s = float(seconds(alert.for_))
    step = float(seconds(scenarios.EVAL_INTERVAL))
    latest = fires_at + window + interval  # from here on every evaluation's window looks the same
    synth = Synth(model, interval, math.ceil((latest + MARGIN_S) / interval))
    holds = int(for_s // step)  # evaluations before a check that its `for` needs on the threshold too
    checks = int((latest - fires_at) // step) + 1  # the times a check may move to
    if holds + checks > EXACT_EVALS_MAX:
        return None
    # a layout: the histogram's counts, a counter ratio's events per second (as Synth.signal writes them),
    # a track ratio's two histograms (the other track's past its guard at every evaluation)
    guard = float(alert.spec.min_traffic or 0)
    traffic = ratio_traffic(guard)
    if signal.kind == "rate":
        layouts = [None]
    elif signal.kind == "counter_ratio":
        layouts = [traffic * k for k in EXACT_SCALES]
    elif signal.kind == "track_ratio":
        per_sample = max(REQUESTS, 2 * guard * window)
        layouts = [
            layout
            for k in EXACT_SCALES
            for layout in synth.track_ratio_layouts(signal, threshold, per_sample * k)
            if layout is not None
        ]
    else:
        layouts = [
            synth.quantile_counts(signal, threshold, alert.spec.quantile, REQUESTS * k) for k in EXACT_SCALES
        ]
    for layout in layouts:
        if signal.kind == "quantile" and layout is None:
            return None
        run = 0  # evaluations in a row, up to this one, where the value is exactly the threshold
        for k in range(holds + checks):
            t = fires_at - for_s + k * step
            if layout is None:
                value = synth.rate_at(threshold * interval, t, window)
            elif signal.kind == "counter_ratio":
                value = synth.counter_ratio_at(threshold, layout, t, window)
            elif signal.kind == "track_ratio":
                guarded = synth.rate_at(sum(layout[1].values()), t, window)
                value = synth.track_ratio_at(signal, layout, t, window) if (guarded or 0) >= guard else None
            else:
                value = synth.quantile_at(signal, layout, alert.spec.quantile, t, window)
            run = run + 1 if value == threshold else 0
            if run == 0 and holds + checks - 1 - k <= holds:
                break  # too few evaluations left for a run of the whole `for`: the next layout
            if k >= holds and run > holds:  # the check at fires_at + (k - holds) steps and its whole `for`
                at_s = fires_at + (k - holds) * step
                if layout is None:
                    return synth.signal(signal, threshold, labels).series, at_s
                if signal.kind == "counter_ratio":
                    return synth.counter_ratio(signal, threshold, labels, layout), at_s
                if signal.kind == "track_ratio":
                    return synth.track_ratio_series(signal, labels, layout), at_s
                return synth.histogram(signal.metric, labels, layout), at_s
    return None


def _expected(model: Model, alert, signal, labels: dict, value: float) -> dict:
    """The alert as promtool must see it: the labels its expression keeps, and the annotations."""
    synth = Synth(model, 1, 1)
    lbls = synth.key(signal.level, labels, signal.metric)
    if signal.level != "gpu":  # a GPU alert is cut to the GPU by its context join; others keep `by`
        lbls.update(synth.by(signal))
    if signal.level == "gpu":
        lbls.update({ctx.HOST: labels[model.builder.labels.host], "gpu": labels["gpu"]})
    lbls = {**lbls, **alert.result_labels, **alert.labels}
    annotations = {k: templates.render(v, lbls, value) for k, v in alert.annotations.items()}
    return {"exp_labels": dict(sorted(lbls.items())), "exp_annotations": annotations}


# -- recording rules -------------------------------------------------------------------------------
def record_tests(model: Model) -> list[tuple[str, dict]]:
    out = []
    for group in model.groups:
        for rule in group.records:
            test = _signal_record(model, rule) if rule.signal else _memory_record(model, rule)
            if test is not None:
                out.append((group.family, test))
    return out


def record_checks(record: str, static: dict, expected: list[tuple[dict, float]], at_s: float) -> list[dict]:
    """Each expected series, its value within TOLERANCE; and no other series (count)."""
    eval_time = scenarios.duration(at_s)
    sel = ", ".join(f'{k}="{v}"' for k, v in static.items())
    out = []
    for labels, value in expected:
        margin = max(abs(value), 1.0) * TOLERANCE
        matchers = ", ".join(f'{k}="{v}"' for k, v in {**labels, **static}.items())
        expr = (
            f"group without () ({record}{{{matchers}}} > {scenarios.number(value - margin)} "
            f"< {scenarios.number(value + margin)})"
        )
        shown = ", ".join(f'{k}="{v}"' for k, v in sorted({**labels, **static}.items()))
        out.append(
            {"expr": expr, "eval_time": eval_time, "exp_samples": [{"labels": f"{{{shown}}}", "value": 1}]}
        )
    count = f"count({record}{{{sel}}})" if sel else f"count({record})"
    out.append(
        {"expr": count, "eval_time": eval_time, "exp_samples": [{"labels": "{}", "value": len(expected)}]}
    )
    return out


def _signal_record(model: Model, rule) -> dict | None:
    signal = model.signal(rule.signal)
    interval = _interval(model)
    at = float(seconds(model.config.rate_window)) + 2 * interval  # every window full
    synth = Synth(model, interval, math.ceil((at + MARGIN_S) / interval))
    if signal.kind == "track_ratio":
        return _track_ratio_record(model, rule, synth, at)
    quantile = float(rule.labels["quantile"]) if "quantile" in rule.labels else None
    level = signal.level
    ids = synth.labels.identity(level)
    # things that differ from the first in exactly one identity label, each with its own value
    pinned = synth.pinned("dcgm" if level == "gpu" else "vllm")
    things = [synth.identity(level)] + [
        synth.identity(level, change=label) for label in ids if label not in pinned
    ]
    if level == "gpu":  # the descriptive labels a GPU's record carries for the dashboards
        spellings = synth.labels.host_spellings  # the host is folded from these: one is set already
        context = [k for k in synth.labels.gpu_context() if k not in things[0] and k not in spellings]
        things = [{**t, **{k: f"{k.lower()}-{i}" for k in context}} for i, t in enumerate(things)]
    if level == "model":  # and a second engine of the first model, which its engines add up with
        engine_only = [label for label in synth.labels.identity("engine") if label not in [*ids, *pinned]]
        if model.builder.source(model.builder.metric_name(signal.metric or "")) == "gateway":
            engine_only = [label for label in engine_only if label not in synth.labels.vllm_only()]
            engine_only += _source_labels(model, synth, signal, rule, [*ids, *pinned, *engine_only])
        if not engine_only:
            return None
        for label in engine_only:  # one more engine apart in each engine label: all add up
            things.insert(1, synth.identity("engine", change=label))
    # with config.role or config.track: the first thing on each other role the signal reads and on a
    # canary, each its own; on each role it leaves out, nothing recorded
    read, unread = deployment_apart(model, signal) if _is_vllm(model, signal) else ([], [])
    things += [{**things[0], label: value} for label, value in read if label in ids]
    # a counter ratio whose numerator is a list of alternatives: one thing more on each but the first
    alternatives = {}  # thing's index -> the alternative its numerator sits on
    if signal.kind == "counter_ratio" and any(label not in pinned for label in ids):  # else one key
        for k in range(1, numerator_alternatives(signal.matchers)):
            alternatives[len(things)] = k
            things.append(synth.identity(level, variant=f"alt{k}"))
    values = _values(signal, len(things))
    series, per_thing = [], []
    for i, (thing, value) in enumerate(zip(things, values, strict=True)):
        made = _record_input(synth, signal, value, thing, quantile, alternatives.get(i, 0))
        if made is None:
            return None
        series += made
        per_thing.append((thing, value))
    series += _record_input(synth, signal, values[0], {**things[0], "job": "duplicate"}, quantile) or []
    for label, value in unread:
        if label in ids:
            series += _record_input(synth, signal, values[-1], {**things[0], label: value}, quantile) or []
    # beside the first thing, series of its histogram that do not measure the quantity (catalog
    # `only:`, a non-streaming request's TTFT), with another thing's value: the record leaves them out
    for label in synth.labels.client.measuring(model.builder.metric_name(signal.metric or "")):
        unmeasured = {**things[0], label: f"{label.lower()}-other"}
        series += _record_input(synth, signal, values[-1], unmeasured, quantile) or []
    # idle things: one of its own, and one beside each busy thing that differs from it in one label only,
    # so a result kept for the busy one cannot carry the idle one along
    for idle in [synth.identity(level, variant="idle")] + [
        {**things[0], label: f"{label.lower()}-idle"} for label in ids if label not in pinned
    ]:
        series += _idle(synth, signal, idle)
    expected = _combine(model, synth, signal, per_thing, quantile)
    static = dict(rule.labels)
    native = signal.kind == "bucket_rate" and model.builder.histograms.native
    checks = (_native_bucket_checks if native else record_checks)(rule.record, static, expected, at)
    return _test(
        model,
        f"record: {rule.record}{_static_text(static)}",
        series,
        interval,
        promql_expr_test=checks,
    )


def _source_labels(model: Model, synth: Synth, signal, rule, taken: list[str]) -> list[str]:
    """The labels a client source's series of the record's metric differ by beyond the identity
    (its flows, priorities, endpoints: catalog/gateway.yaml), less those the record matches on or
    keeps and the model label: two series apart in one of them are different requests, added up.
    The labels that say which series measure the quantity (catalog `only:`) keep their one value."""
    matched = {m.name for sel in tree.selectors(pp.parse(rule.expr)) for m in sel.matchers.matchers}
    name = model.builder.metric_name(signal.metric)
    skip = {*taken, *signal.by, *matched, *synth.labels.client.measuring(name), synth.labels.client_model, LE}
    keys = synth.labels.client_keys(name)
    return [label for label in keys if label not in skip]


def _native_bucket_checks(record: str, static: dict, expected: list[tuple[dict, float]], at_s: float) -> list:
    """record_checks of a bucket-rate record that holds native histograms: each classic bucket's rate is
    the count at or below its bound (histogram_fraction x histogram_count), one series per key."""
    eval_time = scenarios.duration(at_s)
    out, keys = [], {}
    for labels, value in expected:
        key = {k: v for k, v in labels.items() if k != LE}
        keys[tuple(sorted(key.items()))] = key
        selector = series_text(record, {**key, **static})
        bound = float(labels[LE])
        read = (
            f"histogram_count({selector})" if bound == float("inf") else count_below(bound, selector, [*key])
        )
        margin = max(abs(value), 1.0) * TOLERANCE
        lo, hi = scenarios.number(value - margin), scenarios.number(value + margin)
        shown = ", ".join(f'{k}="{v}"' for k, v in sorted({**key, **static}.items()))
        out.append(
            {
                "expr": f"group without () ({read} > {lo} < {hi})",
                "eval_time": eval_time,
                "exp_samples": [{"labels": f"{{{shown}}}", "value": 1}],
            }
        )
    count = series_text(record, static) if static else record
    out.append(
        {
            "expr": f"count({count})",
            "eval_time": eval_time,
            "exp_samples": [{"labels": "{}", "value": len(keys)}],
        }
    )
    return out


def _track_ratio_record(model: Model, rule, synth: Synth, at: float) -> dict | None:
    """A track_ratio's record: the compared quantile of each track other than the stable one over its
    stable twin's, per model (and role). Model a has a stable track, a canary and a third track; each
    model apart from it in one identity label (the role: another the compared signal reads) has a
    stable track and a canary of its own; every histogram its own observations (_spread), so every
    quantile differs. a's canary is scraped twice (one value); a canary without a stable twin and one
    whose stable twin observes nothing give no result. Each value is worked out from the observations
    as written (_spread_quantile), not read back from Prometheus."""
    signal = model.signal(rule.signal)
    compared, q = model.signal(signal.of), signal.quantiles[0]
    track, role = model.config.track, model.config.role
    tracks = [t for t in ("canary", "next", "third") if t != track.stable][:2]
    pinned = synth.pinned("vllm")
    first = synth.identity("model")
    models = [first] + [
        synth.identity("model", change=label)
        for label in synth.labels.identity("model")
        if label not in pinned
    ]
    if role is not None:  # a model on another role the compared signal reads: its own stable twin
        read = [v for r in (compared.roles or ROLES) for v in role.values[r] if v != first[role.label]]
        models += [{**first, role.label: read[0]}] if read else []
    # (labels, index of its observations' spread): each histogram its own index, so its own quantile
    histograms, expected = [], []
    for n, thing in enumerate(models):
        stable = ({**thing, track.label: track.stable}, len(histograms) + 1)
        histograms.append(stable)
        for other in tracks[: 2 if n == 0 else 1]:
            histograms.append(({**thing, track.label: other}, len(histograms) + 1))
            labels, i = histograms[-1]
            ratio = _spread_quantile(synth, compared, [i], q) / _spread_quantile(
                synth, compared, [stable[1]], q
            )
            expected.append((synth.key("model", labels), ratio))
    canary = histograms[1]
    histograms.append(({**canary[0], "job": "duplicate"}, canary[1]))  # a's canary scraped twice
    for variant in ("orphan", "idle"):  # a canary alone; a canary whose stable twin observes nothing
        histograms.append(
            ({**synth.identity("model", variant=variant), track.label: tracks[0]}, len(histograms) + 1)
        )
    if max(i for _, i in histograms) > len(_bounds(synth, compared)) - 5:
        return None  # too few buckets to give every histogram its own quantile (_spread)
    series = [
        s
        for labels, i in histograms
        for s in synth.histogram(compared.metric, labels, _spread(synth, compared, i))
    ]
    idle_twin = {**histograms[-1][0], track.label: track.stable}
    series += synth.histogram(compared.metric, idle_twin, {}, bounds=(), per_sample=False)
    static = dict(rule.labels)
    return _test(
        model,
        f"record: {rule.record}{_static_text(static)}",
        series,
        _interval(model),
        promql_expr_test=record_checks(rule.record, static, expected, at),
    )


def _static_text(static: dict) -> str:
    return "".join(f" {k}={v}" for k, v in static.items())


def _is_vllm(model: Model, signal) -> bool:
    """Whether a signal reads vLLM series (which carry the role and track), not a gateway's or DCGM's."""
    return bool(signal.metric) and model.builder.source(model.builder.metric_name(signal.metric)) == "vllm"


def _values(signal, n: int) -> list[float]:
    """n distinct values a signal of its kind can take."""
    if signal.kind in ("matched_ratio", "counter_ratio"):
        return [round(0.1 + 0.8 * i / max(n, 1), 6) for i in range(n)]
    if signal.kind in ("quantile", "bucket_rate"):
        return [float(i) for i in range(n)]  # how far each thing's observations are shifted (_spread)
    return [float(i + 1) for i in range(n)]


def _record_input(synth: Synth, signal, value, labels: dict, quantile, alternative: int = 0):
    if signal.kind in ("quantile", "bucket_rate"):
        counts = _spread(synth, signal, value)
        return synth.histogram(signal.metric, labels, counts, _bounds(synth, signal))
    made = synth.signal(signal, value, labels, alternative=alternative)
    return list(made.series) if made else None


# Bounds for a histogram whose bounds depend on the deployment (vLLM's token histograms follow
# max_model_len): a record of its bucket rates keeps whatever `le` it is given.
DEPLOYMENT_BOUNDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


def _bounds(synth: Synth, signal) -> tuple[float, ...]:
    return synth.buckets_of(signal.metric) or DEPLOYMENT_BOUNDS


def _spread(synth: Synth, signal, index) -> dict[float, float]:
    """Observations spread over four buckets, shifted by `index`, so every quantile differs."""
    bounds = _bounds(synth, signal)
    start = min(int(index), max(len(bounds) - 5, 0))
    shares = (50.0, 30.0, 15.0, 5.0)
    return {bounds[start + i]: share for i, share in enumerate(shares)}


def _idle(synth: Synth, signal, labels: dict) -> list[tuple[str, str]]:
    """A thing whose ratio or quantile divides by 0: it must give no result."""
    name = synth.sb.metric_name
    flat = f"7x{synth.steps}"
    if signal.kind == "matched_ratio":
        return [
            (series_text(name(signal.numerator), labels), f"0x{synth.steps}"),
            (series_text(name(signal.partner), labels), f"0x{synth.steps}"),
        ]
    if signal.kind == "counter_ratio":  # both halves present and still: 0 / 0
        split = matcher_split(signal.matchers)
        halves = split if split is not None else ({},)
        return [(series_text(name(signal.metric), {**labels, **half}), flat) for half in halves]
    if signal.kind == "bucket_rate":
        return []  # an idle histogram's bucket rates are 0, not absent: nothing to tell apart
    if signal.kind == "quantile":
        return synth.histogram(signal.metric, labels, {}, bounds=(), per_sample=False)
    return []


def _combine(model: Model, synth: Synth, signal, things: list[tuple[dict, float]], quantile) -> list:
    """(labels, value) of each result the record has for `things`."""
    level = signal.level
    groups: dict[tuple, list[tuple[dict, float]]] = {}
    for labels, value in things:
        key = {**synth.key(level, labels, signal.metric), **{b_: f"{b_}-a" for b_ in signal.by}}
        if model.builder.carries_gpu_context(signal):
            key.update(_gpu_context(model, labels))
        groups.setdefault(tuple(sorted(key.items())), []).append((labels, value))
    out = []
    for key, members in groups.items():
        values = [v for _, v in members]
        if signal.kind == "bucket_rate":
            out += _bucket_rates(synth, signal, dict(key), [index for _, index in members])
            continue
        if signal.kind == "quantile":
            value = _spread_quantile(synth, signal, [index for _, index in members], quantile)
        elif signal.kind == "counter_ratio":
            value = sum(values) / len(values)  # equal traffic per engine: the mean share
        elif signal.kind == "gauge":
            value = max(values)  # deduplicated by max to the key (a pool's gauges from each gateway pod)
        else:
            value = sum(values) if level == "model" else values[0]
        out.append((dict(key), value))
    return out


def _spread_quantile(synth: Synth, signal, indices: list[float], q: float) -> float:
    """Quantile q of the histograms _spread writes for `indices`, added up (a model's engines)."""
    summed: dict[float, float] = {}
    for index in indices:
        for bound, c in _spread(synth, signal, index).items():
            summed[bound] = summed.get(bound, 0) + c
    cumulative, running = [], 0.0
    for bound in sorted(summed):
        running += summed[bound]
        cumulative.append((bound, running))
    cumulative.append((float("inf"), running))
    return bucket_quantile(q, cumulative)


def _bucket_rates(synth: Synth, signal, key: dict, indices: list[float]) -> list[tuple[dict, float]]:
    """The per-second rate of every cumulative bucket (each catalog bound and +Inf) of the members'
    histograms added up: what a bucket-rate record holds for one key."""
    per_sample = {bound: 0.0 for bound in [*_bounds(synth, signal), float("inf")]}
    for index in indices:
        for upper, c in _spread(synth, signal, index).items():
            for bound in per_sample:
                if upper <= bound:
                    per_sample[bound] += c
    return [
        ({**key, "le": "+Inf" if bound == float("inf") else scenarios.number(bound)}, c / synth.interval)
        for bound, c in per_sample.items()
    ]


def _gpu_context(model: Model, labels: dict) -> dict:
    lb = model.builder.labels
    context = {k: labels[k] for k in lb.gpu_context() if k in labels}
    return {**context, ctx.HOST: labels[lb.host]}


def _memory_record(model: Model, rule) -> dict | None:
    """The memory records of alert_context.py: what they remember, for which key."""
    interval = _interval(model)
    at = 10 * interval
    synth = Synth(model, interval, math.ceil((at + MARGIN_S) / interval))
    lb, sb = model.builder.labels, model.builder
    fb = sb.metric_name("fb_used")
    gpu_a, gpu_b = synth.identity("gpu", "a"), synth.identity("gpu", "b")
    other_host = next((s for s in lb.host_spellings if s != lb.host), lb.host)
    target = {k: f"{k}-a" for k in lb.target()}
    dcgm_target, vllm_target = {**target, **synth.pinned("dcgm")}, {**target, **synth.pinned("vllm")}
    flat = f"1x{synth.steps}"
    if rule.record == ctx.GPU_INFO:
        b_moved = {k: v for k, v in gpu_b.items() if k != lb.host} | {other_host: gpu_b[lb.host]}
        series = [
            (series_text(fb, gpu_a), flat),
            (series_text(fb, gpu_b), flat),
            (series_text(fb, b_moved), flat),
        ]
        expected = [
            ({**synth.key("gpu", g), ctx.HOST: g[lb.host], "gpu": g["gpu"]}, 1.0) for g in (gpu_a, gpu_b)
        ]
    elif rule.record == ctx.GPU_WORKLOAD:
        # a's pod seen through FB_USED, c's through the next presence field alone, b has no pod
        wl = lb.workload
        mapped = {**gpu_a, wl.namespace: "ns-a", wl.pod: "pod-a"}
        gpu_c = {**synth.identity("gpu", "c"), wl.namespace: "ns-c", wl.pod: "pod-c"}
        other = next(
            (sb.metric_name(f) for f in model.context.presence_fields() if sb.metric_name(f) != fb), None
        )
        series = [(series_text(fb, mapped), flat), (series_text(fb, gpu_b), flat)]
        series += [(series_text(other, gpu_c), flat)] if other else []
        expected = [
            ({**synth.key("gpu", g), ctx.NAMESPACE: g[wl.namespace], ctx.POD: g[wl.pod]}, at)
            for g in ([mapped, gpu_c] if other else [mapped])
        ]
    elif rule.record == ctx.DCGM_TARGET_HOST:
        series = [(series_text(fb, {**gpu_a, **dcgm_target}), flat)]
        expected = [({k: dcgm_target[k] for k in lb.target()} | {ctx.HOST: gpu_a[lb.host]}, at)]
    elif rule.record == ctx.VLLM_TARGET_MODEL:
        engine = synth.identity("engine")
        series = [(series_text(sb.liveness, {**engine, **vllm_target, "model_name": "model-a"}), flat)]
        expected = [({k: vllm_target[k] for k in lb.target()} | {ctx.MODEL: "model-a"}, at)]
    elif rule.record in (ctx.ENGINE_SEEN, ctx.GPU_SEEN):
        # present for the first two samples only: still remembered at `at`, within remember.parts,
        # though an instant query has lost it (5 minutes of lookback)
        gone = f"1 1 _x{synth.steps}"
        at = max(at, 2 * interval + 300)
        if rule.record == ctx.ENGINE_SEEN:
            part = {**synth.identity("engine"), **vllm_target}
            series = [(series_text(sb.liveness, part), gone)]
            keys = lb.identity("engine") + lb.target()
            expected = [({k: part[k] for k in keys}, 1.0)]
        else:
            part = {**gpu_a, **dcgm_target, "modelName": "model-a"}
            series = [(series_text(sb.metric_name(ctx.PART_FIELD), part), gone)]
            keys = lb.identity("gpu") + lb.target() + ["gpu", "modelName"]
            expected = [({k: part[k] for k in keys if k in part} | {ctx.HOST: gpu_a[lb.host]}, 1.0)]
    elif rule.record == ctx.POOL_SEEN:
        # pool a from two pods of one gateway (one series: the gateway, not its pod), pool b from
        # another gateway for its first two samples only: still remembered at `at`, though an
        # instant query has lost it (5 minutes of lookback)
        at = max(at, 2 * interval + 300)
        keys = model.context.pool_memory_keys()

        def reported(variant: str, instance: str) -> dict[str, str]:
            return {k: f"{k}-{variant}" for k in keys + lb.target()} | {"instance": instance}

        ready = sb.metric_name(ctx.POOL_READY)
        a1, a2, b_ = reported("a", "a-1"), reported("a", "a-2"), reported("b", "b-1")
        series = [
            (series_text(ready, a1), flat),
            (series_text(ready, a2), flat),
            (series_text(ready, b_), f"1 1 _x{synth.steps}"),
        ]
        expected = [({k: p[k] for k in keys}, 1.0) for p in (a1, b_)]
    elif rule.record in _pair_records(model):
        series, expected = _pair_case(model, synth, *_pair_records(model)[rule.record])
    elif rule.record in (ctx.DCGM_TARGETS, ctx.VLLM_TARGETS):
        source = "vllm" if rule.record == ctx.VLLM_TARGETS else "dcgm"
        up = _matching_target(model, source)
        if up is None:
            return None
        by = ([model.config.cluster_label] if model.config.cluster_label else []) + (
            [ctx.NAMESPACE] if source == "vllm" else []
        )
        groups = {"a": 2, "b": 1}
        series = [
            (series_text("up", {**up, **{k: f"{k}-{g}" for k in by}, "instance": f"{g}-{i}"}), flat)
            for g, n in groups.items()
            for i in range(n)
        ]
        expected = [({k: f"{k}-{g}" for k in by}, float(n)) for g, n in groups.items()]
    else:
        return None
    return _test(
        model,
        f"record: {rule.record}",
        series,
        interval,
        promql_expr_test=record_checks(rule.record, {}, expected, at),
    )


def _pair_records(model: Model) -> dict[str, tuple[str, object]]:
    """The records of each partner_missing alert's pair (alert_context.pair_exported): record name ->
    ("gpu" or "target", the matched_ratio signal)."""
    out = {}
    for a in model.alerts():
        absence = getattr(a.spec, "absence", None)
        if absence is not None and absence.kind == "partner_missing":
            signal = model.signal(absence.signal)
            per_gpu, by_target = model.context.pair_exported(signal)
            out[per_gpu.record], out[by_target.record] = ("gpu", signal), ("target", signal)
    return out


def _pair_case(model: Model, synth: Synth, level: str, signal) -> tuple[list, list]:
    """GPU a exports only the numerator, b only the partner, c both and is scraped twice, d only its
    temperature: per GPU 1, 2 and 3 (d is not there); per target each that exports either."""
    lb, sb = model.builder.labels, model.builder
    num, partner = sb.metric_name(signal.numerator), sb.metric_name(signal.partner)
    temp = sb.metric_name(ctx.PART_FIELD)
    gpu = {v: synth.identity("gpu", v) for v in ("a", "b", "c", "d")}
    # a target's labels besides the GPU's own (a configured cluster label is both)
    own = [k for k in lb.target() if k not in gpu["a"]]
    target = {v: {k: f"{k}-{v}" for k in own} | synth.pinned("dcgm") for v in ("a", "b", "c", "d")}
    flat = f"1x{synth.steps}"
    inputs = [
        (num, "a", "a"),
        (partner, "b", "b"),
        (num, "c", "a"),
        (partner, "c", "a"),
        (partner, "c", "c"),
        (temp, "d", "d"),
    ]
    series = [(series_text(m, {**gpu[g], **target[t]}), flat) for m, g, t in inputs]
    if level == "gpu":
        expected = [(synth.key("gpu", gpu[g]), float(v)) for g, v in (("a", 1), ("b", 2), ("c", 3))]
    else:
        keys = {
            tuple((k, {**gpu[g], **target[t]}[k]) for k in lb.target()): None
            for m, g, t in inputs
            if m != temp
        }
        expected = [(dict(key), 1.0) for key in keys]
    return series, expected


def _matching_target(model: Model, source: str) -> dict[str, str] | None:
    """Labels an `up` series needs to be a target of `source` (config.targets), if servewatch can
    find values that match its matchers."""
    from ..spec import matchers

    out = {}
    for label, op, value in b.parse_matchers(model.config.targets[source]):
        if op == "=":
            out[label] = value
        elif op == "=~":
            found = next(
                (
                    c
                    for c in (source, f"{source}-exporter", f"nvidia-{source}-exporter", value)
                    if matchers.accepts("=~", value, c)  # RE2, anchored, as Prometheus reads it
                ),
                None,
            )
            if found is None:
                return None
            out[label] = found
        else:
            return None
    return out
