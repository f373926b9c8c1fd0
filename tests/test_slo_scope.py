"""Issue 24.1: an SLO's `scope` selects the deployments it covers (a list of models, label matchers on
the model identity, or both), so "TTFT under 1 s for DeepSeek-V3 only" can be written beside "under
2.5 s for the rest". Mistakes are `file:line: field: message`, unknown fields list the allowed ones, no
scope changes nothing, and the generated rules, tests, dashboard and runbook follow a scope; promtool
proves the split on the generated tests, and that they fail on rules without the scope."""

from __future__ import annotations

import json
import re

import pytest

from servewatch import generate, yamlio
from servewatch.render import yamlout
from servewatch.errors import SpecErrors
from servewatch.slo.plan import INPUTS_ALERT
from servewatch.slo.scenarios import OUTSIDE, scenario_model
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch_testkit.slo_proof import first_failure, promtool_sliced, write_rule_files

SLOS = "slos.yaml"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
TTFT_WINDOW = "    objective: 0.99\n    window: 28d\n"
# Short rows keep the generated proofs (and promtool's run of them) short.
ROWS = (
    "      windows:\n"
    "        - {tier: page, burn_rate: 14.4, long: 1h, short: 5m}\n"
    "        - {tier: page, burn_rate: 6, long: 3h, short: 15m}\n"
    "        - {tier: ticket, burn_rate: 3, long: 3h, short: 30m}\n"
)
DEEPSEEK_TTFT = f"""\
  deepseek-ttft:
    description: first token within 1 s
    sli: {{kind: latency, histogram: "vllm:time_to_first_token_seconds", threshold: 1.0}}
    objective: 0.99
    scope: {{models: ["{DEEPSEEK}"]}}
    alerting:
      alert: DeepSeekTTFTErrorBudgetBurn
{ROWS}"""
# The default TTFT and availability SLOs on the short rows
SHORT_ROWS = {
    SLOS: [
        ("      min_events: 100              # a row fires", ROWS + "      min_events: 100  # a row fires"),
        ("      min_events: 100\n", ROWS + "      min_events: 100\n"),
    ],
    # the runbooks' SLO steps read windows the short rows record
    "runbooks.yaml": [
        ("measure: burn_rate, window: 6h}", "measure: burn_rate, window: 3h}"),
        ("measure: burn_rate, window: 3d}", "measure: burn_rate, window: 28d}"),
    ],
}
# The two-SLO split of docs/slo.md: DeepSeek-V3 under 1 s, every other model under 2.5 s.
SPLIT = {
    SLOS: [
        (TTFT_WINDOW, TTFT_WINDOW + f"    scope: {{matchers: 'model_name!=\"{DEEPSEEK}\"'}}\n"),
        *SHORT_ROWS[SLOS],
        ("slos:\n", "slos:\n" + DEEPSEEK_TTFT),
    ],
    "runbooks.yaml": SHORT_ROWS["runbooks.yaml"],
}


def _errors(specs) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    return [str(e) for e in info.value.errors]


def _scoped(scope: str, *more: tuple[str, str]):
    return {SLOS: [(TTFT_WINDOW, TTFT_WINDOW + f"    scope: {scope}\n"), *more]}


# -- mistakes ------------------------------------------------------------------------------------------


def test_an_unknown_field_lists_the_allowed_ones(specs_with, line_of):
    specs = specs_with({SLOS: [("      threshold: 2.5", '      matchers: "x"\n      threshold: 2.5')]})
    line = line_of(specs / SLOS, 'matchers: "x"')
    [msg] = _errors(specs)
    assert msg.endswith(
        f"slos.yaml:{line}: slos.vllm-ttft.sli.matchers: unknown field 'matchers' "
        "(allowed: kind, histogram, threshold, side)"
    ), msg


def test_an_unknown_field_elsewhere_says_did_you_mean_and_lists_the_allowed_ones(specs_with, line_of):
    specs = specs_with(_scoped("{model: [x]}"))
    line = line_of(specs / SLOS, "scope:")
    [msg] = _errors(specs)
    assert (
        f"slos.yaml:{line}: slos.vllm-ttft.scope.model: unknown field 'model'; did you mean 'models'? "
        "(allowed: models, matchers)"
    ) in msg


@pytest.mark.parametrize(
    "scope, field, phrase",
    [
        ("{matchers: 'pod=\"a\"'}", "scope.matchers", "'pod' is not an identity label of a model"),
        ("{matchers: 'namespace=\"a'}", "scope.matchers", "label matchers"),
        ("{}", "scope", "a scope needs models, matchers or both"),
        ('{models: ["a", "a"]}', "scope.models", "'a' is listed twice"),
    ],
    ids=["non-identity-label", "bad-syntax", "empty", "twice"],
)
def test_scope_mistakes_name_file_line_and_field(specs_with, line_of, scope, field, phrase):
    specs = specs_with(_scoped(scope))
    line = line_of(specs / SLOS, "scope:")
    [msg] = _errors(specs)
    assert f"slos.yaml:{line}: slos.vllm-ttft.{field}:" in msg and phrase in msg, msg


