"""servewatch backtest: the state machine, the inlining, the inputs, and the command on a real Prometheus.

Agreement with Prometheus's own alert states over every incident is in test_backtest_agrees.py.
"""

from __future__ import annotations

import json

import promql_parser as pp
import pytest

from servewatch import cli
from servewatch.errors import ServewatchError
from servewatch.backtest import incidents, inline, signal, state, timespec
from servewatch.backtest.evaluate import BacktestError, QueryBounds, chunks, grid
from servewatch.backtest.rules import Record
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import incident

LABELS = (("alertname", "A"),)


def _run(true_at: range, for_s=0.0, keep=0.0, n=40):
    points = [i * 30.0 for i in range(n)]
    values = {t: 1.0 + t / 1000 for t in points if int(t // 30) in true_at}
    return state.run(points, values, for_s, keep, LABELS)


# -- Prometheus's state machine --------------------------------------------------------------------------


def test_fires_after_for_and_resolves_at_the_first_false_evaluation():
    out = _run(range(1, 11), for_s=60)  # true at 30 s .. 300 s
    (e,) = out.episodes
    assert (e.active_at, e.start, e.end) == (30, 90, 330)
    assert e.peak == pytest.approx(1.3)


def test_without_for_it_fires_on_the_first_true_evaluation():
    (e,) = _run(range(3, 5)).episodes
    assert (e.start, e.end) == (90, 150)


def test_a_pending_stretch_shorter_than_for_is_no_episode():
    out = _run(range(1, 3), for_s=60)  # true at 30 and 60: never 60 s after activeAt
    assert out.episodes == [] and out.never_fired == 1


def test_keep_firing_for_holds_it_and_a_return_continues_the_episode():
    out = _run([*range(1, 5), 7, 8], keep=90)  # false at 150, 180; back at 210
    (e,) = out.episodes
    assert (e.start, e.end) == (30, 360)  # false from 270: kept at 270, 300, 330 (< 90 s), resolved at 360


def test_a_return_after_the_resolution_is_a_new_episode_that_waits_for_for_again():
    out = _run([*range(1, 5), *range(6, 12)], for_s=60)
    assert [(e.start, e.end) for e in out.episodes] == [(90, 150), (240, 360)]


def test_still_firing_at_the_end_has_no_end():
    (e,) = _run(range(30, 40)).episodes
    assert e.end is None and e.duration(39 * 30.0) == 9 * 30


def test_alert_labels_are_the_results_the_rules_and_the_name():
    got = state.alert_labels(
        (("__name__", "x"), ("pod", "p"), ("severity", "low")), (("severity", "page"),), "A"
    )
    assert dict(got) == {"pod": "p", "severity": "page", "alertname": "A"}


# -- the grid and its chunks -----------------------------------------------------------------------------


def test_grid_is_the_multiples_of_the_step_and_chunks_cover_it_without_overlap():
    points = grid(95, 1000, 30)
    assert points[0] == 120 and points[-1] == 990
    parts = chunks(points, 30, QueryBounds(chunk_s=300, max_points=100))
    assert parts[0] == (120, 390) and parts[-1][1] == 990
    assert all(b[0] - a[1] == 30 for a, b in zip(parts, parts[1:], strict=False))


# -- records written out in place ------------------------------------------------------------------------

RECORDS = {
    "m:q": (
        Record("m:q", "histogram_quantile(0.5, b)", (("quantile", "0.5"),), 30),
        Record("m:q", "histogram_quantile(0.95, b)", (("quantile", "0.95"),), 30),
    ),
    "m:b": (Record("m:b", "sum by (le) (rate(x_bucket[5m]))", (), 60),),
}


def test_a_selector_takes_only_the_rules_its_static_labels_match():
    out = inline.expand('m:q{quantile="0.95"} > 2', RECORDS, lambda n: False)
    assert "0.95" in out and "0.5," not in out
    assert 'label_replace(histogram_quantile(0.95, b), "quantile", "0.95", "", "")' in out
    pp.parse(out)


def test_a_dynamic_matcher_filters_and_a_window_becomes_a_subquery_at_the_records_interval():
    out = inline.expand('max_over_time(m:b{le="+Inf"}[10m])', RECORDS, lambda n: False)
    assert 'and on (le) label_replace(vector(1), "le", "+Inf", "", "")' in out
    assert out.endswith("[10m:60s])")
    pp.parse(out)


def test_a_record_in_the_history_is_read_as_stored():
    assert inline.expand('m:q{quantile="0.95"} > 2', RECORDS, lambda n: True) == 'm:q{quantile="0.95"} > 2'


def test_a_stored_offset_read_that_is_missing_cannot_be_inlined():
    with pytest.raises(inline.InlineError, match="offset"):
        inline.expand("m:b offset 1h", RECORDS, lambda n: False)


def test_the_signal_is_the_left_of_the_first_comparison_with_a_number():
    s = signal.of("(x / y > 14.4 and on (a) z > 1) and on (a) w >= 100")
    assert (s.expr, s.op, s.threshold) == ("x / y", ">", 14.4)
    assert signal.of("0.2 > free").op == "<" and signal.of("absent(up)") is None


# -- inputs ----------------------------------------------------------------------------------------------


def test_ranges():
    assert timespec.span("7d", now=1e6) == (1e6 - 7 * 86400, 1e6)
    assert (
        timespec.span("2026-07-01T00:00:00Z..2026-07-01T06:00:00Z")[1]
        - timespec.span("2026-07-01T00:00:00Z..2026-07-01T06:00:00Z")[0]
        == 6 * 3600
    )
    for bad, why in [("7 days", "neither"), ("now..-1h", "ends before"), ("x..now", "not a time")]:
        with pytest.raises(ServewatchError, match=why):
            timespec.span(bad)


def test_an_incidents_file_with_a_mistake_names_the_entry(tmp_path):
    path = tmp_path / "incidents.yaml"
    path.write_text("incidents:\n- alert: A\n  start: now\n  ends: now\n")
    with pytest.raises(BacktestError, match=r"incidents\[0\]: unknown field 'ends'; missing field 'end'"):
        incidents.load(path, 0)
    path.write_text("incidents: [")
    with pytest.raises(BacktestError, match=r"incidents.yaml:1: not YAML"):
        incidents.load(path, 0)


# -- the command on a real Prometheus --------------------------------------------------------------------


@pytest.fixture(scope="module")
def queueing():
    sc = incident("ttft_queueing")
    start = backfill_start(sc.steps, sc.step)
    with LocalPrometheus(sc.openmetrics(start)) as prom:
        yield prom, sc, start, start + (sc.steps - 1) * sc.step


def _cli(capsys, *argv):
    code = cli.main(["backtest", "--evaluation-interval", "30s", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_the_command_reports_episodes_incidents_json_html_and_a_comparison(
    queueing, capsys, tmp_path, specs_with, repo
):
    prom, sc, start, end = queueing
    inc = tmp_path / "incidents.yaml"
    t0 = sc.time_at(start, sc.incident_step)
    inc.write_text(
        "incidents:\n"
        f"- {{name: queueing, alert: VLLMTimeToFirstTokenP95High, start: {t0}, end: {end},"
        f" labels: {{namespace: {sc.truth['namespace']}, quantile: '0.95'}}}}\n"
        f"- {{name: wrong pod, alert: VLLMKVCacheUsageHigh, start: {t0}, end: {end}}}\n"
    )
    calmer = specs_with(
        {
            "overrides.yaml": [
                (
                    "overrides: {}\n",
                    "overrides:\n  alerts:\n    VLLMTimeToFirstTokenP95High:\n      threshold: 10\n",
                )
            ]
        }
    )
    rng = f"{int(start)}..{int(end)}"
    argv = ["--prometheus", prom.url, "--range", rng, "--specs", str(repo / "specs"), "--incidents", str(inc)]
    code, out, err = _cli(capsys, *argv, "--compare", str(calmer), "--html", str(tmp_path / "html"))
    assert code == 0, err
    assert "VLLMTimeToFirstTokenP95High" in out and "MISSED" in out
    assert "VLLMTimeToFirstTokenP95High" in err  # progress on stderr

    code, out, _ = _cli(capsys, *argv, "--compare", str(calmer), "--format", "json", "-q")
    doc = json.loads(out)
    today, calm = doc["sets"]
    ttft = next(a for a in today["alerts"] if a["alert"] == "VLLMTimeToFirstTokenP95High")
    (episode,) = ttft["episodes"]
    assert episode["labels"]["model_name"] == sc.truth["model_name"]
    assert episode["peak"] == pytest.approx(sc.truth["ttft_p95_after"])
    assert episode["end"] is None and ttft["signal"]["threshold"] == 2
    # fired `for` after the first evaluation above 2 s: no earlier than the incident plus `for`
    assert timespec.when(episode["start"], 0, "") >= t0 + ttft["for_s"]
    caught, missed = today["incidents"]
    assert caught["caught"] and caught["delay_s"] >= ttft["for_s"] and not missed["caught"]
    calm_ttft = next(a for a in calm["alerts"] if a["alert"] == "VLLMTimeToFirstTokenP95High")
    assert calm_ttft["episodes"] == [] and not calm["incidents"][0]["caught"]
    assert (
        "model:vllm_time_to_first_token_seconds:histogram_quantile_rate5m"
        in ttft["records_evaluated_in_place"]
    )

    page = (tmp_path / "html" / "index.html").read_text()
    alerts = {a["key"] for a in today["alerts"]}
    assert page.count("<svg") == len(alerts) and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_a_refused_query_is_a_sentence_with_advice(capsys, repo):
    sc = incident("healthy")
    start = backfill_start(sc.steps, sc.step)
    with LocalPrometheus(sc.openmetrics(start), extra_args=["--query.max-samples=2000"]) as prom:
        code, _, err = _cli(
            capsys,
            "--prometheus",
            prom.url,
            "--range",
            f"{int(start)}..{int(start + 3600)}",
            "-q",
            "--specs",
            str(repo / "specs"),
        )
    assert code == 2
    assert "refused the range query of" in err and "coarser --evaluation-interval" in err, err


def test_a_missing_url_and_a_bad_range_exit_2(capsys):
    code, _, err = _cli(capsys, "--range", "7d", "--prometheus", "")
    assert code == 2 and "--prometheus URL is required" in err
    code, _, err = _cli(capsys, "--range", "seven days", "--prometheus", "http://127.0.0.1:1")
    assert code == 2 and "neither a duration" in err
    code, _, err = _cli(capsys, "--range", "1h", "--prometheus", "http://127.0.0.1:1", "-q")
    assert code == 2 and "cannot reach Prometheus at http://127.0.0.1:1" in err, err
