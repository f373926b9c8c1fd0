"""Gateway and frontend sources (config.client_side, docs/disaggregated.md "The client's side"): the
catalog's client sources and their renames, the config, the rules, tests and panels they add, and a
real Prometheus 3.5 reading them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servewatch import catalog, generate, verify, writer, yamlio
from servewatch.alert_context import POOL_SEEN
from servewatch.investigate import runner as investigate
from servewatch.investigate.client import Auth
from servewatch.investigate.client import Client as InvestigateClient
from servewatch.runbooks import book
from servewatch.detect import probes
from servewatch.detect.runner import current_config, detect
from servewatch.errors import SpecErrors
from servewatch.lint.engine import LintContext, lint
from servewatch.spec.loader import load
from servewatch.spec.schema import Config
from servewatch.spec.slos import AVAILABILITY_GOOD
from servewatch.slo.exprs import CLIENT_EVENTS
from servewatch.slo.kinds import le_matcher, le_value
from conftest import client_ttft, run_servewatch
from servewatch_testkit.synth.gateway import (
    MODELS,
    ITL_S,
    OLD_TTFT,
    POOLS,
    SLOW_ITL_S,
    TTFT,
    gateway_healthy,
    gateway_incident,
)
from servewatch_testkit.mutate import build as mutate_build
from servewatch_testkit.slo_proof import SLO_TEST, first_failure
from servewatch.plan.dashboards.board import ABSENCE_LISTS
from test_dashboards_integration import all_panels, grafana_regex, interpolate, panel_problems
from test_disaggregated_fleet import Served


def test_each_client_source_names_a_catalogued_histogram_per_quantity():
    cat = catalog.load()
    assert set(cat.clients) == {"llm-d-epp", "dynamo-frontend"}
    for source in cat.clients.values():
        assert {f for f, _ in source.fields} == {"ttft", "itl"}
        for _, name in source.fields:
            entry = cat.lookup(name + "_bucket")
            assert entry is not None and entry.type == "histogram" and entry.source == "gateway"
    assert cat.clients["llm-d-epp"].model_label == "model_name"
    assert cat.clients["dynamo-frontend"].model_label is None, "its labels are not documented"


def test_the_endpoint_pickers_older_prefix_points_at_the_new_name():
    cat = catalog.load()
    problem = cat.problem("llm_d_router_epp_request_ttft_seconds_bucket")
    assert problem is not None and "use 'llm_d_epp_request_ttft_seconds' instead" in problem
    assert cat.problem("llm_d_epp_request_ttft_seconds_count") is None
    assert cat.rename_of("llm_d_router_epp_flow_control_pool_saturation").replacement == (
        "llm_d_epp_flow_control_pool_saturation"
    )


def test_gaies_inference_model_names_are_renames_lint_and_detect_name_the_new_name():
    """GAIE's endpoint picker named its per-model metrics inference_model_* until InferenceModel
    became InferenceObjective: each old name is a catalog rename to its inference_objective_* twin,
    a catalogued gateway metric of the same kind, and lint's metric-known check names that twin."""
    cat = catalog.load()
    old = {name: r for name, r in cat.renamed.items() if name.startswith("inference_model_")}
    assert old, "no inference_model_* rename in the catalog"
    ctx = LintContext(cat, min_range_s=120)
    for name, rename in old.items():
        assert rename.replacement == "inference_objective_" + name.removeprefix("inference_model_")
        new = cat.lookup(rename.replacement)
        assert new is not None and new.source == "gateway", rename.replacement
        [found] = [p for p in lint(name, ctx) if p.check == "metric-known"]
        assert f"{name} was removed (gone in {rename.gone_in})" in found.message
        assert found.fix == f"use {rename.replacement}"
        assert not [p for p in lint(rename.replacement, ctx) if p.check == "metric-known"]
    counter = next(n for n, r in old.items() if cat.lookup(r.replacement).type == "counter")
    scraped = [{"metric": {"__name__": counter}, "value": [0, "2"]}]
    ctx = probes.ProbeContext(_Canned({counter: scraped}), Config(), cat, current_config(Config()))
    warned = [f.message for f in probes.client_side(ctx).findings if f.level == "warning"]
    assert warned and f"{counter} is now {old[counter].replacement}" in warned[0], warned


REPO = Path(__file__).resolve().parents[1]
CLIENT = "  client_side: null\n"
EPP = "  client_side: {source: llm-d-epp}\n"
FRONTEND = "  client_side: {source: dynamo-frontend, model_label: model, selector: 'job=\"frontend\"'}\n"
# The default TTFT SLO at one of the endpoint picker's bounds, in every spec that configures it
EPP_SLOS = list(client_ttft("llm-d-epp"))


def _slo_files(files: dict[str, str]) -> dict[str, str]:
    """The SLO rules and their promtool files of a build."""
    return {k: v for k, v in files.items() if k == "rules/slo.rules.yaml" or k.startswith("promtool/slo.")}


def _one_slo_proof(files: dict[str, str], slo: str) -> dict[str, str]:
    """`_slo_files` with the proof cut to `slo`'s tests, each file whole."""
    wanted = _slo_files(files)
    # libyaml where it is there: the proof is megabytes, which PyYAML's own code takes seconds on
    proof = yamlio.load(wanted["promtool/slo.test.yaml"])
    proof["tests"] = [t for t in proof["tests"] if t["name"].startswith(f"{slo}:")]
    assert proof["tests"], slo
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    wanted["promtool/slo.test.yaml"] = yaml.dump(proof, Dumper=dumper, sort_keys=False)
    return wanted


def _judged(folder: Path, files: dict[str, str], specs: Path, mutated: bool) -> None:
    """`files` written under `folder` and proven: as generated, the whole proof passes as `servewatch
    test --whole` runs it; a mutant fails it, found at its first failing test (one is enough)."""
    writer.write(folder, files)
    if mutated:
        assert first_failure(folder / SLO_TEST), "the mutant passes every test of the proof"
        return
    said: list[str] = []
    assert verify.run(folder, echo=said.append, specs=specs, jobs=2, whole=True), "\n".join(said)


def test_client_side_left_out_builds_the_default_output(default_build, specs_with):
    """Without client_side every generated file is byte for byte what null gives (the committed
    outputs: `generate --check` holds them)."""
    _, files = generate.build(specs_with({"config.yaml": [(CLIENT, "")]}))
    assert files == default_build[1]


@pytest.mark.parametrize(
    "written, field, message",
    [
        ("{source: llm-d-ep}", "config.client_side.source", "did you mean 'llm-d-epp'"),
        ("{source: dynamo-frontend}", "config.client_side", "documents no model label"),
        ("{source: llm-d-epp, selector: 'job=='}", "config.client_side.selector", "double-quoted value"),
        ("{source: llm-d-epp, model_label: 'model-name'}", "config.client_side.model_label", "label name"),
        ("{source: llm-d-epp, route: x}", "config.client_side.route", "unknown field"),
    ],
)
def test_a_bad_client_side_is_an_error_at_its_line(specs_with, line_of, written, field, message):
    specs = specs_with({"config.yaml": [(CLIENT, f"  client_side: {written}\n")]})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "config.yaml", "  client_side: {")
    assert f"config.yaml:{line}: {field}" in str(err.value)
    assert message in str(err.value)


def test_a_client_source_resolves_its_model_label():
    assert Config(client_side={"source": "llm-d-epp"}).client_side.label == "model_name"
    frontend = Config(client_side={"source": "dynamo-frontend", "model_label": "model"}).client_side
    assert (
        frontend.label == "model" and frontend.metric("ttft") == "dynamo_frontend_time_to_first_token_seconds"
    )


