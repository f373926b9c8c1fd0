"""The `slos:` section: every mistake is one `file:line: field: message`, and the generated SLO rules and
promtool proofs follow any tuning of objectives, thresholds, rows and the guard."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import client_ttft
from test_slo_scope import SHORT_ROWS
from servewatch import generate, yamlio
from servewatch.errors import SpecErrors
from servewatch.slo.plan import INPUTS_ALERT
from servewatch.spec.loader import load
from servewatch.validation import validate

TTFT = "slos.yaml"


def _errors(specs) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    return [str(e) for e in info.value.errors]


def _one(specs, where: str, *phrases: str) -> str:
    [msg] = _errors(specs)
    assert where in msg, msg
    for phrase in phrases:
        assert phrase in msg, msg
    return msg


# -- mistakes ------------------------------------------------------------------------------------------


def test_threshold_that_is_not_a_bucket_bound_names_the_nearest_bounds(specs_with, line_of):
    specs = specs_with({TTFT: [("threshold: 2.5", "threshold: 2")]})
    line = line_of(specs / TTFT, "threshold: 2 ")
    _one(
        specs,
        f"slos.yaml:{line}: slos.vllm-ttft.sli.threshold:",
        "2 s is not a bucket bound of vllm:time_to_first_token_seconds",
        "the nearest bounds are 1 and 2.5",
    )


def test_a_latency_slo_without_a_description_is_an_error_at_its_line(specs_with, line_of):
    # only an availability SLO has a description of its own (what its side counts)
    specs = specs_with({TTFT: [("    description: first token within 2.5 s\n", "")]})
    line = line_of(specs / TTFT, "  vllm-ttft:")
    _one(specs, f"slos.yaml:{line}: slos.vllm-ttft:", "description is required")


def test_an_availability_slo_keeps_the_description_it_is_given(specs_with):
    own = "    description: no 5xx at the gateway\n    sli:\n      kind: availability\n"
    client = [("  client_side: null\n", "  client_side: {source: llm-d-epp}\n")]
    specs = specs_with({"config.yaml": client, TTFT: [("    sli:\n      kind: availability\n", own)]})
    slo = load(specs).slos["vllm-availability"]
    assert (slo.side, slo.description) == ("client", "no 5xx at the gateway")


def test_per_model_threshold_is_checked_against_the_same_bounds(specs_with, line_of):
    override = '    per_model:\n      "deepseek-ai/DeepSeek-V3": {threshold: 3}\n    alerting:\n'
    specs = specs_with({TTFT: [("    alerting:\n      alert: VLLMTTFT", override + "      alert: VLLMTTFT")]})
    line = line_of(specs / TTFT, "{threshold: 3}")
    _one(
        specs,
        f"slos.yaml:{line}: slos.vllm-ttft.per_model.deepseek-ai/DeepSeek-V3.threshold:",
        "the nearest bounds are 2.5 and 5",
    )


def test_unknown_histogram_suggests_the_catalog_name(specs_with):
    specs = specs_with({TTFT: [('"vllm:time_to_first_token_seconds"', '"vllm:time_to_first_token_second"')]})
    _one(specs, "slos.vllm-ttft.sli.histogram", "did you mean 'vllm:time_to_first_token_seconds'")


def test_a_counter_is_not_a_latency_histogram(specs_with):
    specs = specs_with({TTFT: [('"vllm:time_to_first_token_seconds"', '"vllm:prompt_tokens_total"')]})
    _one(specs, "slos.vllm-ttft.sli.histogram", "is a counter, not a histogram")


def test_unknown_finished_reason_suggests_the_real_one(specs_with):
    specs = specs_with({TTFT: [("bad: [error]", "bad: [aborted, error]")]})
    _one(specs, "slos.vllm-availability.sli.bad", "'aborted' is not a value", "did you mean 'abort'")


def test_misspelt_kind_and_key_say_did_you_mean(specs_with):
    msgs = _errors(
        specs_with({TTFT: [("kind: latency", "kind: latncy"), ("objective: 0.995", "objectiv: 0.995")]})
    )
    assert any("did you mean 'latency'" in m for m in msgs), msgs
    assert any("unknown field 'objectiv'; did you mean 'objective'" in m for m in msgs), msgs


def test_a_row_that_cannot_fire_at_the_objective(specs_with, line_of):
    specs = specs_with({TTFT: [("objective: 0.99\n", "objective: 0.9\n")]})
    msg = _one(specs, "slos.vllm-ttft.alerting.windows[0].burn_rate", "can never fire")
    assert "14.4x" in msg


def test_objective_and_name_are_validated(specs_with):
    msgs = _errors(
        specs_with({TTFT: [("objective: 0.99\n", "objective: 99\n"), ("  vllm-ttft:", "  VLLM_TTFT:")]})
    )
    assert any("objective 99 must be a ratio between 0 and 1" in m for m in msgs), msgs
    assert any("SLO name 'VLLM_TTFT' must be lower-case" in m for m in msgs), msgs


def test_alert_name_taken_by_another_alert(specs_with):
    specs = specs_with({TTFT: [("alert: VLLMTTFTErrorBudgetBurn", "alert: VLLMKVCacheUsageHigh")]})
    _one(specs, "slos.vllm-ttft.alerting.alert", "already used by an alert under groups:")


def test_short_window_below_the_rate_window(specs_with):
    rows = "      windows: [{tier: page, burn_rate: 14.4, long: 1h, short: 1m}]\n"
    specs = specs_with(
        {TTFT: [("      min_events: 100              # a row", rows + "      min_events: 100  # a row")]}
    )
    _one(specs, "slos.vllm-ttft.alerting.windows[0].short", "shorter than config rate_window 5m")


def test_a_runbook_step_on_a_window_the_slo_does_not_record(specs_with):
    specs = specs_with(
        {"runbooks.yaml": [("measure: burn_rate, window: 3d}", "measure: burn_rate, window: 4d}")]}
    )
    msgs = _errors(specs)
    assert any("records no error ratio over 4d" in m for m in msgs), msgs


# -- tuning never breaks the proofs ---------------------------------------------------------------------


# A new SLO with rows of its own (and no written runbook: it gets the default page)
E2E_SLO = """\
  vllm-e2e:
    description: whole response within 60 s
    sli: {kind: latency, histogram: "vllm:e2e_request_latency_seconds", threshold: 60}
    objective: 0.98
    alerting:
      alert: VLLME2EErrorBudgetBurn
      min_events: 0
      windows:
        - {tier: page, burn_rate: 10, long: 2h, short: 10m}
        - {tier: ticket, burn_rate: 2, long: 12h, short: 1h}
