"""`servewatch backtest` agrees with Prometheus itself on the same rules and the same history.

Prometheus's side: promtool's rule engine (servewatch_testkit.promtool_alerts) runs the generated
rule files on the synthetic series with a simulated clock and reports ALERTS{alertstate="firing"}
at every evaluation: Prometheus's own alerting code, `for` and `keep_firing_for` included, without
an hour of wall time per scenario; only the alerts whose inputs a scenario changes from the healthy
fleet's are run for it, the others' states are the healthy run's (servewatch_testkit.baseline_alerts).
The back-test's side: the same series backfilled into a real Prometheus 3.5, the back-test asking it
over HTTP at step = the group's interval. Both evaluate on the same grid (the data start, aligned
to the interval), so with the records evaluated in place the episodes must match exactly; with the
records read from a backfilled history (stored at their group's phase, one evaluation late at a
grid point) the bar is one evaluation.

Every incident scenario runs, each followed by 40 healthy minutes so that the alerts also resolve;
two overrides add keep_firing_for. One Prometheus serves them all, each scenario on its own span
(servewatch_testkit.spans) further apart than any rule looks back, so none sees another's samples.
Each alert (every SLO tier too) must fire somewhere, or the agreement would be empty for it.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from servewatch.backtest import rules as bt_rules
from servewatch.backtest import incidents, runner
from servewatch_testkit import baseline_alerts, promtool_alerts, rule_reads
from servewatch_testkit import spans
from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.synth import INCIDENTS, incident
from servewatch_testkit.synth.backtest_scenarios import EXTRA
from servewatch_testkit.synth.recovery import recovered
from test_alerts_on_incidents import FIRES

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

STEP = 30.0
RECOVERY_STEPS = 80
KEEP = {"VLLMKVCacheUsageHigh": "3m", "VLLMTimeToFirstTokenP95High": "2m"}
SCENARIOS = sorted(INCIDENTS) + sorted(EXTRA)
BASELINE = "healthy"  # every incident is this fleet with some series changed


@functools.cache
def _healthy():
    """The fleet every scenario recovers to: built once, not once per scenario (a fifth of a second each)."""
    return incident("healthy")


def _scenario(name: str):
    sc = EXTRA[name]() if name in EXTRA else incident(name)
    return recovered(sc, _healthy(), RECOVERY_STEPS)


@pytest.fixture(scope="module")
def rule_set(specs_with, tmp_path_factory):
    overrides = "overrides:\n  alerts:\n" + "".join(
        f"    {a}:\n      keep_firing_for: {d}\n" for a, d in KEEP.items()
    )
    specs = specs_with({"overrides.yaml": [("overrides: {}\n", overrides)]})
    files = bt_rules.generated_files(specs)
    out = tmp_path_factory.mktemp("rules")
    paths = []
    for path, text in sorted(files.items()):
        if path.startswith("rules/") and path.count("/") == 1:
            paths.append(out / Path(path).name)
            paths[-1].write_text(text)
    # promtool's simulated clock evaluates every group at STEP whatever its own interval: the back-test
    # is given the same clock, or a record in a slower group would be read at other instants
    rules = bt_rules.from_files(files, STEP)
    one_clock = bt_rules.RuleSet(
        alerts=tuple(replace(a, interval=STEP) for a in rules.alerts),
        records={n: tuple(replace(r, interval=STEP) for r in rs) for n, rs in rules.records.items()},
    )
    return one_clock, paths


def _prometheus_episodes(sc, firing, start) -> dict:
    last = (sc.steps - 1) * STEP
    return {
        labels: [
            (start + a, None if b is None else start + b) for a, b in promtool_alerts.episodes(t, STEP, last)
        ]
        for labels, t in firing.items()
    }


def _backtest_episodes(result) -> dict:
    out: dict = {}
    for a in result.alerts:
        for e in a.episodes:
            out.setdefault(e.labels, []).append((e.start, e.end))
    return out


def _agree(ours: dict, theirs: dict, tolerance: float | dict[str, float]) -> list[str]:
    """Problems where the episodes differ by more than `tolerance` (seconds, or seconds by alert)."""
    problems = []
    for labels in sorted(set(ours) | set(theirs)):
        a, b = ours.get(labels, []), theirs.get(labels, [])
        name = dict(labels)["alertname"]
        slack = tolerance[name] if isinstance(tolerance, dict) else tolerance
        if len(a) != len(b):
            problems.append(f"{name} {dict(labels)}: backtest {a} vs Prometheus {b}")
            continue
        for (s1, e1), (s2, e2) in zip(a, b, strict=True):
            ends = (e1 is None) == (e2 is None) and (e1 is None or abs(e1 - e2) <= slack)
            if abs(s1 - s2) > slack or not ends:
                problems.append(f"{name} {dict(labels)}: backtest {(s1, e1)} vs Prometheus {(s2, e2)}")
    return problems


def _run(prom, rule_set, sc, start, **kw):
    # the client is the server's own, closed when it stops: one shared server serves many tests
    return runner.run(prom.client, rule_set, start, start + (sc.steps - 1) * STEP, **kw)


@pytest.fixture(scope="module")
def laid_out(rule_set):
    """scenario -> (its series, its span's start), every scenario on its own span of one time axis."""
    # neither side's alerts can see a series that neither they nor the records they read select
    names = rule_reads.names_read(rule_reads.alerts_closure(rule_set[1]))
    scenarios = {name: rule_reads.read_by_rules(_scenario(name), names) for name in SCENARIOS}
    gap = spans.horizon(p.read_text() for p in rule_set[1])
    starts = spans.starts([(sc.steps - 1) * STEP for sc in scenarios.values()], gap)
    return {name: (sc, start) for (name, sc), start in zip(scenarios.items(), starts, strict=True)}


@pytest.fixture(scope="module")
def shared_prom(laid_out):
    """One Prometheus holding every scenario's series (no records stored: all evaluated in place)."""
    with LocalPrometheus([sc.openmetrics(start) for sc, start in laid_out.values()]) as prom:
        yield prom


@pytest.fixture(scope="module")
def alerts_to_run(rule_set, laid_out) -> dict:
    """scenario -> the alerts whose states it needs from a promtool run of its own (None: every
    alert); the others read only series it shares with the baseline, so their states are the
    baseline's (servewatch_testkit.baseline_alerts)."""
    inputs = baseline_alerts.inputs_by_alert(rule_set[1])
    base = laid_out[BASELINE][0]
    return {
        name: None
        if name == BASELINE
        else baseline_alerts.to_run(inputs, baseline_alerts.changed_names(sc, base))
        for name, (sc, _) in laid_out.items()
    }


@pytest.fixture(scope="module")
def prometheus_says(rule_set, laid_out, alerts_to_run):
    """scenario -> (its series, start, Prometheus's episodes), each computed once for the module.
    Every scenario's promtool run starts here, one per core, while the tests' Prometheus is filled:
    the baseline's first, over every alert, each other one's over its alerts_to_run."""

    def run(name: str):
        sc, _ = laid_out[name]
        return promtool_alerts.firing(sc.series, sc.steps, STEP, rule_set[1], alerts=alerts_to_run[name])

    pool = ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)))
    runs = {name: pool.submit(run, name) for name in sorted(SCENARIOS, key=lambda n: n != BASELINE)}

    def says(name: str):
        sc, start = laid_out[name]
        firing = baseline_alerts.merged(runs[name].result(), runs[BASELINE].result(), alerts_to_run[name])
        return sc, start, _prometheus_episodes(sc, firing, start)

    try:
        yield says
    finally:
        pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("name", SCENARIOS)