# -- the rules, tests and panels a client source adds ------------------------------------------------
@pytest.fixture(scope="module")
def epp_build(specs_with):
    return generate.build(specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": EPP_SLOS}))


def test_the_client_side_group_records_ttft_and_itl_and_alerts_on_ttft(epp_build, default_build):
    model, files = epp_build
    rules = files["rules/vllm.rules.yaml"]
    assert "llm_d_epp_request_ttft_seconds_bucket" in rules
    assert "llm_d_epp_request_streaming_itl_seconds_bucket" in rules
    alerts = {a.alert: a for a in model.alerts()}
    assert {"VLLMClientTimeToFirstTokenP95High", "VLLMClientLatencyMetricsMissing"} <= set(alerts)
    assert "VLLMClientTimeToFirstTokenP95High" not in {a.alert for a in default_build[0].alerts()}
    # each flow of a gateway pod is its own requests: deduplicated apart, then summed per model
    ttft = alerts["VLLMClientTimeToFirstTokenP95High"]
    assert ttft.spec.signal == "client_ttft"
    bucket_rule = next(line for line in rules.splitlines() if "llm_d_epp_request_ttft_seconds_bucket" in line)
    assert (
        "max by (namespace, pod, model_name, target_model_name, fairness_id, priority, streaming, le)"
        in bucket_rule
    )
    assert bucket_rule.lstrip().startswith("expr: sum by (namespace, model_name, le)")


def test_which_side_each_ttft_alert_measures_is_said(epp_build, default_build):
    _, files = epp_build
    engine_page = files["runbooks/VLLMTimeToFirstTokenP95High.md"]
    assert "instance side" in engine_page and "llm-d-epp" in engine_page
    assert "the client's side" in files["runbooks/VLLMClientTimeToFirstTokenP95High.md"]
    assert "instance side" not in default_build[1]["runbooks/VLLMTimeToFirstTokenP95High.md"]
    rules = files["rules/vllm.rules.yaml"]
    assert "queueing and prefill; measured on the engines, the instance side; the client" in rules


def test_the_generated_tests_prove_the_client_side_rules(epp_build):
    """Scenarios (firing and silent), boundaries (both sides of the threshold and of `for`) and the
    recording rules, generated like every group's."""
    _, files = epp_build
    scenarios, bounds = files["promtool/vllm.test.yaml"], files["promtool/vllm.boundaries.test.yaml"]
    records = files["promtool/vllm.records.test.yaml"]
    for name in ("slow first tokens at the gateway", "fast first tokens at the gateway"):
        assert name in scenarios
    assert "a served model the gateway does not report" in scenarios
    for side in ("just past", "just short of"):
        assert f"boundary: VLLMClientTimeToFirstTokenP95High {side} its threshold" in bounds
    for record in (
        "model:client_time_to_first_token_seconds_bucket:rate5m",
        "model:client_time_to_first_token_seconds:histogram_quantile_rate5m",
        "model:client_inter_token_latency_seconds:histogram_quantile_rate5m",
    ):
        assert f"record: {record}" in records


def test_the_client_records_tests_add_up_the_sources_own_series(epp_build):
    """A gateway splits one model's requests by its own labels (flows, priorities: the catalog's
    labels of the metric); each client record's test has a series apart in each of them, which the
    record must add up, not take as a duplicate scrape."""
    model, files = epp_build
    tests = yamlio.load(files["promtool/vllm.records.test.yaml"])["tests"]
    labels = model.builder.labels
    for record in model.records():
        signal = model.spec.signals.get(record.signal) if record.signal else None
        metric = model.builder.metric_name(signal.metric) if signal and signal.metric else ""
        if model.builder.source(metric) != "gateway" or signal.level != "model" or signal.by:
            continue
        own = [k for k in labels.client_keys(metric) if k not in labels.identity("engine")]
        (test,) = [t for t in tests if t["name"].startswith(f"record: {record.record}")][:1]
        written = " ".join(s["series"] for s in test["input_series"])
        assert own and all(f'{k}="{k}-other"' in written for k in own), (record.record, own)


def test_the_endpoint_picker_reports_its_inference_pools_gauges():
    """Each pool quantity is a catalogued gauge labelled by the pool's name; Dynamo's frontend
    documents no pool."""
    cat = catalog.load()
    epp = cat.clients["llm-d-epp"]
    assert {q for q, _ in epp.pool} == {"ready_pods", "kv_cache", "queue"}
    for _, metric in epp.pool:
        assert cat.metrics[metric].type == "gauge" and "name" in cat.metrics[metric].labels
    assert cat.clients["dynamo-frontend"].pool == ()


def test_the_pool_group_needs_a_source_that_reports_pools(epp_build, default_build, specs_with):
    frontend, _ = generate.build(specs_with({"config.yaml": [(CLIENT, FRONTEND)]}))
    pool_alert = "VLLMInferencePoolNoReadyPods"
    assert pool_alert in {a.alert for a in epp_build[0].alerts()}
    for other in (default_build[0], frontend):
        assert pool_alert not in {a.alert for a in other.alerts()}
    assert "VLLMClientTimeToFirstTokenP95High" in {a.alert for a in frontend.alerts()}


def test_the_pool_rules_key_by_pool_not_model(epp_build):
    model, files = epp_build
    alert = next(a for a in model.alerts() if a.alert == "VLLMInferencePoolNoReadyPods")
    record = model.signal(alert.spec.signal).record
    rule = next(r for r in model.records() if r.record == record)
    assert (
        rule.expr
        == f"max by (namespace, name) ({catalog.load().clients['llm-d-epp'].metric('pool_ready_pods')})"
    )
    page = files["runbooks/VLLMInferencePoolNoReadyPods.md"]
    assert "--label namespace=<namespace>\n" in page and "--label model_name" not in page  # no model to scope
    scenarios, bounds = files["promtool/vllm.test.yaml"], files["promtool/vllm.boundaries.test.yaml"]
    for name in (
        "an inference pool without ready pods",
        "every inference pool has ready pods",
        "a gateway pod without inference pool metrics",
        "every gateway pod reports its inference pools",
    ):
        assert name in scenarios
    for side in ("just past", "just short of"):
        assert f"boundary: VLLMInferencePoolNoReadyPods {side} its threshold" in bounds


def test_a_pool_gone_is_remembered_in_the_slow_parts_group_and_proven(epp_build):
    """VLLMInferencePoolMissing reads the pools' memory, recorded like the engines' and GPUs' in a
    group of its own every remember.parts_every, keyed by the pool and its gateway's job (not the
    instance a restart changes); its scenarios, its record test and its runbook page are generated."""
    model, files = epp_build
    config = model.config
    [group] = [g for g in model.groups if any(r.record == POOL_SEEN for r in g.records)]
    assert group.interval == config.remember.parts_every and len(group.records) == 1
    ready = catalog.load().clients["llm-d-epp"].metric("pool_ready_pods")
    assert group.records[0].expr == (
        f"group by (namespace, name, job) (last_over_time({ready}[{config.remember.parts}]))"
    )
    alert = next(a for a in model.alerts() if a.alert == "VLLMInferencePoolMissing")
    assert POOL_SEEN in alert.expr and "instance" not in alert.expr
    scenarios = files["promtool/vllm.test.yaml"]
    for name in (
        "an inference pool the gateway stops reporting",
        "a restarted endpoint picker that never reports its pool again",
        "a gateway removed with its pools",
        "a pool that moves to another gateway pod",
    ):
        assert name in scenarios
    assert f"record: {POOL_SEEN}" in files["promtool/vllm.records.test.yaml"]
    page = files["runbooks/VLLMInferencePoolMissing.md"]
    assert POOL_SEEN in page and config.remember.parts in page


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "edits",
    [
        [(CLIENT, EPP)],
        [(CLIENT, FRONTEND)],
        None,
    ],
    ids=["llm-d-epp", "dynamo-frontend", "llm-d-epp-with-role-and-track"],
)
def test_the_generated_vllm_tests_pass_under_promtool(specs_with, tmp_path, edits):
    """The vLLM family's scenarios, boundaries, records and churn tests on promtool, under a client
    source that names the model in model_name (llm-d's), one that names it otherwise (Dynamo's, its
    series picked by a selector), and beside a role and a track (the client's side has neither): the
    mutation run's configured build, bench/mutation/specs (servewatch_testkit.mutate.build)."""
    if edits:
        specs = specs_with({"config.yaml": edits, "slos.yaml": EPP_SLOS if (CLIENT, EPP) in edits else []})
    else:
        specs = REPO / mutate_build.CONFIGURED
    _, files = generate.build(specs)
    wanted = {
        k: v for k, v in files.items() if k == "rules/vllm.rules.yaml" or k.startswith("promtool/vllm.")
    }
    writer.write(tmp_path, wanted)
    said: list[str] = []
    assert verify.run(tmp_path, echo=said.append, specs=specs, jobs=2), "\n".join(said)


def _both_served(rules):
    """The healthy and the incident gateway fleet, each on its own Prometheus with the rule file `rules`."""
    made = {
        name: Served(build(), [rules])
        for name, build in (("healthy", gateway_healthy), ("incident", gateway_incident))
    }
    yield made
    for s in made.values():
        s.prom.close()


# -- on a real Prometheus 3.5: llm-d's endpoint picker in front of two models ------------------------
@pytest.fixture(scope="module")
def served(epp_build, itl_slo_build, tmp_path_factory):
    """The gateway fleet with the vLLM rules and the SLO rules in one file (the SLO records read the
    client-side group's): epp_build's, with the client-side ITL SLO beside its SLOs (itl_slo_build,
    whose vLLM rules are epp_build's); one pair of servers for every live test of this module."""
    _, files = itl_slo_build
    assert files["rules/vllm.rules.yaml"] == epp_build[1]["rules/vllm.rules.yaml"]
    groups = [g for f in ("vllm", "slo") for g in yaml.safe_load(files[f"rules/{f}.rules.yaml"])["groups"]]
    rules = tmp_path_factory.mktemp("gateway-rules") / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    yield from _both_served(rules)


