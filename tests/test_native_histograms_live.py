"""Native histograms on real servers: two Prometheus 3.5 scrape the same synthetic fleets live.

servewatch_testkit.scrape_server serves three clusters (a healthy fleet, an engine whose KV cache
fills and decodes slowly, queueing that delays the first token), one 30 s scenario step a second.
One Prometheus stores vLLM's histograms classic and evaluates the rules generated with
`histograms: classic`; the other scrapes with `convert_classic_histograms_to_nhcb: true`, so it holds
one native histogram with custom buckets per series and no `_bucket`, `_count` or `_sum`, and
evaluates the rules generated with `histograms: native`. The same alerts must fire on both, with
the same values; every rule, dashboard and runbook query of the native output must parse and answer
on the native Prometheus what the classic output answers on the classic one; `detect` tells the two
apart; `lint --prometheus` flags the classic rules against the native one.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from types import SimpleNamespace

import promql_parser as pp
import pytest
import yaml

from servewatch import catalog, generate
from servewatch.cli import main
from servewatch.detect.runner import detect
from servewatch.promapi import Client
from servewatch.promql import tree
from servewatch.promql.histograms import SUFFIXES
from servewatch.runbooks.book import pages
from servewatch_testkit.fastforward import compressed_specs
from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.scrape_server import ScrapeServer
from servewatch_testkit.synth import incident
from servewatch_testkit.synth.incidents import INCIDENT_STEP, MODEL
from test_dashboards import queries
from test_dashboards_integration import ALL, _rule_files, interpolate

pytestmark = [pytest.mark.integration, pytest.mark.tools("prometheus", "promtool")]

REPO = Path(__file__).resolve().parents[1]
FACTOR = 30
CLUSTERS = {"calm": "healthy", "east": "kv_saturation", "north": "ttft_queueing"}
LEAD_STEPS = 4  # healthy steps served before the incident starts (no assertion reads them)
WAIT_S = 150
# Two Prometheus scrape and evaluate at their own phases: rates differ a little, quantiles with them.
# The offset is steady, so a fast-moving rate differs the same way at every instant: 5.5% was seen on
# a TTFT bucket rate of the queueing incident. The exact native arithmetic is proven by promtool on
# the same inputs (test_native_histograms.py); this test proves the queries answer alike live.
REL = 1e-1
# alerts the incidents must fire (alertname, cluster): the histogram quantile alerts among them
MUST_FIRE = {("VLLMKVCacheUsageHigh", "east"), ("VLLMInterTokenLatencyP95High", "east")}
NATIVE_FLAG = "--enable-feature=native-histograms"
VALUES = {**ALL, "cluster": ".*", "model:raw": MODEL}
HISTOGRAMS = sorted(n for n, m in catalog.load().metrics.items() if m.type == "histogram")


def _build(tmp: Path, form: str):
    specs = compressed_specs(REPO / "specs", tmp / "specs", FACTOR, cluster_label="cluster")
    config = specs / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["config"]["histograms"] = form
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    model, files = generate.build(specs, tmp)
    return SimpleNamespace(specs=specs, model=model, files=files, rule_files=_rule_files(files, tmp))


def _scrape_configs(srv: ScrapeServer, nhcb: bool) -> list[dict]:
    out = []
    for cluster in CLUSTERS:
        cfg = srv.scrape_config(cluster, "1s")
        for target in cfg["static_configs"]:
            target["labels"] = {**target["labels"], "cluster": cluster}
        if nhcb:
            cfg["convert_classic_histograms_to_nhcb"] = True
        out.append(cfg)
    return out


def firing(url: str) -> dict[tuple, dict]:
    return {k: a for k, a in alerts(url).items() if a["state"] == "firing"}


def alerts(url: str) -> dict[tuple, dict]:
    """Every alert the server holds, pending or firing, by its labels."""
    with Client(url) as client:
        return {_key(a["labels"]): a for a in client.get("/api/v1/alerts")["alerts"]}


def _key(labels: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "severity"))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    classic = _build(tmp_path_factory.mktemp("classic"), "classic")
    native = _build(tmp_path_factory.mktemp("native"), "native")
    fleets = {cluster: incident(name) for cluster, name in CLUSTERS.items()}
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(ScrapeServer(fleets, first_step=INCIDENT_STEP - LEAD_STEPS))
        proms = {}
        for name, built, nhcb in (("classic", classic, False), ("native", native, True)):
            proms[name] = stack.enter_context(
                LocalPrometheus(
                    None,
                    rule_files=built.rule_files,
                    backfill_rules=False,
                    rule_eval_interval="1s",
                    scrape_configs=_scrape_configs(srv, nhcb),
                    # Prometheus 3.5 stores native histograms only with the feature flag (3.9 made it
                    # the scrape_native_histograms setting); without it NHCB conversion drops them
                    extra_args=[NATIVE_FLAG] if nhcb else [],
                )
            )
        srv.restart()
        deadline = time.monotonic() + WAIT_S
        while True:
            got = {
                n: {
                    (dict(k)["alertname"], dict(k).get("cluster"), a["state"])
                    for k, a in alerts(p.url).items()
                }
                for n, p in proms.items()
            }
            fired = all({(*m, "firing") for m in MUST_FIRE} <= g for g in got.values())
            # and no alert pending on either: one with a longer `for` fires on one server a little
            # before the other, the tests compare them once all have settled
            if fired and not any(state == "pending" for g in got.values() for *_, state in g):
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"after {WAIT_S} s at step {srv.step()}: {got}; expected {sorted(MUST_FIRE)} firing "
                    "and nothing pending"
                )
            time.sleep(0.5)
        yield SimpleNamespace(classic=classic, native=native, proms=proms, srv=srv)


def test_the_native_prometheus_holds_native_histograms_only(pair):
    native, classic = pair.proms["native"], pair.proms["classic"]
    pattern = "|".join(re.escape(n) for n in HISTOGRAMS).replace("\\", "\\\\")
    buckets = f'count({{__name__=~"({pattern})_bucket"}})'
    assert native.query(buckets) == [] and classic.query(buckets)
    assert classic.query(f'count({{__name__=~"{pattern}"}})') == []
    assert native.query_value(f'count({{__name__=~"{pattern}"}})') > 0
    nhcb = native.query('vllm:inter_token_latency_seconds{cluster="east"}')
    assert nhcb and all("histogram" in r for r in nhcb)  # native samples, not floats


def test_the_same_alerts_fire_with_the_same_values(pair):
    """Native rules on native histograms fire exactly what classic rules on classic ones fire."""
    a, b = firing(pair.proms["classic"].url), firing(pair.proms["native"].url)
    assert set(a) == set(b)
    for key in a:
        assert float(b[key]["value"]) == pytest.approx(float(a[key]["value"]), rel=REL), key


def _rule_queries(built) -> list[tuple[str, str]]:
    out = []
    for path, text in sorted(built.files.items()):
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", path):
            for group in yaml.safe_load(text)["groups"]:
                for rule in group["rules"]:
                    name = rule.get("record") or rule.get("alert")
                    out.append((f"{path} #{len(out)} {name}", rule["expr"]))
    return out


def _dashboard_queries(built) -> list[tuple[str, str]]:
    out = []
    for path, text in sorted(built.files.items()):
        if re.fullmatch(r"dashboards/[^/]+\.json", path):
            out += [(w, interpolate(e, VALUES)) for w, e in queries(json.loads(text))]
    return out


def _runbook_queries(built) -> list[tuple[str, str]]:
    return [(f"runbook {p.name} step {s.number}", s.expr) for p in pages(built.model) for s in p.steps]


KINDS = {"rules": _rule_queries, "dashboards": _dashboard_queries, "runbooks": _runbook_queries}


def _reads_histogram(expr: str) -> bool:
    return any(s.name in HISTOGRAMS for s in tree.selectors(pp.parse(expr)))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_native_query_parses_and_answers_what_classic_answers(pair, kind):
    """Each query of the native output, on the native Prometheus, gives the series the same query of
    the classic output gives on the classic Prometheus (same labels, values within REL); every one
    that reads a histogram returns data."""
    native, classic = KINDS[kind](pair.native), dict(KINDS[kind](pair.classic))
    assert [w for w, _ in native] == list(classic)
    problems, histogram_reads = [], 0
    for where, expr in native:
        pp.parse(expr)
        # the two servers scrape and evaluate at their own phases, so at one instant a fast-moving
        # value (or a record's series) can differ between them for no native matter: a query is
        # wrong when it differs at every one of a few instants
        for _ in range(ATTEMPTS):
            reads, found = _compare(pair, where, expr, classic[where])
            if not found:
                break
            time.sleep(2)
        histogram_reads += reads
        problems += found
    assert histogram_reads > 0
    assert not problems, "\n".join(problems[:20])


ATTEMPTS = 3


def _compare(pair, where: str, expr: str, classic: str) -> tuple[int, list[str]]:
    """Whether `expr` reads a histogram with data (1 or 0), and how its answer on the native server
    differs from the classic query's on the classic one."""
    problems, reads = [], 0
    got = _values(pair.proms["native"].query(expr))
    want = _values(pair.proms["classic"].query(classic))
    if _reads_histogram(expr) and want:  # (a step that looks 30 m back has nothing yet on either)
        reads = 1
        if not got:
            problems.append(f"{where}: reads a native histogram and returns nothing")
    if any("le" in dict(k) for k in got):  # a native histogram lists its populated buckets only
        want = {k: v for k, v in want.items() if k in got}
    else:  # a list of names: a native histogram's is one where classic has three
        want = {k: v for k, v in want.items() if k in got or not dict(k).get("__name__")}
        got = {k: v for k, v in got.items() if k in want or not dict(k).get("__name__")}
    if set(got) != set(want):
        problems.append(f"{where}: series {sorted(set(got) ^ set(want))[:3]} on one side only")
    if expr == classic:  # reads no histogram: two scrapers' phases are no native matter
        return reads, problems
    for labels in set(got) & set(want):
        if got[labels] != pytest.approx(want[labels], rel=REL, abs=1e-9):
            problems.append(f"{where}: {dict(labels)} native {got[labels]}, classic {want[labels]}")
    return reads, problems