def test_backtest_episodes_are_prometheus_alerts(name, rule_set, prometheus_says, shared_prom):
    sc, start, theirs = prometheus_says(name)
    result = _run(shared_prom, rule_set[0], sc, start)
    # same instants on both sides: the very same evaluations start and end each episode
    problems = _agree(_backtest_episodes(result), theirs, 0)
    assert not problems, "\n".join(problems)
    if name == "healthy":
        assert not _backtest_episodes(result), "the healthy baseline produced episodes"
    if name in FIRES:
        _caught_with_their_labels(sc, start, result, FIRES[name])


def _caught_with_their_labels(sc, start, result, fires):
    """Each thing an incident should page for (test_alerts_on_incidents.FIRES) is caught, with its
    labels, during the incident; a label the table wants absent must be absent from the episode."""
    expected = []
    for alert, (who, _, why) in fires.items():
        for want in who(sc.truth):
            labels = tuple(sorted((k, v) for k, v in want.items() if v is not None))
            end = start + (sc.truth["recovered_step"] - 1) * STEP
            expected.append(
                (incidents.Incident(why, start + sc.incident_step * STEP, end, alert, labels), want)
            )
    verdicts = incidents.judge([i for i, _ in expected], result)
    for v, (_, want) in zip(verdicts, expected, strict=True):
        assert v.caught, f"missed: {v.incident.alert} {dict(v.incident.labels)} ({v.incident.name})"
        assert not {k for k, val in want.items() if val is None} & {k for k, _ in v.labels}, v