WATCHED = (
    "VLLMClientTimeToFirstTokenP95High",
    "VLLMClientLatencyMetricsMissing",
    "VLLMTimeToFirstTokenP95High",
    "VLLMInferencePoolNoReadyPods",
    "VLLMInferencePoolMetricsMissing",
    "VLLMInferencePoolMissing",
)


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_a_healthy_gateway_fires_nothing_and_counts_every_flow(epp_build, served):
    model, _ = epp_build
    s = served["healthy"]
    for alert in (a for a in model.alerts() if a.alert in WATCHED):
        assert not s.fired(alert), (alert.alert, s.fired(alert))
    rows = s.prom.query('model:client_time_to_first_token_seconds_bucket:rate5m{le="+Inf"}', s.t)
    per_model = {r["metric"]["model_name"]: float(r["value"][1]) for r in rows}
    want = s.scenario.truth["client_first_tokens_per_s"]  # both pods and both flows, not the max of them
    assert per_model == {m: pytest.approx(want) for m in MODELS}
    p95 = s.prom.query(
        'model:client_time_to_first_token_seconds:histogram_quantile_rate5m{quantile="0.95"}', s.t
    )
    assert len(p95) == 2 and all(0.5 < float(r["value"][1]) <= 1.0 for r in p95)


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_slow_first_tokens_at_the_gateway_fire_the_client_alert_only(epp_build, served):
    """The engines stay fast (0.3 s): the instance-side alert is silent, the client-side one names
    the slow model; the model the gateway stopped reporting fires the absence alert, and only it."""
    model, _ = epp_build
    s = served["incident"]
    alerts = {a.alert: a for a in model.alerts()}
    slow, unrouted = s.scenario.truth["slow_model"], s.scenario.truth["unrouted_model"]
    fired = s.fired(alerts["VLLMClientTimeToFirstTokenP95High"])
    assert [(m["namespace"], m["model_name"]) for m in fired] == [("llm", slow)]
    assert not s.fired(alerts["VLLMTimeToFirstTokenP95High"])
    missing = s.fired(alerts["VLLMClientLatencyMetricsMissing"])
    assert [(m["model_name"], m["metric"]) for m in missing] == [(unrouted, TTFT)]


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_detect_counts_the_inference_pools_and_warns_when_none_is_scraped(served, epp_build):
    model, _ = epp_build
    s = served["healthy"]
    found = detect(s.prom.client, model.config, s.t)
    counts = found.counts["gateway"]
    assert counts["inference_pool_series"] == len(POOLS) * 2  # each pool from both gateway pods
    elsewhere = model.config.model_copy(
        update={
            "client_side": Config(client_side={"source": "llm-d-epp", "selector": 'job="none"'}).client_side
        }
    )
    warned = [f.message for f in detect(s.prom.client, elsewhere, s.t).findings if f.topic == "client_side"]
    assert any("VLLMInferencePoolNoReadyPods reads nothing" in m for m in warned), warned


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_an_empty_pool_and_a_gateway_pod_without_pools_fire_for_them_only(epp_build, served):
    """Both EPP pods report every pool (deduplicated, not summed); the pool whose pods all went
    unready is named by namespace and pool name, and no model name; the EPP pod that routes
    requests but reports no pool is named by VLLMInferencePoolMetricsMissing."""
    model, _ = epp_build
    alert = next(a for a in model.alerts() if a.alert == "VLLMInferencePoolNoReadyPods")
    s = served["incident"]
    assert [(m["namespace"], m["name"]) for m in s.fired(alert)] == [("llm", s.scenario.truth["empty_pool"])]
    assert all("model_name" not in m for m in s.ever(alert))
    missing = next(a for a in model.alerts() if a.alert == "VLLMInferencePoolMetricsMissing")
    named = [(m["pod"], m["metric"]) for m in s.fired(missing)]
    assert named == [
        (s.scenario.truth["poolless_pod"], catalog.load().clients["llm-d-epp"].metric("pool_ready_pods"))
    ]
    healthy = served["healthy"]
    ready = healthy.prom.query(model.signal(alert.spec.signal).record, healthy.t)
    want = healthy.scenario.truth["pools"]["ready_pods"]
    assert {r["metric"]["name"]: float(r["value"][1]) for r in ready} == {p: want for p in POOLS.values()}


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_a_pool_no_gateway_pod_reports_any_more_fires_for_that_pool_only(epp_build, served):
    """The pool epp-0 stopped reporting while both EPP targets stay up is named by namespace and pool
    name, from the pools' memory (backfilled as its slow group records it); the pools still reported,
    the empty one included, and the pool epp-1 never reported are not."""
    model, _ = epp_build
    alert = next(a for a in model.alerts() if a.alert == "VLLMInferencePoolMissing")
    s = served["incident"]
    assert [(m["namespace"], m["name"]) for m in s.fired(alert)] == [("llm", s.scenario.truth["lost_pool"])]
    assert all(set(m) == {"namespace", "name"} for m in s.ever(alert))
    # it went missing at the incident: before it, nothing (the memory holds what was reported)
    before = s.scenario.time_at(s.start, s.scenario.incident_step - 1)
    assert not s.prom.query(alert.expr, before)
    # the serving board's problem list of the condition names it too, and is empty when healthy
    _, files = epp_build
    board = json.loads(files["dashboards/vllm-serving.json"])
    [panel] = [p for p in all_panels(board) if p["title"] == ABSENCE_LISTS["pool_gone"][0]]
    [target] = panel["targets"]
    expr = interpolate(target["expr"], {"datasource": "prometheus", "namespace": "llm", "pod": ".*"})
    assert [r["metric"]["name"] for r in s.prom.query(expr, s.t)] == [s.scenario.truth["lost_pool"]]
    assert served["healthy"].prom.query(expr, served["healthy"].t) == []
    # `servewatch investigate` finds the pool from the alert's own condition and scopes to it
    page = {p.name: p for p in book.pages(model)}["VLLMInferencePoolMissing"]
    found = investigate.run(model, page, InvestigateClient(s.prom.url, Auth()), at=s.t)
    assert found.alert_labels == {"namespace": "llm", "name": s.scenario.truth["lost_pool"]}
    assert found.results[0].verdict == "unhealthy" and found.results[0].error is None


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_detect_finds_the_endpoint_picker_and_its_older_names(served, default_model):
    s = served["incident"]
    found = detect(s.prom.client, default_model.config, s.t)
    assert found.suggested["client_side"] == {"source": "llm-d-epp"}
    renamed = f"{OLD_TTFT} is now {catalog.load().rename_of(OLD_TTFT).replacement}"
    assert _said(found, "differs") and renamed in _said(found, "warning")[0]


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_detect_warns_of_older_names_only_on_the_configured_gateways_series(served, epp_build):
    """epp-0 exports the older names beside the new ones: a selector that keeps only epp-1 (say,
    another team runs epp-0) leaves nothing to warn of, and one that keeps epp-0 still warns."""
    model, _ = epp_build
    s = served["incident"]

    def warned(selector: str) -> bool:
        client = Config(client_side={"source": "llm-d-epp", "selector": selector}).client_side
        config = model.config.model_copy(update={"client_side": client})
        return any(
            "older gateway metric names" in m for m in _said(detect(s.prom.client, config, s.t), "warning")
        )

    assert not warned('pod="epp-1"')
    assert warned('pod="epp-0"')


def _said(found, level: str) -> list[str]:
    return [f.message for f in found.findings if f.topic == "client_side" and f.level == level]


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_detect_warns_of_a_configured_source_not_scraped(served, epp_build):
    model, _ = epp_build
    s = served["healthy"]
    frontend = model.config.model_copy(
        update={
            "client_side": Config(
                client_side={"source": "dynamo-frontend", "model_label": "model"}
            ).client_side
        }
    )
    warned = _said(detect(s.prom.client, frontend, s.t), "warning")
    assert warned and "no dynamo_frontend_time_to_first_token_seconds series is scraped" in warned[0]


class _Canned:
    """An Ask answering a probe's queries from canned rows, by the metric name each selects."""

    def __init__(self, rows: dict[str, list[dict]]):
        self.answers = rows

    def rows(self, expr: str) -> list[dict]:
        return next((rows for name, rows in self.answers.items() if name in expr), [])

    def count(self, expr: str) -> int:
        return len(self.rows(expr))


