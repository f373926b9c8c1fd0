"""The generated boundary cases of the SLO burn-rate rows (slo/scenarios.py: guard_edge, short_edge,
long_edge, and exact_long, exact_short, exact_guard searched onto the edges by slo/edges.py;
plan/slo_proofs.py: the idle model's records): there for every row, and failed by each way a row's
guard, its windows, its comparisons or an error ratio's zero guard breaks."""

from __future__ import annotations


import re

import pytest

from servewatch import generate, tools, yamlio
from servewatch.render import yamlout
from servewatch_testkit.slo_proof import promtool_sliced, write_rule_files

ALERT = "VLLMTTFTErrorBudgetBurn"
ROW = 1  # its second row (0-based): 6x over 6h and 30m, min_events 100
GUARD = re.compile(r'(avg_over_time\(slo:valid_events:rate5m\{slo="vllm-ttft"\}\[6h\]\) \* 21600) >= 100')
EDGES = ("guard-edge-2-past", "guard-edge-2-short", "short-edge-2", "long-edge-2", "idle")
EXACT = ("exact-long-2", "exact-short-2", "exact-guard-2")


@pytest.fixture(scope="module")
def default_files(specs_with):
    _, files = generate.build(specs_with({}))
    _DEFAULT["files"] = files
    return files


def _ttft_tests(files) -> list[dict]:
    """The TTFT SLO's tests: its scenarios in batches, each batch one promtool test."""
    tests = [t for t in yamlio.load(files["promtool/slo.test.yaml"])["tests"] if "vllm-ttft" in t["name"]]
    assert len(tests) > 1, "the scenarios are proven in batches"
    return tests


def test_every_row_has_its_edges_and_the_idle_records_are_checked(default_files):
    tests = _ttft_tests(default_files)
    models = set(re.findall(r'model_name="slo-test/([^"]+)"', str([t["input_series"] for t in tests])))
    for row in range(1, 5):
        assert {
            f"guard-edge-{row}-past",
            f"guard-edge-{row}-short",
            f"short-edge-{row}",
            f"long-edge-{row}",
            f"exact-long-{row}",
            f"exact-short-{row}",
            f"exact-guard-{row}",
        } <= models
    (records,) = [t["promql_expr_test"] for t in tests if "promql_expr_test" in t]
    checks = {e["expr"].split("{")[0]: e for e in records}
    assert all('model_name="slo-test/idle"' in e["expr"] for e in checks.values())
    # the idle model's events are recorded, as 0; none of its windows has an error ratio (0/0)
    assert [x["value"] for x in checks["slo:valid_events:rate5m"]["exp_samples"]] == [0]
    for window in ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "28d"):
        assert checks[f"slo:sli_error:ratio_rate{window}"]["exp_samples"] == []


def _the_row(doc: dict) -> dict:
    return [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == ALERT][ROW]


def _break_alert(how):
    def edit(doc: dict) -> None:
        rule = _the_row(doc)
        new = how(rule["expr"])
        assert new != rule["expr"]
        rule["expr"] = new

    return edit


def _drop_zero_guard(doc: dict) -> None:
    rule = next(
        r
        for g in doc["groups"]
        for r in g["rules"]
        if r.get("record") == "slo:sli_error:ratio_rate6h" and r["labels"]["slo"] == "vllm-ttft"
    )
    rule["expr"] = rule["expr"].replace("[6h]) > 0)", "[6h]))")


BREAKS = {  # how the row (or an error ratio it reads) breaks -> (the edit, the edge made to catch it)
    "guard moved a quarter up": (_break_alert(lambda e: GUARD.sub(r"\1 >= 125", e)), "guard-edge-2-past"),
    "guard moved a quarter down": (_break_alert(lambda e: GUARD.sub(r"\1 >= 75", e)), "guard-edge-2-short"),
    "guard window doubled": (
        _break_alert(lambda e: e.replace("[6h]) * 21600", "[12h]) * 21600")),
        "guard-edge-2-past",
    ),
    "long window's rate lowered": (
        _break_alert(lambda e: e.replace(") > 6\n", ") > 4.5\n", 1)),
        "long-edge-2",
    ),
    "short window's rate lowered": (
        _break_alert(lambda e: e[::-1].replace("6 >", "5.4 >", 1)[::-1]),
        "short-edge-2",
    ),
    "error ratio's zero guard removed": (_drop_zero_guard, "idle"),
}
assert {edge for _, edge in BREAKS.values()} == set(EDGES), "every edge is there for a break"


def _only_edges(tests: list[dict], models: tuple[str, ...] = EDGES, last: int | None = None) -> list[dict]:
    """The batches that hold some of `models`, each cut down to them and checked up to minute `last`
    (default: their last alert), since promtool's cost is per series and step."""
    return [cut for test in tests if (cut := _cut(test, models, last)) is not None]


def _cut(test: dict, models: tuple[str, ...], last: int | None) -> dict | None:
    keep = lambda text: any(f'slo-test/{m}"' in text or f"slo-test/{m}'" in text for m in models)  # noqa: E731
    series = [s for s in test["input_series"] if keep(s["series"])]
    if not series:
        return None
    checks = []
    for check in test["alert_rule_test"]:
        alerts = [a for a in check["exp_alerts"] if a["exp_labels"]["model_name"].split("/")[-1] in models]
        checks.append({**check, "exp_alerts": alerts})
    if last is None:
        last = max((int(c["eval_time"][:-1]) for c in checks if c["exp_alerts"]), default=0) + 1
        last = max(last, max(int(c["eval_time"][:-1]) for c in checks) if "idle" in models else 0)
    checks = [c for c in checks if int(c["eval_time"][:-1]) <= last]
    present = set(re.findall(r"slo-test/([a-z0-9-]+)", str(series)))
    records = test.get("promql_expr_test", []) if "idle" in present else []  # the idle model's records
    return {**test, "input_series": series, "alert_rule_test": checks, "promql_expr_test": records}