def test_a_non_identity_label_is_refused_with_the_labels_a_scope_may_match(specs_with):
    [msg] = _errors(specs_with(_scoped('{matchers: \'namespace="a", engine="0"\'}')))
    assert "a scope matches only namespace, model_name" in msg, msg


def test_a_per_model_override_outside_the_scope_is_refused(specs_with, line_of):
    override = (
        f'    per_model:\n      "{DEEPSEEK}": {{objective: 0.98}}\n    alerting:\n      alert: VLLMTTFT'
    )
    specs = specs_with(
        _scoped('{models: ["Qwen/Qwen3-235B-A22B"]}', ("    alerting:\n      alert: VLLMTTFT", override))
    )
    line = line_of(specs / SLOS, "{objective: 0.98}")
    [msg] = _errors(specs)
    assert f"slos.yaml:{line}: slos.vllm-ttft.per_model.{DEEPSEEK}:" in msg, msg
    assert "is not in scope.models" in msg


@pytest.mark.slow
def test_a_scope_of_one_deployment_is_proven_one_engine_per_test(specs_with, tmp_path):
    """ "DeepSeek-V3 in llm-prod" fixes every identity label, so the scenarios' engines cannot be kept
    apart: each runs in a test of its own, as the deployment itself, and promtool proves them all;
    rules that count the model outside the scope fail them."""
    scope = f'scope: {{models: ["{DEEPSEEK}"], matchers: \'namespace="llm-prod"\'}}'
    one = DEEPSEEK_TTFT.replace(f'scope: {{models: ["{DEEPSEEK}"]}}', scope)
    assert one != DEEPSEEK_TTFT, "test setup: the scope was not replaced"
    _, files = generate.build(specs_with({SLOS: [("slos:\n", "slos:\n" + one)]}))
    body, rule_files = write_rule_files(files, tmp_path)
    mine = [t for t in body["tests"] if t["name"].startswith("deepseek-ttft: ")]
    assert len(mine) > 10  # one per scenario and engine, not a handful of batches
    for test in mine:
        inside = {
            (labels["namespace"], labels["model_name"])
            for labels in (_series_labels(x["series"]) for x in test["input_series"])
            if OUTSIDE not in labels["model_name"]
        }
        assert inside <= {("llm-prod", DEEPSEEK)}, test["name"]
    assert any("guard" in t["name"] and "-past)" in t["name"] for t in mine)  # a two-engine claim, split
    path = tmp_path / "slo.test.yaml"
    path.write_text(yamlout.dump({**body, "rule_files": rule_files, "tests": mine}))
    res = promtool_sliced(path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr

    rules = tmp_path / "rules" / "slo.rules.yaml"
    unscoped = rules.read_text().replace(f'model_name="{DEEPSEEK}", ', "")
    assert unscoped != rules.read_text(), "test setup: the scope's model matcher was not found"
    rules.write_text(unscoped)
    outside = [t for t in mine if any(OUTSIDE in x["series"] for x in t["input_series"])]
    path.write_text(yamlout.dump({**body, "rule_files": rule_files, "tests": outside}))
    res = promtool_sliced(path)
    assert res.returncode != 0 and "out-of-scope" in res.stdout + res.stderr, res.stdout[-3000:]


def _series_labels(series: str) -> dict[str, str]:
    return dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', series))


def test_a_mistake_writes_nothing(specs_with, tmp_path, servewatch):
    out = tmp_path / "out"
    res = servewatch("generate", "--specs", specs_with(_scoped("{matchers: 'pod=\"a\"'}")), "--out", out)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "slos.vllm-ttft.scope.matchers" in res.stderr and not out.exists()


# -- no scope: nothing changes --------------------------------------------------------------------------


def test_without_a_scope_the_slo_outputs_are_the_committed_ones(default_build, repo):
    """The drift check covers every file; these are the ones a scope changes."""
    _, files = default_build
    for path in ("rules/slo.rules.yaml", "promtool/slo.test.yaml", "dashboards/slo.json"):
        assert files[path] == (repo / path).read_text(), path


# -- what a scope generates -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def split(specs_with):
    specs = specs_with(SPLIT)
    model, files = generate.build(specs)
    return model, files


def _group(files, slo: str) -> dict[str, str]:
    groups = yamlio.load(files["rules/slo.rules.yaml"])["groups"]
    rules = next(g for g in groups if g["name"] == f"servewatch-slo-{slo}")["rules"]
    return {
        r.get("record") or f"{r['alert']}/{r['labels'].get('le', r['labels'].get('long'))}": r for r in rules
    }


def test_the_event_records_and_inputs_alert_carry_the_scope(split):
    _, files = split
    deepseek, rest = _group(files, "deepseek-ttft"), _group(files, "vllm-ttft")
    for record in ("slo:valid_events:rate5m", "slo:good_events:rate5m"):
        assert f'model_name="{DEEPSEEK}"' in deepseek[record]["expr"]
        assert f'model_name!="{DEEPSEEK}"' in rest[record]["expr"]
        assert deepseek[record]["labels"] == {"slo": "deepseek-ttft"}
    assert f'_count{{model_name="{DEEPSEEK}"}}' in deepseek[f"{INPUTS_ALERT}/1.0"]["expr"]
    assert f'_count{{model_name!="{DEEPSEEK}"}}' in rest[f"{INPUTS_ALERT}/2.5"]["expr"]
    # everything after the event records reads them by their `slo` label only
    for name, rule in deepseek.items():
        if name not in ("slo:valid_events:rate5m", "slo:good_events:rate5m") and INPUTS_ALERT not in name:
            assert DEEPSEEK not in rule["expr"] and 'slo="deepseek-ttft"' in rule["expr"], name


def test_goodput_counts_a_share_of_1_outside_a_scope(split):
    _, files = split
    [goodput] = _group(files, "goodput").values()
    expr = goodput["expr"]
    assert expr.count("or on (namespace, model_name)") == 2, expr  # one per scoped SLO
    assert f'{{model_name="{DEEPSEEK}"}}' in expr and f'{{model_name!="{DEEPSEEK}"}}' in expr
    assert '1 - slo:sli_error:ratio_rate5m{slo="vllm-availability"}\n' in expr  # unscoped: as before


def test_the_dashboard_and_runbook_follow_the_scope(split):
    _, files = split
    board = json.loads(files["dashboards/slo.json"])
    queries = {v["name"]: v.get("query") for v in board["templating"]["list"]}
    assert queries["model"].startswith("label_values(slo:valid_events:rate5m"), queries
    titles = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert any(t.startswith("deepseek-ttft:") and f'for model "{DEEPSEEK}"' in t for t in titles), titles
    page = files["runbooks/DeepSeekTTFTErrorBudgetBurn.md"]
    assert f'over 28d, for model "{DEEPSEEK}"' in page


def test_the_generated_tests_run_in_the_scope_and_one_model_outside(split):
    _, files = split
    body = yamlio.load(files["promtool/slo.test.yaml"])
    series = [
        s["series"]
        for t in body["tests"]
        if t["name"].startswith("deepseek-ttft:")
        for s in t["input_series"]
    ]
    inside = [s for s in series if scenario_model(OUTSIDE) not in s]
    assert inside and all(f'model_name="{DEEPSEEK}"' in s for s in inside)
    # the scenario's own name moves to the namespace, so each scenario stays its own model
    assert 'namespace="llm-slo-test-steady-burn"' in "".join(inside)
    outside = [s for s in series if f'model_name="{scenario_model(OUTSIDE)}"' in s]
    assert outside  # the model list leaves its own name out
    rest = [
        s["series"] for t in body["tests"] if t["name"].startswith("vllm-ttft:") for s in t["input_series"]
    ]
    assert any(f'model_name="{DEEPSEEK}"' in s for s in rest)  # outside `model_name!=`
    assert not any(f'model_name="{DEEPSEEK}"' in s and "out-of-scope" not in s for s in rest)


@pytest.mark.tools("promtool")
def test_promtool_proves_the_split_and_fails_on_rules_without_the_scope(split, tmp_path):
    """One promtool run of the whole generated SLO test file, and its tests run against rules
    generated without the scopes until one fails: there the out-of-scope models are counted and fire."""
    _, files = split
    body, rule_files = write_rule_files(files, tmp_path)
    path = tmp_path / "slo.test.yaml"
    path.write_text(yamlout.dump({**body, "rule_files": rule_files}))
    res = promtool_sliced(path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr

    rules = tmp_path / "rules" / "slo.rules.yaml"
    unscoped = (
        rules.read_text().replace(f', model_name="{DEEPSEEK}"', "").replace(f', model_name!="{DEEPSEEK}"', "")
    )
    unscoped = unscoped.replace(f'{{model_name="{DEEPSEEK}"}}', "").replace(
        f'{{model_name!="{DEEPSEEK}"}}', ""
    )
    assert unscoped != rules.read_text(), "test setup: the scope's matchers were not found"
    rules.write_text(unscoped)
    # only the tests that hold the out-of-scope models: they are what a missing scope breaks
    outside = [t for t in body["tests"] if any(OUTSIDE in s["series"] for s in t["input_series"])]
    path.write_text(yamlout.dump({**body, "rule_files": rule_files, "tests": outside}))
    said = first_failure(path)  # one failure is enough
    assert said and "out-of-scope" in said, said