def test_detect_says_which_slo_threshold_the_source_it_suggests_has_no_bucket_at(default_model, specs_with):
    """Suggesting llm-d's endpoint picker moves the default TTFT SLO to it: detect names the
    threshold generate would then refuse, with the nearest bounds, and nothing once it is one."""
    cat = catalog.load()
    ttft = cat.clients["llm-d-epp"].metric("ttft")
    ask = _Canned({ttft: [{"metric": {"__name__": f"{ttft}_count", "model_name": "m1"}}]})
    slos = default_model.spec.slos
    out = probes.client_side(probes.ProbeContext(ask, Config(), cat, current_config(Config()), slos))
    assert out.suggested == {"client_side": {"source": "llm-d-epp"}}
    threshold = slos["vllm-ttft"].sli.threshold
    bounds = sorted(cat.lookup(ttft).buckets)
    near = [b for b in bounds if b < threshold][-1:] + [b for b in bounds if b > threshold][:1]
    [warned] = [f.message for f in out.findings if f.level == "warning" and "slos." in f.message]
    assert warned.startswith("slos.vllm-ttft: with client_side {source: llm-d-epp}"), warned
    assert f"{threshold:g} s is not a bucket bound of {ttft}" in warned, warned
    assert f"the nearest bounds are {near[0]:g} and {near[1]:g}" in warned and "sli.side: instance" in warned
    fixed = load(specs_with({"slos.yaml": EPP_SLOS})).slos
    out = probes.client_side(probes.ProbeContext(ask, Config(), cat, current_config(Config()), fixed))
    assert not [f for f in out.findings if "slos." in f.message]


def test_detect_suggests_the_label_a_frontend_names_served_models_in():
    """Dynamo documents no model label: the label whose values are the engines' model names is it."""
    frontend = [{"metric": {"__name__": "dynamo_frontend_time_to_first_token_seconds_count", "model": "m1"}}]
    engines = [{"metric": {"model_name": "m1"}, "value": [0, "1"]}]
    ask = _Canned(
        {"dynamo_frontend_time_to_first_token_seconds": frontend, "vllm:num_requests_running": engines}
    )
    ctx = probes.ProbeContext(ask, Config(), catalog.load(), current_config(Config()))
    out = probes.client_side(ctx)
    assert out.suggested == {"client_side": {"source": "dynamo-frontend", "model_label": "model"}}


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_the_client_side_row_shows_every_panel_with_data(epp_build, served):
    _, files = epp_build
    s = served["healthy"]
    dashboard = json.loads(files["dashboards/vllm-serving.json"])
    [row] = [
        p for p in dashboard["panels"] if p["type"] == "row" and p["title"].startswith("The client's side")
    ]
    pools = [p for p in row["panels"] if "inference pool" in p["title"]]
    assert len(row["panels"]) == 2 + len(pools) and len(pools) == 3
    values = {"datasource": "prometheus", "pod": ".*", "engine": ".*", "namespace": "llm"}
    values |= {"model": grafana_regex(MODELS[0])}
    only_row = {"uid": dashboard["uid"], "panels": row["panels"]}
    assert panel_problems(lambda e: s.prom.query(e, s.t), only_row, values, set()) == []


# -- SLOs measured at the client (sli.side: client, docs/slo.md) -------------------------------------
TTFT_SLI = '      histogram: "vllm:time_to_first_token_seconds"\n'
AT_CLIENT = TTFT_SLI + "      side: client\n"


@pytest.mark.parametrize(
    "config, sli, field, message",
    [
        ([], AT_CLIENT, "sli.side", "needs a gateway or frontend source in config.client_side"),
        (
            [(CLIENT, EPP)],
            '      histogram: "vllm:e2e_request_latency_seconds"\n      side: client\n',
            "sli.histogram",
            "measures no client-side twin of 'vllm:e2e_request_latency_seconds'",
        ),
        ([(CLIENT, EPP)], TTFT_SLI + "      side: gateway\n", "sli.side", "'instance' or 'client'"),
    ],
    ids=["no-client-source", "no-twin", "unknown-side"],
)
def test_a_client_side_sli_the_config_cannot_measure_is_an_error_at_its_line(
    specs_with, line_of, config, sli, field, message
):
    specs = specs_with({"config.yaml": config, "slos.yaml": [(TTFT_SLI, sli)]})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "slos.yaml", f"      {field.rsplit('.', 1)[1]}:")
    assert f"slos.yaml:{line}: slos.vllm-ttft.{field}" in str(err.value), str(err.value)
    assert message in str(err.value)


def test_a_client_side_sli_needs_the_gateways_recorded_bucket_rates(specs_with):
    """Its events are read from the client-side group's record (deduplicated per gateway pod, the
    model label read as model_name): switched off, the SLI could not be measured."""
    off = "overrides:\n  groups:\n    vllm-client-side: {enabled: false}\n"
    specs = specs_with(
        {
            "config.yaml": [(CLIENT, EPP)],
            "slos.yaml": [*EPP_SLOS, (TTFT_SLI, AT_CLIENT)],
            "overrides.yaml": off,
        }
    )
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    assert "slos.vllm-ttft.sli.side: a client-side SLI reads the recorded bucket rates" in str(err.value)


@pytest.fixture(scope="module")
def client_slo_build(specs_with):
    edits = {"config.yaml": [(CLIENT, EPP)], "slos.yaml": [*EPP_SLOS, (TTFT_SLI, AT_CLIENT)]}
    return generate.build(specs_with(edits))


def _group(rules: str, slo: str) -> str:
    return rules.split(f"- name: servewatch-slo-{slo}\n")[1].split("\n- name: ")[0]


def test_a_client_side_ttft_slo_reads_the_gateway_and_says_so(client_slo_build):
    model, files = client_slo_build
    group = _group(files["rules/slo.rules.yaml"], "vllm-ttft")
    record = model.signal("client_ttft_buckets").record
    threshold = le_matcher(model.spec.slos["vllm-ttft"].sli.threshold)
    assert f"sum by (namespace, model_name) ({record}{{{threshold}}})" in group
    assert "vllm:time_to_first_token_seconds" not in group
    bucket = catalog.load().clients["llm-d-epp"].metric("ttft") + "_bucket"
    assert f"metric: {bucket}" in group  # SLOInputsMissing names the gateway's bucket
    assert "Measured at the client" in group and "llm-d-epp" in group
    assert "Measured on the engines" not in group
    summary = "over 28d, measured at the client"
    assert summary in files["runbooks/VLLMTTFTErrorBudgetBurn.md"]
    assert summary in files["dashboards/slo.json"]
    assert "# vllm-ttft, measured at the client:" in files["promtool/slo.test.yaml"]
    # the engines' TTFT going missing no longer mutes an SLO that never read it
    routes = files["alertmanager/alertmanager.yaml"].split("- source_matchers:")
    [muted] = [r for r in routes if 'metric="vllm:time_to_first_token_seconds_count"' in r]
    assert "VLLMTimeToFirstTokenP95High" in muted and "VLLMTTFTErrorBudgetBurn" not in muted


def test_a_latency_sli_without_a_side_is_measured_at_the_client_when_a_source_measures_it(
    client_slo_build, epp_build, default_build, specs_with
):
    """Left out, `side` is the client's where config.client_side measures the quantity (the same
    output as `side: client`), else the engines' (the default output); `side: instance` keeps an
    SLO on the engines beside a gateway, and its alerts say so."""
    assert epp_build[1] == client_slo_build[1]
    assert "Measured at the client" not in default_build[1]["rules/slo.rules.yaml"]
    pinned = TTFT_SLI + "      side: instance\n"
    _, files = generate.build(specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": [(TTFT_SLI, pinned)]}))
    group = _group(files["rules/slo.rules.yaml"], "vllm-ttft")
    assert "model:vllm_time_to_first_token_seconds_bucket:rate5m{" in group
    assert "Measured on the engines (the instance side), not at the llm-d-epp" in group
    # availability left out goes to the client too: the endpoint picker counts requests and errors
    assert "Measured at the client" in _group(files["rules/slo.rules.yaml"], "vllm-availability")


def _claims(tests: str, slo: str) -> list[str]:
    """The claims the proof header lists for one SLO (its scenario models and what each shows)."""
    lines = tests.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {slo}"))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("#   "):
            break
        out.append(line.split(":")[0])
    return sorted(out)  # the header lists them by test, and batching follows each side's series


def test_a_client_side_slo_is_proven_on_every_claim_an_engine_side_one_is(client_slo_build, default_build):
    """The same scenarios (steady burn, slow burn, burst, idle, counter reset, the missing bucket,
    the guard, every row's edges and exact edges), on the gateway's series instead of the engines'."""
    client = client_slo_build[1]["promtool/slo.test.yaml"]
    engine = default_build[1]["promtool/slo.test.yaml"]
    assert _claims(client, "vllm-ttft") == _claims(engine, "vllm-ttft")
    bucket = catalog.load().clients["llm-d-epp"].metric("ttft") + "_bucket"
    assert (
        f"series: {bucket}{{" in client and "series: vllm:time_to_first_token_seconds_bucket{" not in client
    )


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "edits",
    [
        [(CLIENT, FRONTEND)],
        [
            (CLIENT, EPP),
            ("  role: null\n", "  role: {label: llm_d_ai_role}\n"),
            ("  track: null\n", "  track: {label: track}\n"),
        ],
    ],
    ids=["dynamo-frontend", "llm-d-epp-with-role-and-track"],
)
def test_the_generated_slo_tests_of_a_client_side_sli_pass_under_promtool(specs_with, tmp_path, edits):
    """The SLO proof at the client under a source that names the model otherwise (Dynamo's, picked
    by a selector) and beside a role and a track, which a gateway's series never carry (the
    engine-side availability SLO keeps them); llm-d's alone runs in the test below, live."""
    slos = [*(EPP_SLOS if (CLIENT, EPP) in edits else []), (TTFT_SLI, AT_CLIENT)]
    specs = specs_with({"config.yaml": edits, "slos.yaml": slos})
    _, files = generate.build(specs)
    writer.write(tmp_path, _slo_files(files))
    said: list[str] = []
    assert verify.run(tmp_path, echo=said.append, specs=specs, jobs=2), "\n".join(said)


