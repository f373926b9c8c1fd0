"""Issues 22.1, 22.2 and 20.1 for the SLOs: a dropped latency bucket leaves the SLI absent and is
named by SLOInputsMissing; client aborts are not errors by default; the short recordings read the
rule set's own records, so each raw series is read once per evaluation. The alert-level claims are
promtool scenarios generated from the SLO specs (promtool/slo.test.yaml); these tests check that
they are there, and run the two of them that matter here on promtool."""

from __future__ import annotations

import pytest
import yaml

from servewatch import generate, tools, yamlio
from servewatch.model import Model
from servewatch.slo.kinds import le_value
from servewatch.slo.plan import INPUTS_ALERT
from servewatch.spec.loader import load
from servewatch_testkit.slo_proof import write_rule_files


@pytest.fixture(scope="module")
def built(specs_with):
    specs = specs_with({})
    return Model(load(specs)), generate.build(specs)[1]


def _records(model, slo: str) -> dict[str, str]:
    return {r.record: r.expr for r in model.records() if r.labels.get("slo") == slo}


def test_the_short_recordings_read_the_recorded_rates_not_the_raw_counters(built):
    model, _ = built
    recorded = {s.record for g in model.spec.groups for n in g.records for s in [model.spec.signals[n]]}
    for name in model.slos.slos:
        for record in ("slo:valid_events:rate5m", "slo:good_events:rate5m"):
            expr = _records(model, name)[record]
            assert "rate(" not in expr and "[5m]" not in expr, (name, record, expr)
            assert any(r in expr for r in recorded), (name, record, expr)
    goodput = next(r.expr for r in model.records() if r.record == "model:vllm_goodput_tokens:rate5m")
    assert "vllm:generation_tokens_total" not in goodput


def test_a_latency_sli_has_no_zero_fallback_for_its_good_events(built):
    model, _ = built
    for name, slo in model.slos.slos.items():
        good = _records(model, name)["slo:good_events:rate5m"]
        assert ("0 * slo:valid_events" in good) == (slo.sli.kind == "availability"), (name, good)


def test_client_aborts_are_not_bad_by_default(built):
    model, _ = built
    [availability] = [s for s in model.slos.slos.values() if s.sli.kind == "availability"]
    assert "abort" not in availability.sli.bad and "error" in availability.sli.bad
    aborts = model.alert("VLLMRequestAbortRatioHigh")
    assert aborts is None  # off by default: a team turns it on


def _slo_test(files, *keys: str) -> tuple[dict, list[dict]]:
    """The generated SLO test file, and only its batches holding the scenarios `keys`, cut down to
    those scenarios' series and checks (promtool's cost is per series and step)."""
    body = yamlio.load(files["promtool/slo.test.yaml"])
    models = [f"slo-test/{k}" for k in keys]
    out = []
    for t in body["tests"]:
        series = [s for s in t["input_series"] if any(f'model_name="{m}"' in s["series"] for m in models)]
        if not series:
            continue
        checks = []
        for c in t["alert_rule_test"]:
            mine = [a for a in c["exp_alerts"] if a["exp_labels"].get("model_name") in models]
            checks.append({**c, "exp_alerts": mine})
        out.append({**t, "input_series": series, "alert_rule_test": checks})
    return body, out


def test_the_generated_slo_tests_prove_a_dropped_bucket_and_client_aborts(built):
    model, files = built
    _, tests = _slo_test(files, "bucket-missing")
    ttft = model.slos.slos["vllm-ttft"]
    le = le_value(ttft.sli.threshold)
    [test] = tests
    assert not any(f'le="{le}"' in s["series"] for s in test["input_series"])  # the bucket is dropped
    firing = [a for c in test["alert_rule_test"] if c["alertname"] == INPUTS_ALERT for a in c["exp_alerts"]]
    assert firing and all(
        a["exp_labels"]["le"] == le and a["exp_labels"]["metric"] == f"{ttft.sli.histogram}_bucket"
        for a in firing
    )
    burns = [c for c in test["alert_rule_test"] if c["alertname"] == ttft.alerting.alert]
    assert burns and not any(c["exp_alerts"] for c in burns)  # absent, not 100% bad
    _, aborts = _slo_test(files, "client-aborts")
    assert aborts and all(not c["exp_alerts"] for t in aborts for c in t["alert_rule_test"])


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("key", ["bucket-missing", "client-aborts"])
def test_those_scenarios_pass_on_promtool_and_fail_on_the_old_rules(built, tmp_path, key):
    """Passes on the rules as generated; fails where the latency SLI falls back to 0 good events
    (22.1) or the availability SLI counts aborts as bad (22.2), as before."""
    _, files = built
    body, tests = _slo_test(files, key)
    _, rule_files = write_rule_files(files, tmp_path)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**body, "rule_files": rule_files, "tests": tests}, width=1000))
    res = tools.run("promtool", "test", "rules", path)
    assert res.returncode == 0, res.stdout + res.stderr
    slo_rules = tmp_path / "rules" / "slo.rules.yaml"
    text = slo_rules.read_text()
    if key == "bucket-missing":
        good = (
            'sum by (namespace, model_name) (model:vllm_time_to_first_token_seconds_bucket:rate5m{le="2.5"})'
        )
        old = f'({good} or on (namespace, model_name) 0 * slo:valid_events:rate5m{{slo="vllm-ttft"}})'
        text = text.replace(f"expr: {good}", f"expr: '{old}'")
    else:
        text = text.replace('finished_reason!~"error"', 'finished_reason!~"abort|error"')
    assert text != slo_rules.read_text(), "test setup: the old rule text was not found"
    slo_rules.write_text(text)
    res = tools.run("promtool", "test", "rules", path)
    assert res.returncode != 0, res.stdout