def _claimed(files, models: tuple[str, ...]) -> int:
    """The last minute at which the proof's header claims something of any of `models`."""
    claimed = {}
    for line in files["promtool/slo.test.yaml"].splitlines():
        if m := re.match(r"#\s+(slo-test/.*?): .*checked at ([^)]*)\)$", line):
            for model in re.findall(r"slo-test/([a-z0-9-]+)", m[1]):
                claimed[model] = max(int(at) for at in re.findall(r"(\d+)m", m[2]))
    assert set(models) <= set(claimed), (models, claimed)
    return max(claimed[m] for m in models)


def _only_exact(files, models: tuple[str, ...] = EXACT) -> list[dict]:
    """The TTFT test cut down to the second row's exact-edge models, up to the last minute they claim."""
    return _only_edges(_ttft_tests(files), models, _claimed(files, models))


def _promtool(tmp_path, rules: dict, tests: list[dict], files=None):
    """promtool on `tests` over the SLO rules `rules`, with the other rule files the generated SLO
    test loads (the records the SLO groups read) as generated, in its group order; each test beside
    only the rules it observes, as `servewatch test` runs it."""
    generated, rule_files = write_rule_files(files or _DEFAULT["files"], tmp_path)
    (tmp_path / "rules" / "slo.rules.yaml").write_text(yamlout.dump(rules))
    path = tmp_path / "slo.test.yaml"
    body = {"rule_files": rule_files, "evaluation_interval": generated["evaluation_interval"], "tests": tests}
    if "group_eval_order" in generated:
        body["group_eval_order"] = generated["group_eval_order"]
    path.write_text(yamlout.dump(body))
    return promtool_sliced(path)


_DEFAULT: dict = {}


@pytest.mark.tools("promtool")
def test_the_cut_down_edges_pass_on_the_rules_as_generated(default_files, tmp_path):
    res = _promtool(
        tmp_path,
        yamlio.load(default_files["rules/slo.rules.yaml"]),
        _only_edges(_ttft_tests(default_files)),
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("how, edge", BREAKS.values(), ids=BREAKS.keys())
def test_a_broken_row_fails_its_edges(default_files, tmp_path, how, edge):
    """Each break fails the edge designed for it, cut down to that edge alone: promtool's cost is per
    step, and the other edges' tests run longer."""
    rules = yamlio.load(default_files["rules/slo.rules.yaml"])
    how(rules)
    res = _promtool(
        tmp_path, rules, _only_edges(_ttft_tests(default_files), (edge,), _claimed(default_files, (edge,)))
    )
    assert res.returncode != 0 and f"slo-test/{edge}" in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.tools("promtool")
def test_the_exact_edges_pass_on_the_rules_as_generated(default_files, tmp_path):
    res = _promtool(tmp_path, yamlio.load(default_files["rules/slo.rules.yaml"]), _only_exact(default_files))
    assert res.returncode == 0, res.stdout + res.stderr


EXACT_BREAKS = {  # a comparison of the row that takes its edge the wrong way -> (the edit, its edge)
    "long window fires at exactly the rate": (
        _break_alert(lambda e: e.replace(") > 6\n", ") >= 6\n", 1)),
        "exact-long-2",
    ),
    "short window fires at exactly the rate": (
        _break_alert(lambda e: e[::-1].replace("6 >", "6 =>", 1)[::-1]),
        "exact-short-2",
    ),
    "guard wants more than min_events": (_break_alert(lambda e: GUARD.sub(r"\1 > 100", e)), "exact-guard-2"),
}
assert {edge for _, edge in EXACT_BREAKS.values()} == set(EXACT), "every exact edge is there for a break"


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("how, edge", EXACT_BREAKS.values(), ids=EXACT_BREAKS.keys())
def test_a_row_taking_its_edge_the_wrong_way_fails_the_exact_edges(default_files, tmp_path, how, edge):
    """Each wrong comparison fails the exact edge designed for it, cut down to that edge alone."""
    rules = yamlio.load(default_files["rules/slo.rules.yaml"])
    how(rules)
    res = _promtool(tmp_path, rules, _only_exact(default_files, (edge,)))
    assert res.returncode != 0 and f"slo-test/{edge}" in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.tools("promtool")
def test_a_guard_reading_the_other_slos_events_fails_the_written_test(default_files, repo, tmp_path):
    rules = yamlio.load(default_files["rules/slo.rules.yaml"])
    _break_alert(
        lambda e: e.replace('slo:valid_events:rate5m{slo="vllm-ttft"}[6h]', "slo:valid_events:rate5m[6h]")
    )(rules)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "slo.rules.yaml").write_text(yamlout.dump(rules))
    (tmp_path / "rules" / "vllm.rules.yaml").write_text(default_files["rules/vllm.rules.yaml"])
    test = yamlio.load((repo / "tests/promtool/slo-records.test.yaml").read_text())
    test["rule_files"] = ["rules/vllm.rules.yaml", "rules/slo.rules.yaml"]  # the records it reads
    path = tmp_path / "records.test.yaml"
    path.write_text(yamlout.dump(test))
    res = tools.run("promtool", "test", "rules", path)
    assert res.returncode != 0 and "each SLO's guard counts its own events" in res.stdout + res.stderr, (
        res.stdout
    )