"""
TUNED = {
    TTFT: [
        ("threshold: 2.5", "threshold: 5.0"),
        ("objective: 0.99\n", "objective: 0.995\n"),
        (
            "    alerting:\n      alert: VLLMTTFT",
            '    per_model:\n      "deepseek-ai/DeepSeek-V3": {objective: 0.98, threshold: 1.0}\n'
            '      "Qwen/Qwen3-235B-A22B": {threshold: 10.0}\n'
            "    alerting:\n      alert: VLLMTTFT",
        ),
        ("      min_events: 100              # a row", "      for: 2m\n      min_events: 500  # a row"),
        (
            "objective: 0.995\n    window: 28d\n    alerting:\n      alert: VLLMAvailability",
            "objective: 0.95\n    window: 30d\n    alerting:\n      alert: VLLMAvailability",
        ),
        ("slos:\n", "slos:\n" + E2E_SLO),
    ]
}


# the proofs under a cluster label: test_generate.py's exporter profiles (cluster-label)
@pytest.mark.tools("promtool")
def test_the_generated_proofs_hold_for_any_tuning(specs_with, tmp_path, servewatch):
    specs = specs_with(TUNED)
    out = tmp_path / "out"
    res = servewatch("generate", "--specs", specs, "--out", out)
    assert res.returncode == 0, res.stderr
    res = servewatch("test", "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr
    tests = yamlio.load((out / "promtool" / "slo.test.yaml").read_text())["tests"]
    assert {t["name"].split(":")[0] for t in tests} == set(load(specs).slos) | {"record"}  # and goodput


def test_per_model_overrides_get_their_own_branches_and_proofs(specs_with):
    _, files = generate.build(specs_with(TUNED))
    rules = yaml.safe_load(files["rules/slo.rules.yaml"])["groups"]
    ttft = next(g for g in rules if g["name"] == "servewatch-slo-vllm-ttft")["rules"]
    good = next(r["expr"] for r in ttft if r["record"] == "slo:good_events:rate5m")
    assert re.search(r'le=~"5\|5\\\\\.0", model_name!~"Qwen/Qwen3-235B-A22B\|deepseek-ai/DeepSeek-V3"', good)
    assert 'le=~"1|1\\\\.0", model_name="deepseek-ai/DeepSeek-V3"' in good
    assert 'le=~"10|10\\\\.0", model_name="Qwen/Qwen3-235B-A22B"' in good
    objective = next(r["expr"] for r in ttft if r["record"] == "slo:objective:ratio")
    assert (
        "+ 0.995" in objective
        and '{slo="vllm-ttft", model_name="deepseek-ai/DeepSeek-V3"} + 0.98' in objective
    )
    proofs = files["promtool/slo.test.yaml"]
    # each overridden model proves its own objective, read from its own bucket among the others' bounds
    assert 'model_name="deepseek-ai/DeepSeek-V3", engine="0", le="1.0"' in proofs
    assert 'model_name="deepseek-ai/DeepSeek-V3", engine="0", le="5.0"' in proofs
    assert "deepseek-ai/DeepSeek-V3 is held to its own objective and threshold" in proofs


def test_every_rule_of_a_row_carries_slo_tier_severity_and_windows(default_model):
    rows = [a for a in default_model.alerts() if a.family == "slo" and a.alert != INPUTS_ALERT]
    assert len(rows) == 8
    for a in rows:
        assert {"slo", "tier", "severity", "long", "short"} <= set(a.labels)
        assert a.labels["severity"] == {"page": "critical", "ticket": "warning"}[a.labels["tier"]]
        assert {"summary", "description", "runbook_url", "dashboard_url"} <= set(a.annotations)
        assert (
            "$value | humanize" in a.annotations["description"] and "| query" in a.annotations["description"]
        )


@pytest.mark.slow
def test_a_kept_proof_follows_every_change_and_gives_the_bytes_a_fresh_one_gives(
    specs_with, tmp_path, monkeypatch
):
    """The SLO proofs are kept per process and on disk, designed (plan/slo_proofs.py) and written
    (render/slo_tests.py, diskcache.py): a spec set that changes the SLO or the config gets its own
    tests, the same specs in another folder share them, a kept proof gives the bytes a fresh one gives,
    and a damaged entry on disk is made again. One simulation serves every config that names the
    series otherwise (selectors, cluster, role and track labels, the vLLM profile), in the process
    and on disk: what the simulation reads is the SLO, not how its inputs are named."""
    from servewatch.plan import slo_proofs
    from servewatch.render import slo_tests

    config = "config.yaml"
    named_otherwise = {
        "cluster": {config: [("cluster_label: null", "cluster_label: cluster")]},
        "selectors": {config: [("    vllm: ''", "    vllm: 'namespace=~\"llm-deepseek|llm-mixtral\"'")]},
        "identity": {config: [("  role: null\n", "  role: {label: llm_d_ai_role}\n")]},
        "track": {config: [("  track: null\n", "  track: {label: track, stable: stable}\n")]},
        "profile": {config: [("vllm_profile: vllm", "vllm_profile: kserve")]},
    }
    variants = {
        "default": {},
        "objective": {TTFT: [("objective: 0.99", "objective: 0.995")]},
        **named_otherwise,
    }
    designs = []
    real_proof = slo_proofs.Designer.proof
    monkeypatch.setattr(slo_proofs.Designer, "proof", lambda d: designs.append(d.name) or real_proof(d))

    def slo_test(edits) -> str:
        # on short rows: what is kept is the subject, not the rows; each fresh design costs less
        edits = {**SHORT_ROWS, **edits, TTFT: [*SHORT_ROWS[TTFT], *edits.get(TTFT, [])]}
        return slo_tests.render(validate(load(specs_with(edits))).model)["promtool/slo.test.yaml"]

    def cached(kind: str) -> list:
        return sorted((cache / kind).iterdir())

    fresh = {}
    for name, edits in variants.items():  # each in an empty cache, as on a new machine
        monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / f"fresh-{name}"))
        slo_proofs._PROOFS.clear()
        fresh[name] = slo_test(edits)
    assert len(set(fresh.values())) == len(variants)
    assert 'cluster="cluster-a"' in fresh["cluster"] and 'cluster="cluster-a"' not in fresh["default"]
    assert 'namespace="llm-deepseek"' in fresh["selectors"] and "kserve_" in fresh["profile"]
    per_build = len(designs) // len(variants)
    assert per_build and len(designs) == per_build * len(variants)

    # one process, one cache: each SLO simulated once, and the one whose objective changed again
    cache = tmp_path / "cache"
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(cache))
    slo_proofs._PROOFS.clear()
    designs.clear()
    for name, edits in variants.items():
        assert slo_test(edits) == fresh[name], f"{name}, from the process"
    assert len(designs) == per_build + 1
    assert len(cached(slo_proofs.DESIGN_CACHE_KIND)) == per_build + 1
    entries, plans = cached(slo_tests.CACHE_KIND), cached(slo_proofs.CACHE_KIND)
    assert len(entries) == len(plans) == len(variants)

    for name, edits in variants.items():
        slo_proofs._PROOFS.clear()
        assert slo_test(edits) == fresh[name], f"{name}, from the disk"
    # each call copied the specs to a folder of its own: the same specs elsewhere share one entry
    assert cached(slo_tests.CACHE_KIND) == entries and cached(slo_proofs.CACHE_KIND) == plans
    for entry in [*entries, *plans]:  # tuned specs: only the designs still hold
        entry.unlink()
    for name, edits in variants.items():
        slo_proofs._PROOFS.clear()
        assert slo_test(edits) == fresh[name], f"{name}, from the kept designs"
    assert len(designs) == per_build + 1, "nothing simulated again"

    entries, plans = cached(slo_tests.CACHE_KIND), cached(slo_proofs.CACHE_KIND)
    for entry in entries:
        entry.write_text("{not json")
    assert slo_test({}) == fresh["default"]
    for entry in [*entries, *plans, *cached(slo_proofs.DESIGN_CACHE_KIND)]:
        entry.write_text("{not json")
    slo_proofs._PROOFS.clear()
    assert slo_test({}) == fresh["default"]
    assert len(designs) == 2 * per_build + 1, "the damaged designs made again"
    # (a deleted cache folder is where fresh["default"] was made: SERVEWATCH_CACHE_HOME did not exist)


@pytest.mark.slow
def test_the_client_sources_counting_keys_the_availability_proof(specs_with, tmp_path, monkeypatch):
    """Availability at the client is proven on the source's own series (catalog/gateway.yaml
    `outcome:`: which counter, the label values that tell a failure, the client's own causes): two
    sources that count otherwise get a design each, in one process and one cache, each test writing
    its source's cause label; the client-side TTFT SLO, counted alike, is designed once."""
    from servewatch import catalog
    from servewatch.plan import slo_proofs
    from servewatch.render import slo_tests

    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "cache"))
    slo_proofs._PROOFS.clear()
    designs = []
    real_proof = slo_proofs.Designer.proof
    monkeypatch.setattr(slo_proofs.Designer, "proof", lambda d: designs.append(d.name) or real_proof(d))
    sources = {
        "llm-d-epp": "{source: llm-d-epp}",
        "dynamo-frontend": "{source: dynamo-frontend, model_label: m}",
    }
    tests = {}
    for source, written in sources.items():
        # one TTFT SLO under both: at a bound of the endpoint picker's, which the catalog lists
        edits = {
            "config.yaml": [("  client_side: null\n", f"  client_side: {written}\n")],
            "slos.yaml": list(client_ttft("llm-d-epp")),
        }
        tests[source] = slo_tests.render(validate(load(specs_with(edits))).model)["promtool/slo.test.yaml"]
    assert designs.count("vllm-availability") == 2 and designs.count("vllm-ttft") == 1, designs
    for source, text in tests.items():
        other = next(s for s in sources if s != source)
        cause, others = (catalog.load().clients[s].outcome.cause for s in (source, other))
        assert f'{cause}="' in text and f'{others}="' not in text, source