# -- on a real Prometheus 3.5: the TTFT SLO at the client, in front of fast engines -------------------
@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_the_ttft_slo_at_the_client_burns_where_only_the_gateway_is_slow(
    client_slo_build, epp_build, served
):
    """Healthy: every first token reaches the client in 0.6 s, no SLO alert fires and the SLI
    counts every flow of both gateway pods. Incident: half of DeepSeek-V3's first tokens take 3 s
    at the gateway while its engines answer in 0.3 s: the client-side TTFT SLO pages for it, by
    model and with no engine label; Kimi-K2, which the gateway stopped reporting, is not judged."""
    model, files = client_slo_build
    # `side: client` spelt out gives epp_build's rules (side left out), which the servers hold
    assert files["rules/slo.rules.yaml"] == epp_build[1]["rules/slo.rules.yaml"]
    burn = [a for a in model.alerts() if a.alert == "VLLMTTFTErrorBudgetBurn"]
    healthy, incident = served["healthy"], served["incident"]
    for alert in model.alerts():
        if alert.family == "slo":
            assert not healthy.fired(alert), (alert.alert, alert.labels)
    valid = healthy.prom.query('slo:valid_events:rate5m{slo="vllm-ttft"}', healthy.t)
    want = healthy.scenario.truth["client_first_tokens_per_s"]
    assert {r["metric"]["model_name"]: float(r["value"][1]) for r in valid} == {
        m: pytest.approx(want) for m in MODELS
    }
    paged = {(m["namespace"], m["model_name"], a.labels["long"]) for a in burn for m in incident.fired(a)}
    slow = incident.scenario.truth["slow_model"]
    assert ("llm", slow, "1h") in paged and {m for _, m, _ in paged} == {slow}
    assert all(set(m) == {"namespace", "model_name"} for a in burn for m in incident.fired(a))
    error = incident.prom.query('slo:sli_error:ratio_rate5m{slo="vllm-ttft"}', incident.t)
    assert [(r["metric"]["model_name"], float(r["value"][1])) for r in error] == [(slow, pytest.approx(0.5))]


def test_detect_names_the_gateways_bucket_a_client_side_slo_misses(client_slo_build):
    """A client-side SLO's threshold the gateway has no bucket at is reported with the gateway's
    histogram, the model label read as model_name (Dynamo's frontend names it `model`)."""
    model, _ = client_slo_build
    frontend = Config(client_side={"source": "dynamo-frontend", "model_label": "model"})
    slo = model.spec.slos["vllm-ttft"]
    hist = frontend.client_side.metric("ttft")
    rows = [{"metric": {"namespace": "llm", "model_name": "m1"}, "value": [0, "1"]}]
    ctx = probes.ProbeContext(_Canned({hist: rows}), frontend, catalog.load(), {}, {"vllm-ttft": slo})
    [message] = [f.message for f in probes.slo_buckets(ctx).findings]
    assert f'{hist}_bucket{{le="{le_value(slo.sli.threshold)}"}}' in message and "llm/m1" in message, message
    asked = []
    ctx.ask = type("Ask", (), {"rows": lambda self, e: asked.append(e) or []})()
    probes.slo_buckets(ctx)
    assert "label_replace(" in asked[0] and '"model_name", "$1", "model"' in asked[0], asked[0]


def test_a_client_side_slo_scoped_by_role_is_an_error_at_its_line(specs_with, line_of):
    """A gateway sees no role or track: a client-side SLO's records carry neither, so a scope on one
    could select nothing there."""
    role = ("  role: null\n", "  role: {label: llm_d_ai_role}\n")
    specs = specs_with(
        {
            "config.yaml": [(CLIENT, EPP), role],
            "slos.yaml": [
                *EPP_SLOS,
                (TTFT_SLI, AT_CLIENT),
                (
                    "    objective: 0.99\n",
                    "    objective: 0.99\n    scope: {matchers: 'llm_d_ai_role=\"decode\"'}\n",
                ),
            ],
        }
    )
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "slos.yaml", "    scope:")
    assert (
        f"slos.yaml:{line}: slos.vllm-ttft.scope.matchers: 'llm_d_ai_role' is not an identity label"
        in str(err.value)
    ), str(err.value)


# -- inter-token latency measured at the client (a latency SLI on the engines' ITL histogram) ---------
def _itl_bounds() -> tuple[set[float], set[float]]:
    """The bucket bounds of the engines' ITL histogram and of llm-d's endpoint picker's twin."""
    cat = catalog.load()
    engines = cat.lookup(cat.engine_twins["itl"]).buckets
    return set(engines), set(cat.lookup(cat.clients["llm-d-epp"].metric("itl")).buckets)


def itl_slo(threshold: float | None = None, side: str | None = None) -> str:
    """An ITL SLO under slos:, its threshold by default the first bound both histograms share that
    lies between the fleet's healthy and slow gaps (ITL_S, SLOW_ITL_S)."""
    if threshold is None:
        engines, gateway = _itl_bounds()
        threshold = min(b for b in engines & gateway if ITL_S < b < SLOW_ITL_S)
    histogram = catalog.load().engine_twins["itl"]
    return (
        "  vllm-itl:\n"
        f"    description: each next token within {threshold:g} s\n"
        "    sli:\n"
        "      kind: latency\n"
        f'      histogram: "{histogram}"\n'
        f"      threshold: {threshold:g}\n"
        + (f"      side: {side}\n" if side else "")
        + "    objective: 0.99\n"
        "    alerting:\n"
        "      alert: VLLMITLErrorBudgetBurn\n"
    )


def _with_itl(source: str = EPP, **kw) -> list[tuple[str, str]]:
    """An ITL SLO before the default SLOs (the TTFT SLO at one of the endpoint picker's bounds where
    `source` is it)."""
    return [*(EPP_SLOS if source == EPP else []), ("slos:\n", "slos:\n" + itl_slo(**kw))]


