"""alertmanager/alertmanager.yaml: the real amtool accepts it and routes a table of label sets to the
receivers the specs name; inhibitions match on labels both sides carry, or are listed as not made."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from servewatch import generate, tools
from servewatch.render import alertmanager

PAGE, TICKET, INFO, DEFAULT = "llm-serving-page", "llm-serving-ticket", "llm-serving-info", "default"
TEAM = {"team": "llm-serving"}
SLO = {
    **TEAM,
    "alertname": "VLLMTTFTErrorBudgetBurn",
    "slo": "vllm-ttft",
    "namespace": "llm",
    "model_name": "m",
}

# (labels of a firing alert, the receiver it must reach)
ROUTES = [
    ({**SLO, "tier": "page", "severity": "critical", "long": "1h", "short": "5m"}, PAGE),
    ({**SLO, "tier": "ticket", "severity": "warning", "long": "3d", "short": "6h"}, TICKET),
    # the tier decides for SLO rows, whatever severity an override gave them
    ({**SLO, "tier": "page", "severity": "warning"}, PAGE),
    ({**SLO, "tier": "ticket", "severity": "critical"}, TICKET),
    ({**TEAM, "alertname": "VLLMKVCacheUsageHigh", "severity": "warning", "namespace": "llm"}, TICKET),
    ({**TEAM, "alertname": "GPUFramebufferUsageHigh", "severity": "critical", "UUID": "GPU-1"}, PAGE),
    ({**TEAM, "alertname": "VLLMMetricsAbsent", "severity": "info", "namespace": "llm"}, INFO),
    # another team's alert, or an alert with no team, is not servewatch's
    ({"team": "storage", "alertname": "DiskFull", "severity": "critical"}, DEFAULT),
    ({"alertname": "Watchdog", "severity": "none"}, DEFAULT),
]


@pytest.fixture(scope="module")
def config_file(tmp_path_factory, default_build):
    _, files = default_build
    path = tmp_path_factory.mktemp("am") / "alertmanager.yaml"
    path.write_text(files[alertmanager.PATH])
    return path


def amtool(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(tools.find("amtool")), *map(str, args)], capture_output=True, text=True)


@pytest.mark.tools("amtool")
def test_amtool_accepts_the_configuration(config_file):
    res = amtool("check-config", config_file)
    assert res.returncode == 0, res.stdout + res.stderr
    rules = len(yaml.safe_load(config_file.read_text())["inhibit_rules"])
    assert "SUCCESS" in res.stdout and f"{rules} inhibit rules" in res.stdout and rules >= 3


@pytest.mark.tools("amtool")
@pytest.mark.parametrize("labels,receiver", ROUTES, ids=[f"{r[0].get('alertname')}-{r[1]}" for r in ROUTES])
def test_amtool_routes_each_label_set_to_its_receiver(config_file, labels, receiver):
    pairs = [f"{k}={v}" for k, v in labels.items()]
    res = amtool("config", "routes", "test", f"--config.file={config_file}", *pairs)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == receiver


def test_receivers_and_timings_come_from_the_specs(specs_with):
    edits = {
        "alertmanager.yaml": [
            ("receiver: llm-serving-page, group_wait: 10s", "receiver: pager, group_wait: 5s")
        ]
    }
    _, files = generate.build(specs_with(edits))
    conf = yaml.safe_load(files[alertmanager.PATH])
    names = [r["name"] for r in conf["receivers"]]
    assert names == ["default", "pager", TICKET, INFO]
    servewatch = conf["route"]["routes"][0]
    page = next(r for r in servewatch["routes"] if r["matchers"] == ['tier="page"'])
    assert page["receiver"] == "pager" and page["group_wait"] == "5s" and page["repeat_interval"] == "1h"


def test_group_by_and_inhibitions_take_the_cluster_label(specs_with):
    _, files = generate.build(
        specs_with({"config.yaml": [("cluster_label: null", "cluster_label: cluster")]})
    )
    conf = yaml.safe_load(files[alertmanager.PATH])
    assert conf["route"]["routes"][0]["group_by"] == ["alertname", "cluster", "namespace", "model_name"]
    page_over_ticket = next(i for i in conf["inhibit_rules"] if 'tier="page"' in i["source_matchers"])
    assert page_over_ticket["equal"] == ["alertname", "slo", "cluster", "namespace", "model_name"]


def test_without_a_team_the_route_matches_the_alert_names(specs_with):
    _, files = generate.build(specs_with({"alertmanager.yaml": [("team: llm-serving", "team: null")]}))
    model, _ = generate.build(specs_with({}))
    conf = yaml.safe_load(files[alertmanager.PATH])
    [matcher] = conf["route"]["routes"][0]["matchers"]
    assert matcher.startswith('alertname=~"') and "VLLMTTFTErrorBudgetBurn" in matcher
    assert "team" not in yaml.safe_load(files["rules/slo.rules.yaml"])["groups"][0]["rules"][-1]["labels"]


def test_an_inhibition_is_made_only_on_labels_both_sides_carry(default_model):
    """A label missing on both sides counts as equal in Alertmanager, so every equal label is on every
    series of the target (and on the source series meant to match); what cannot be matched is said."""
    made, skipped = alertmanager.inhibitions(default_model)
    records = alertmanager.promql_labels.record_labels(default_model.records())
    for inh in made:
        for rule in inh.targets:
            assert set(inh.equal) <= alertmanager.carried(rule, records, always=True), (inh.why, rule.alert)
        for rule in inh.sources:
            assert set(inh.equal) <= alertmanager.carried(rule, records, always=False), (inh.why, rule.alert)
        assert set(inh.equal) - {"alertname"}, inh.why
    whys = {i.why for i in made}
    assert "an SLO page silences the ticket of the same SLO and model" in whys
    assert "a vLLM target without metrics silences its latency and SLO alerts" in whys
    # on these labels the exporter's target (job, instance) and a GPU (UUID, host) share nothing
    assert any(s.startswith("an exporter that is down silences the GPU alerts of its host") for s in skipped)