def test_every_alert_fires_in_some_scenario(rule_set, prometheus_says):
    """Else the agreement would be empty for it: every rule (each SLO tier too) has an episode."""
    fired = {dict(labels)["alertname"] for name in SCENARIOS for labels in prometheus_says(name)[2]}
    tiers = {
        (dict(labels)["alertname"], dict(labels).get("long"))
        for n in SCENARIOS
        for labels in prometheus_says(n)[2]
    }
    missing = [a.key for a in rule_set[0].alerts if (a.name, dict(a.labels).get("long")) not in tiers]
    assert fired and not missing, f"never fired, so never compared: {missing}"


def _own_intervals(paths) -> dict[str, float]:
    """{alert: its group's interval}: promtool's backfill writes each record at its own group's
    interval, so an alert that reads its group's records from that history sees them that often."""
    rules = bt_rules.from_files({f"rules/{p.name}": p.read_text() for p in paths}, STEP)
    return {a.name: max(a.interval, STEP) for a in rules.alerts}


@pytest.mark.parametrize("name", ["kv_saturation", "ttft_queueing"])
def test_records_read_from_a_backfilled_history_agree_within_one_evaluation(name, rule_set, prometheus_says):
    ruleset, paths = rule_set
    sc, start, theirs = prometheus_says(name)
    with LocalPrometheus(sc.openmetrics(start), rule_files=paths) as prom:
        result = _run(prom, ruleset, sc, start)
    assert any(result.history.values()), "the backfilled records were not read from the history"
    problems = _agree(_backtest_episodes(result), theirs, _own_intervals(paths))
    assert not problems, "\n".join(problems)


# GPUMissing fires on a GPU's absence; alerts on absence that read no series this scenario changes
# (VLLMMetricsAbsent, SLOInputsMissing, ...) take the baseline's states
@pytest.mark.parametrize("name", ["vanished_gpu"])
def test_a_run_over_the_changed_alerts_alone_fires_as_the_whole_run(
    name, rule_set, alerts_to_run, prometheus_says
):
    """The cut that prometheus_says makes (servewatch_testkit.baseline_alerts) loses no episode."""
    sc, start, theirs = prometheus_says(name)
    ran = alerts_to_run[name]
    assert ran and set(baseline_alerts.inputs_by_alert(rule_set[1])) - ran, f"{name} tests no cut: {ran}"
    whole = promtool_alerts.firing(sc.series, sc.steps, STEP, rule_set[1])
    assert theirs and theirs == _prometheus_episodes(sc, whole, start)