@pytest.fixture(scope="module")
def itl_slo_build(specs_with):
    """llm-d's endpoint picker beside the default SLOs and an ITL SLO, `side` left out."""
    return generate.build(specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": _with_itl()}))


@pytest.mark.parametrize("quantity", ["ttft", "itl"])
def test_the_endpoint_pickers_bounds_are_catalogued_and_the_frontends_are_not(quantity):
    """llm-d's code fixes its TTFT and ITL histograms' bounds: the catalog lists them and the
    generated tests use them; Dynamo's frontend spaces its own from settings each deployment may
    change, so none are listed and its tests use the catalog's test layout."""
    cat = catalog.load()
    epp, frontend = (cat.clients[s].metric(quantity) for s in ("llm-d-epp", "dynamo-frontend"))
    assert cat.lookup(epp).buckets and cat.test_buckets(epp) == cat.lookup(epp).buckets
    assert cat.lookup(frontend).buckets is None and cat.test_buckets(frontend) == cat.gateway_test_buckets


def test_a_client_side_itl_slo_reads_the_gateway_and_says_so(itl_slo_build, default_build):
    """Left out, `side` is the client's: the SLI counts the gateway's inter-token gaps from the
    client-side group's record of their bucket rates, never the engines' histogram, and every place
    the TTFT SLO at the client says so says it too: the burn alerts (what one event is), the runbook
    page, the SLO board, the proof's header, and no engine-side inhibition mutes it."""
    model, files = itl_slo_build
    slo = model.slos.slos["vllm-itl"]
    assert slo.side == "client"
    group = _group(files["rules/slo.rules.yaml"], "vllm-itl")
    record = model.signal("client_itl_buckets").record
    assert f'sum by (namespace, model_name) ({record}{{le="{slo.sli.threshold:g}"}})' in group
    assert slo.sli.histogram not in group
    bucket = catalog.load().clients["llm-d-epp"].metric("itl") + "_bucket"
    assert f"metric: {bucket}" in group  # SLOInputsMissing names the gateway's bucket
    assert f"Measured at the client: {CLIENT_EVENTS['itl']}, as the llm-d-epp" in group
    assert f"Measured at the client: {CLIENT_EVENTS['ttft']}, as" in _group(
        files["rules/slo.rules.yaml"], "vllm-ttft"
    )
    summary = "over 28d, measured at the client"
    assert summary in files["runbooks/VLLMITLErrorBudgetBurn.md"]
    board = json.loads(files["dashboards/slo.json"])
    assert f"vllm-itl: {slo.summary}" in [p["title"] for p in board["panels"]]  # its row on the SLO board
    # an event of it is a gap between two tokens, not a request (catalog `observes:`)
    assert "% of token gaps: " in slo.summary and "% of requests: " in model.slos.slos["vllm-ttft"].summary
    assert "# vllm-itl, measured at the client:" in files["promtool/slo.test.yaml"]
    routes = files["alertmanager/alertmanager.yaml"].split("- source_matchers:")
    [muted] = [r for r in routes if f'metric="{slo.sli.histogram}_count"' in r]
    assert "VLLMITLErrorBudgetBurn" not in muted
    # nothing of it in the default output, which has no ITL SLO
    assert "VLLMITLErrorBudgetBurn" not in default_build[1]["rules/slo.rules.yaml"]


def test_a_client_side_itl_slo_is_proven_on_every_claim_an_engine_side_one_is(itl_slo_build, specs_with):
    edits = {"config.yaml": [(CLIENT, EPP)], "slos.yaml": _with_itl(side="instance")}
    _, engine = generate.build(specs_with(edits))
    client = itl_slo_build[1]["promtool/slo.test.yaml"]
    assert _claims(client, "vllm-itl") == _claims(engine["promtool/slo.test.yaml"], "vllm-itl")
    bucket = catalog.load().clients["llm-d-epp"].metric("itl") + "_bucket"
    histogram = catalog.load().engine_twins["itl"]
    assert f"series: {bucket}{{" in client
    assert f"series: {histogram}_bucket{{" in engine["promtool/slo.test.yaml"]


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "source, mutation",
    [(EPP, None), (FRONTEND, None), (EPP, "next-bound")],
    ids=["llm-d-epp", "dynamo-frontend", "llm-d-epp-reads-the-next-bound"],
)
def test_the_generated_slo_tests_of_a_client_side_itl_sli_pass_and_catch_a_wrong_bound(
    specs_with, tmp_path, source, mutation
):
    """promtool proves the ITL SLO at the client under llm-d's endpoint picker (its own bounds) and
    Dynamo's frontend (the test layout, its series picked by a selector), and fails the proof where
    the good events are read at the next bound up. Only that SLO's tests run, each file whole."""
    specs = specs_with({"config.yaml": [(CLIENT, source)], "slos.yaml": _with_itl(source)})
    model, files = generate.build(specs)
    wanted = _one_slo_proof(files, "vllm-itl")
    if mutation is not None:
        threshold = model.slos.slos["vllm-itl"].sli.threshold
        bounds = catalog.load().test_buckets(model.config.client_side.metric("itl"))
        later = min(b for b in bounds if b > threshold)
        good = f'{model.signal("client_itl_buckets").record}{{le="{threshold:g}"}}'
        rules = wanted["rules/slo.rules.yaml"]
        assert rules.count(good) == 1
        wanted["rules/slo.rules.yaml"] = rules.replace(good, good.replace(f"{threshold:g}", f"{later:g}"))
    _judged(tmp_path, wanted, specs, mutation is not None)


@pytest.mark.parametrize("field", ["sli", "per_model"])
def test_an_itl_threshold_the_gateway_has_no_bucket_at_is_an_error_at_its_line(specs_with, line_of, field):
    """A bound of the engines' ITL histogram that llm-d's endpoint picker lacks: the SLI would count
    against another bound at the client, so the threshold (or a per-model one) is refused with the
    gateway's nearest bounds and the way back to the engines."""
    engines, gateway = _itl_bounds()
    missing = min(engines - gateway)
    slo = itl_slo(threshold=missing) if field == "sli" else itl_slo()
    if field == "per_model":
        slo += f"    per_model:\n      deepseek-ai/DeepSeek-V3: {{threshold: {missing:g}}}\n"
    specs = specs_with(
        {"config.yaml": [(CLIENT, EPP)], "slos.yaml": [*EPP_SLOS, ("slos:\n", "slos:\n" + slo)]}
    )
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    said = str(err.value)
    if field == "sli":
        line, where = line_of(specs / "slos.yaml", f"      threshold: {missing:g}"), "sli.threshold"
    else:
        line, where = (
            line_of(specs / "slos.yaml", "      deepseek-ai/"),
            "per_model.deepseek-ai/DeepSeek-V3.threshold",
        )
    near = sorted(gateway, key=lambda b: abs(b - missing))[:2]
    assert f"slos.yaml:{line}: slos.vllm-itl.{where}: {missing:g} s is not a bucket bound of" in said, said
    assert all(f"{b:g}" in said for b in near) and "side: instance" in said, said
    # on the engines the same threshold is a bound: side: instance builds
    ok = specs_with(
        {"config.yaml": [(CLIENT, EPP)], "slos.yaml": _with_itl(threshold=missing, side="instance")}
    )
    generate.build(ok)