def _values(result: list[dict]) -> dict[tuple, float]:
    """Results by labels, as classic series: a native histogram (a record of bucket rates) as its
    cumulative count per upper bound with `le`; a histogram's `_bucket`, `_count` and `_sum` names
    (a step that lists names) as the histogram's own name."""
    out = {}
    for r in result:
        metric = dict(r["metric"])
        name = metric.get("__name__", "")
        for suffix in SUFFIXES:
            if name.removesuffix(suffix) in HISTOGRAMS:
                metric["__name__"] = name.removesuffix(suffix)
        if "histogram" not in r:
            out[_labels(metric)] = float(r["value"][1])
            continue
        below = 0.0
        for _, _, upper, count in r["histogram"][1].get("buckets", []):
            below += float(count)
            out[_labels({**metric, "le": upper})] = below
    return out


def _labels(metric: dict) -> tuple:
    if "le" in metric:  # 5.0 as exposed, 5 as a native bucket's bound
        metric = {**metric, "le": repr(float(metric["le"]))}
    return tuple(sorted(metric.items()))


def test_detect_tells_which_form_each_prometheus_holds(pair):
    for name, want in (("classic", "classic"), ("native", "native")):
        with Client(pair.proms[name].url) as client:
            det = detect(client, pair.classic.model.config)
        assert det.suggested["histograms"] == want
    with Client(pair.proms["native"].url) as client:
        det = detect(client, pair.classic.model.config)
    assert any(f.topic == "histograms" and f.level == "differs" for f in det.findings)


def test_lint_flags_the_classic_rules_against_the_native_prometheus(pair, capsys):
    classic_rules = [str(p) for p in pair.classic.rule_files]
    native_rules = [str(p) for p in pair.native.rule_files]
    url = pair.proms["native"].url
    assert (
        main(["lint", "--specs", "", "--prometheus", url, "--enable", "classic-on-native", *classic_rules])
        == 1
    )
    assert "classic-on-native" in capsys.readouterr().out
    assert (
        main(["lint", "--specs", "", "--prometheus", url, "--enable", "classic-on-native", *native_rules])
        == 0
    )
    url = pair.proms["classic"].url
    assert (
        main(["lint", "--specs", "", "--prometheus", url, "--enable", "classic-on-native", *classic_rules])
        == 0
    )