@pytest.mark.parametrize("field", ["sli", "per_model"])
def test_a_ttft_threshold_the_endpoint_picker_has_no_bucket_at_is_an_error_at_its_line(
    specs_with, line_of, default_model, tmp_path, field
):
    """The default TTFT SLO's threshold is no bound of the endpoint picker's TTFT histogram: the
    default specs with only `client_side: {source: llm-d-epp}` added (or a per-model threshold there)
    are refused at the line, with the nearest bounds and the way back to the engines, and nothing is
    written; in production the SLI would be absent for good (SLOInputsMissing, never a measure)."""
    cat = catalog.load()
    bounds = sorted(cat.lookup(cat.clients["llm-d-epp"].metric("ttft")).buckets)
    threshold = default_model.slos.slos["vllm-ttft"].sli.threshold
    assert threshold not in bounds, "test setup: the default threshold is one of the EPP's bounds"
    slos = []
    if field == "per_model":
        override = f'    per_model:\n      "{MODELS[0]}": {{threshold: {threshold:g}}}\n    alerting:\n'
        slos = [*EPP_SLOS, ("    alerting:\n      alert: VLLMTTFT", override + "      alert: VLLMTTFT")]
    specs = specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": slos})
    out = tmp_path / "out"
    done = run_servewatch("generate", "--specs", specs, "--out", out)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
    if field == "sli":
        line, where = line_of(specs / "slos.yaml", f"      threshold: {threshold:g} "), "sli.threshold"
    else:
        line, where = line_of(specs / "slos.yaml", f'      "{MODELS[0]}"'), f"per_model.{MODELS[0]}.threshold"
    near = [b for b in bounds if b < threshold][-1:] + [b for b in bounds if b > threshold][:1]
    said = done.stderr
    assert f"slos.yaml:{line}: slos.vllm-ttft.{where}: {threshold:g} s is not a bucket bound of" in said, said
    assert f"the nearest bounds are {near[0]:g} and {near[1]:g}" in said and "side: instance" in said, said
    # at one of its bounds (conftest.client_ttft), or on the engines, the same specs build
    generate.build(specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": EPP_SLOS}))
    pinned = [(TTFT_SLI, TTFT_SLI + "      side: instance\n")]
    generate.build(specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": pinned}))


def test_the_client_side_slo_docs_show_is_one_generate_takes(specs_with, repo):
    """docs/slo.md's example of an SLO at the client, its fields written over the default specs
    (its config, and its SLO over the default of that name), builds at the client: its threshold is
    a bound of the source it names."""
    text = (repo / "docs" / "slo.md").read_text()
    section = text.split("### Which side an SLO measures")[1]
    example = yaml.safe_load(section.split("```yaml\n")[1].split("```")[0])
    [(name, slo)] = example["slos"].items()
    config = example["config"]["client_side"]
    written = "{" + ", ".join(f"{k}: {v}" for k, v in config.items()) + "}"
    specs = specs_with({"config.yaml": [(CLIENT, f"  client_side: {written}\n")]})
    slos = yaml.safe_load((specs / "slos.yaml").read_text())["slos"]
    assert name in slos, f"docs/slo.md's example names no default SLO: {name}"
    slos[name] = {**slos[name], **slo, "sli": {**slos[name]["sli"], **slo["sli"]}}
    (specs / "slos.yaml").write_text(yaml.safe_dump({"slos": slos}, sort_keys=False))
    model, _ = generate.build(specs)
    assert model.spec.slos[name].sli.side == "client"


@pytest.fixture
def frontend_without_itl(tmp_path, monkeypatch):
    """A catalog copy whose Dynamo frontend measures no inter-token latency."""
    dst = tmp_path / "catalog"
    dst.mkdir()
    for p in catalog.DIRECTORY.iterdir():
        if p.name.endswith(".yaml"):
            (dst / p.name).write_text(p.read_text())
    doc = yaml.safe_load((dst / "gateway.yaml").read_text())
    del doc["clients"]["dynamo-frontend"]["fields"]["itl"]
    (dst / "gateway.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setattr(catalog, "DIRECTORY", dst)
    catalog.load.cache_clear()
    yield
    catalog.load.cache_clear()  # the next load() reads the packaged catalog once monkeypatch restores it


def test_a_source_without_an_itl_histogram_is_an_error_at_each_line_that_reads_it(
    frontend_without_itl, specs_with, line_of, default_model
):
    """Beside a source that has no twin of the engines' ITL histogram, an ITL SLO with `side:
    client` is refused at `histogram`, and each signal that reads the client's ITL at its `metric`,
    every problem at once, each saying what the source measures."""
    specs = specs_with({"config.yaml": [(CLIENT, FRONTEND)], "slos.yaml": _with_itl(FRONTEND, side="client")})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    said = str(err.value)
    line = line_of(specs / "slos.yaml", f'      histogram: "{catalog.load().engine_twins["itl"]}"')
    assert (
        f"slos.yaml:{line}: slos.vllm-itl.sli.histogram: dynamo-frontend measures no client-side twin" in said
    )
    assert "side: instance" in said, said
    reading = [n for n, s in default_model.spec.signals.items() if s.metric == "client_itl"]
    assert reading, "no signal reads the client's ITL"
    for name in reading:
        at = f"signals.{name}.metric: dynamo-frontend measures no itl (catalog/gateway.yaml"
        assert at in said, said


# -- on a real Prometheus 3.5: the ITL SLO at the client, in front of fast engines --------------------
@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_the_itl_slo_at_the_client_burns_where_only_the_gateway_is_slow(itl_slo_build, served):
    """Healthy: every token gap reaches the client in ITL_S, the ITL SLO is silent and counts every
    gap of both flows of both gateway pods. Incident: one flow's gaps of DeepSeek-V3 take SLOW_ITL_S
    at the gateway while its engine's stay at ITL_S: the SLO pages for that model only, at the share
    of its gaps that are late, by model and with no engine label."""
    model, _ = itl_slo_build
    slo = model.slos.slos["vllm-itl"]
    burn = [a for a in model.alerts() if a.alert == slo.alerting.alert]
    assert burn
    healthy, incident = served["healthy"], served["incident"]
    assert not any(healthy.fired(a) for a in burn)
    valid = healthy.prom.query('slo:valid_events:rate5m{slo="vllm-itl"}', healthy.t)
    want = healthy.scenario.truth["client_token_gaps_per_s"]
    assert {r["metric"]["model_name"]: float(r["value"][1]) for r in valid} == {
        m: pytest.approx(want) for m in MODELS
    }
    slow = incident.scenario.truth["slow_model"]
    paged = {(m["namespace"], m["model_name"], a.labels["long"]) for a in burn for m in incident.fired(a)}
    assert ("llm", slow, "1h") in paged and {m for _, m, _ in paged} == {slow}
    assert all(set(m) == {"namespace", "model_name"} for a in burn for m in incident.fired(a))
    error = incident.prom.query('slo:sli_error:ratio_rate5m{slo="vllm-itl"}', incident.t)
    ratio = incident.scenario.truth["slow_gap_ratio"]
    assert [(r["metric"]["model_name"], float(r["value"][1])) for r in error] == [
        (slow, pytest.approx(ratio))
    ]
    # the engines' own gaps stay under the threshold: an engine-side ITL SLO would not have burned
    engines = incident.prom.query(
        f'sum(rate({slo.sli.histogram}_bucket{{model_name="{slow}", le="{slo.sli.threshold:g}"}}[5m]))'
        f' / sum(rate({slo.sli.histogram}_count{{model_name="{slow}"}}[5m]))',
        incident.t,
    )
    assert [float(r["value"][1]) for r in engines] == [pytest.approx(1.0)]


# -- availability measured at the client (sli.side: client, docs/slo.md) ------------------------------
AVAILABILITY_SLI = "      kind: availability\n"
AVAILABILITY_AT = AVAILABILITY_SLI + "      side: {}\n"


def test_the_endpoint_picker_and_the_frontend_count_requests_and_errors():
    """llm-d counts failures on a counter of their own, its cause in error_code; Dynamo's frontend
    on its one requests counter, a failure told by a label value the catalog lists, its cause in
    error_type, and causes of the client's own doing excluded from the valid events."""
    cat = catalog.load()
    epp, frontend = cat.clients["llm-d-epp"], cat.clients["dynamo-frontend"]
    assert epp.measures_errors and frontend.measures_errors
    for source in (epp, frontend):
        for counter in ("requests", "errors"):
            entry = cat.lookup(source.metric(counter))
            assert entry.type == "counter" and entry.source == "gateway"
        assert source.outcome.cause in cat.lookup(source.metric("errors")).labels
    for counter in ("requests", "errors"):
        old = epp.metric(counter).replace("llm_d_epp_", "llm_d_router_epp_")
        assert cat.rename_of(old).replacement == epp.metric(counter)
    assert epp.outcome.cause == "error_code" and not epp.outcome.failed and not epp.outcome.excluded
    o = frontend.outcome
    assert o.cause == "error_type" and frontend.metric("errors") == frontend.metric("requests")
    told = cat.lookup(frontend.metric("errors"))
    for label, value in (*o.failed, *o.succeeded):
        assert value in told.label_values(label)
    assert {"cancelled", "validation", "not_found"} == set(o.excluded)
    bad = frontend.matchers("errors")
    assert set(frontend.matchers("requests")) < set(bad) and not frontend.matchers("ttft")


@pytest.mark.parametrize(
    "config, side, field, message",
    [
        ([], "client", "sli.side", "needs a source that counts failed requests in config.client_side"),
    ],
    ids=["no-client-source"],
)
def test_a_client_side_availability_sli_the_config_cannot_measure_is_an_error_at_its_line(
    specs_with, line_of, config, side, field, message
):
    specs = specs_with(
        {"config.yaml": config, "slos.yaml": [(AVAILABILITY_SLI, AVAILABILITY_AT.format(side))]}
    )
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "slos.yaml", "      side: client")
    assert f"slos.yaml:{line}: slos.vllm-availability.{field}" in str(err.value), str(err.value)
    assert message in str(err.value)


def test_a_client_side_availability_sli_needs_the_recorded_request_and_error_rates(specs_with):
    off = "overrides:\n  groups:\n    vllm-client-errors: {enabled: false}\n"
    specs = specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": EPP_SLOS, "overrides.yaml": off})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    assert "slos.vllm-availability.sli.side: a client-side availability SLI reads the recorded rates" in str(
        err.value
    )


def test_a_client_side_availability_slo_reads_the_gateways_records_and_says_so(epp_build, default_build):
    """Left out, `side` is the client's where the source counts errors: valid events are the
    gateway's requests, good ones those less its errors (none where it has no error series), each
    read from the client-errors group's record, never from the engines' counter."""
    model, files = epp_build
    requests, errors = model.signal("client_requests_rate").record, model.signal("client_errors_rate").record
    group = _group(files["rules/slo.rules.yaml"], "vllm-availability")
    assert f"sum by (namespace, model_name) ({requests})" in group
    assert (
        f"sum by (namespace, model_name) ({errors})\n" in group and "or on (namespace, model_name)" in group
    )
    assert "vllm:request_success_total" not in group and "finished_reason" not in group
    assert "the requests it failed before any engine saw them" in group
    rules = files["rules/vllm.rules.yaml"]
    epp = catalog.load().clients["llm-d-epp"]
    assert f"(rate({epp.metric('errors')}[5m]))" in rules and "error_code)" in rules
    summary = "over 28d, measured at the client"
    assert summary in files["runbooks/VLLMAvailabilityErrorBudgetBurn.md"]
    assert "# vllm-availability, measured at the client:" in files["promtool/slo.test.yaml"]
    assert f"series: {epp.metric('errors')}{{" in files["promtool/slo.test.yaml"]
    # nothing of it without a source: the default output has neither the group nor the records
    assert requests not in default_build[1]["rules/vllm.rules.yaml"]


def test_availability_stays_on_the_engines_where_asked(specs_with):
    sli = AVAILABILITY_AT.format("instance")
    specs = specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": [*EPP_SLOS, (AVAILABILITY_SLI, sli)]})
    _, files = generate.build(specs)
    group = _group(files["rules/slo.rules.yaml"], "vllm-availability")
    assert 'finished_reason!~"error"' in group and "Measured on the engines" in group
    assert "client_request" not in group
    assert f"(good: {AVAILABILITY_GOOD['instance']})" in group


def test_an_availability_slo_without_a_description_says_what_its_side_counts(epp_build, default_build):
    """The default availability SLO leaves `description` out: its burn alerts say what a good event
    is where its SLI reads, the engines' finish or the gateway's answer."""
    for (model, files), side in ((default_build, "instance"), (epp_build, "client")):
        slo = model.slos.slos["vllm-availability"]
        assert (slo.side, slo.description) == (side, AVAILABILITY_GOOD[side])
        group = _group(files["rules/slo.rules.yaml"], "vllm-availability")
        assert f"(good: {AVAILABILITY_GOOD[side]})" in group, side
        assert AVAILABILITY_GOOD[side] in files["runbooks/VLLMAvailabilityErrorBudgetBurn.md"], side


def test_a_client_side_availability_slo_is_proven_on_every_claim_but_client_aborts(epp_build, default_build):
    """The gateway counts no client abort: every other claim of the engines' proof holds at the client."""
    client = _claims(epp_build[1]["promtool/slo.test.yaml"], "vllm-availability")
    engine = _claims(default_build[1]["promtool/slo.test.yaml"], "vllm-availability")
    assert client == [c for c in engine if "client-aborts" not in c]


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize(
    "mutation",
    [None, ("errors", "requests"), ("errors", "errors_503")],
    ids=["as-generated", "errors-read-as-requests", "one-error-code"],
)
def test_the_generated_slo_tests_of_a_client_side_availability_sli_pass_and_catch_a_wrong_counter(
    epp_build, tmp_path, specs_with, mutation
):
    """promtool proves the client-side availability SLO as generated, and fails the proof where its
    rule reads the wrong counter: the requests as errors, or the errors of one error code only. Only
    that SLO's tests run, each file whole: a mutant fails every slice, and each failed slice would be
    confirmed on the whole file again."""
    model, files = epp_build
    causes = catalog.load().clients["llm-d-epp"].outcome.test_causes
    wanted = _one_slo_proof(files, "vllm-availability")
    if mutation is not None:
        errors = model.signal("client_errors_rate").record
        wrong = {
            "requests": model.signal("client_requests_rate").record,
            "errors_503": errors + f'{{error_code="{causes[0]}"}}',
        }[mutation[1]]
        rules = wanted["rules/slo.rules.yaml"]
        assert rules.count(f"({errors})") == 1
        wanted["rules/slo.rules.yaml"] = rules.replace(f"({errors})", f"({wrong})")
    specs = specs_with({"config.yaml": [(CLIENT, EPP)], "slos.yaml": EPP_SLOS})
    _judged(tmp_path, wanted, specs, mutation is not None)


@pytest.fixture(scope="module")
def frontend_build(specs_with):
    return generate.build(specs_with({"config.yaml": [(CLIENT, FRONTEND)]}))


def test_a_frontend_availability_slo_counts_as_its_outcome_says(frontend_build):
    """Beside Dynamo's frontend the availability SLO is measured at the client (`side` left out):
    its records read the one requests counter, the failures by their status, per error_type, and
    neither counts the client's own doing; the proof writes each of those series."""
    model, files = frontend_build
    frontend = catalog.load().clients["dynamo-frontend"]
    o = frontend.outcome
    assert model.slos.slos["vllm-availability"].side == "client"
    assert "Measured at the client" in _group(files["rules/slo.rules.yaml"], "vllm-availability")
    rules = files["rules/vllm.rules.yaml"]
    for signal, what in (("client_requests_rate", "requests"), ("client_errors_rate", "errors")):
        record = model.signal(signal).record
        expr = rules.split(f"record: {record}\n", 1)[1].splitlines()[0]
        assert f"{frontend.metric(what)}{{" in expr and ", ".join(frontend.matchers(what)) in expr, expr
    errors = model.signal("client_errors_rate")
    assert errors.by == (o.cause,) and f", {o.cause}) (label_replace" in rules
    proof = files["promtool/slo.test.yaml"]
    for label, value in (*o.succeeded, *o.failed):
        assert f'{label}="{value}"' in proof
    for cause in (*o.test_causes, *o.excluded):
        assert f'{o.cause}="{cause}"' in proof
    assert "error_code" not in proof


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize("mutation", [None, "excluded-counted", "wrong-status"])
def test_the_generated_slo_tests_of_a_frontend_availability_sli_pass_and_catch_a_wrong_count(
    frontend_build, tmp_path, specs_with, mutation
):
    """promtool proves the frontend's availability SLO as generated, and fails the proof where the
    error record counts the client's own doing (cancelled, invalid) as failures, or reads the
    successes' status for the failures'. Only that SLO's tests run, each file whole."""
    _, files = frontend_build
    o = catalog.load().clients["dynamo-frontend"].outcome
    wanted = _one_slo_proof(files, "vllm-availability")
    inputs = "promtool/slo.inputs.rules.yaml"
    (failed,), (succeeded,) = o.failed, o.succeeded
    status = f'{failed[0]}="{failed[1]}"'
    if mutation == "excluded-counted":
        excluded = f'{status}, {o.cause}!~"'
        assert wanted[inputs].count(excluded) == 1
        cut = wanted[inputs].split(excluded, 1)[1].split('"', 1)[1]
        wanted[inputs] = wanted[inputs].split(excluded, 1)[0] + status + cut
    elif mutation == "wrong-status":
        assert wanted[inputs].count(status) == 1
        wanted[inputs] = wanted[inputs].replace(status, f'{succeeded[0]}="{succeeded[1]}"')
    _judged(tmp_path, wanted, specs_with({"config.yaml": [(CLIENT, FRONTEND)]}), mutation is not None)


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_live_the_availability_slo_at_the_client_burns_where_only_the_gateway_fails(client_slo_build, served):
    """Healthy: the gateway has no error series at all, and the availability SLO (at the client,
    `side` left out beside llm-d's endpoint picker) counts every flow of both pods with no error.
    Incident: the gateway fails half of DeepSeek-V3's requests (one flow) while its engine finishes
    every request it sees: the SLO pages for DeepSeek-V3 only, at the gateway's error ratio."""
    model, _ = client_slo_build
    slo = model.slos.slos["vllm-availability"]
    assert slo.side == "client"
    burn = [a for a in model.alerts() if a.alert == slo.alerting.alert]
    healthy, incident = served["healthy"], served["incident"]
    valid = healthy.prom.query('slo:valid_events:rate5m{slo="vllm-availability"}', healthy.t)
    want = healthy.scenario.truth["client_first_tokens_per_s"]
    assert {r["metric"]["model_name"]: float(r["value"][1]) for r in valid} == {
        m: pytest.approx(want) for m in MODELS
    }
    error = healthy.prom.query('slo:sli_error:ratio_rate5m{slo="vllm-availability"}', healthy.t)
    assert sorted((r["metric"]["model_name"], float(r["value"][1])) for r in error) == [
        (m, 0.0) for m in MODELS
    ]
    assert not any(healthy.fired(a) for a in burn)
    paged = {(m["namespace"], m["model_name"]) for a in burn for m in incident.fired(a)}
    slow = incident.scenario.truth["slow_model"]
    assert paged == {("llm", slow)}
    error = incident.prom.query('slo:sli_error:ratio_rate5m{slo="vllm-availability"}', incident.t)
    ratio = incident.scenario.truth["gateway_error_ratio"]
    assert [(r["metric"]["model_name"], float(r["value"][1])) for r in error] == [
        (slow, pytest.approx(ratio))
    ]
    # the engines saw no error: an engine-side availability SLO would not have burned
    failed = incident.prom.query('vllm:request_success_total{finished_reason="error"}', incident.t)
    assert failed == []


@pytest.mark.parametrize("source", [EPP, FRONTEND], ids=["llm-d-epp", "dynamo-frontend"])
def test_a_client_side_availability_sli_of_another_counter_is_an_error_at_its_line(
    specs_with, line_of, source
):
    """At the client the source's request and error counters are read: a `metric` of the engines'
    other than their finished requests has no client-side twin."""
    sli = AVAILABILITY_AT.format("client") + '      metric: "vllm:request_prompt_tokens"\n'
    slos = [*(EPP_SLOS if source == EPP else []), (AVAILABILITY_SLI, sli)]
    specs = specs_with({"config.yaml": [(CLIENT, source)], "slos.yaml": slos})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "slos.yaml", "      metric:")
    assert f"slos.yaml:{line}: slos.vllm-availability.sli.metric: at the client" in str(err.value), str(
        err.value
    )
