"""Each promtool test against the rules it observes (rule_slices.py, verify.py): the closure follows
records and template queries, a test that cannot be followed runs whole, a broken rule fails the same
tests either way, a tuned alert runs only the tests that observe it again, and a slice that fails
where the whole file passes is reported, never passed."""

from __future__ import annotations

import pytest
import yaml

from servewatch import rule_slices, verify

# an alert's description that runs a query of a record no expression of the alert reads
QUERIED = '{{ with query "job:other:sum" }}{{ . | first | value }}{{ end }} other'
RULES = {
    "groups": [
        {
            "name": "first",
            "rules": [
                {"record": "job:raw:sum", "expr": "sum by (job) (raw)"},
                {"record": "job:other:sum", "expr": "sum by (job) (other)"},
            ],
        },
        {
            "name": "second",
            "rules": [
                {"record": "job:raw:double", "expr": "2 * job:raw:sum"},
                {
                    "alert": "RawHigh",
                    "expr": "job:raw:double > 10",
                    "annotations": {"description": QUERIED},
                },
                {"alert": "OtherHigh", "expr": "job:other:sum > 10"},
            ],
        },
    ]
}


def _alert_test(name: str, alert: str, series: str, fires: bool, description: str = "") -> dict:
    expected = {"exp_labels": {"job": "x"}}
    if description:
        expected["exp_annotations"] = {"description": description}
    return {
        "name": name,
        "interval": "1m",
        "input_series": [
            {"series": series, "values": "20x5"},
            {"series": 'other{job="x"}', "values": "3x5"},
        ],
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": alert, "exp_alerts": [expected] if fires else []}
        ],
    }


TESTS = [
    _alert_test("raw high", "RawHigh", 'raw{job="x"}', True, "3 other"),
    _alert_test("other quiet", "OtherHigh", 'raw{job="x"}', False),
]


def _doc(tests=TESTS, **extra) -> dict:
    return {"rule_files": ["../rules/demo.rules.yaml"], **extra, "tests": tests}


def _kept(cut: rule_slices.RuleSlice) -> dict[str, list[str]]:
    groups = cut.rule_docs[0]["groups"]
    return {g["name"]: [r.get("record") or r["alert"] for r in g["rules"]] for g in groups}


def test_the_closure_follows_records_and_template_queries_and_keeps_the_order():
    raw, other = rule_slices.slices(_doc(group_eval_order=["second", "first"]), [RULES])
    assert [t["name"] for t in raw.tests] == ["raw high"]
    # the description's query reads job:other:sum: its record joins the closure
    assert _kept(raw) == {
        "first": ["job:raw:sum", "job:other:sum"],
        "second": ["job:raw:double", "RawHigh"],
    }
    assert _kept(other) == {"first": ["job:other:sum"], "second": ["OtherHigh"]}
    assert other.group_names == {"first", "second"}


def test_an_expression_test_observes_what_it_reads():
    test = {"name": "expr", "promql_expr_test": [{"expr": "job:raw:double", "eval_time": "1m"}]}
    [cut] = rule_slices.slices(_doc([test]), [RULES])
    assert _kept(cut) == {"first": ["job:raw:sum"], "second": ["job:raw:double"]}


@pytest.mark.parametrize("expr", ['{__name__=~"job:.*"}', "sum(", '{job="x"}'])
def test_a_name_the_closure_cannot_follow_runs_the_file_whole(expr):
    test = {"name": "expr", "promql_expr_test": [{"expr": expr, "eval_time": "1m"}]}
    with pytest.raises(rule_slices.Unsliceable):
        rule_slices.slices(_doc([test]), [RULES])


# Two SLOs' groups write the same record names, each with its own `slo` label; an alert's description
# asks for its own SLO's budget through a printf query, the way the SLO rules do.
BUDGET_QUERY = (
    '{{ with printf "budget:left{slo=%q, job=%q}" "SLO" $labels.job | query }}'
    "{{ . | first | value }}{{ end }} left"
)


def _slo_group(slo: str) -> dict:
    return {
        "name": f"slo-{slo}",
        "rules": [
            {"record": "slo:error:ratio", "expr": "sum by (job) (raw)", "labels": {"slo": slo}},
            {"record": "budget:left", "expr": f'1 - slo:error:ratio{{slo="{slo}"}}', "labels": {"slo": slo}},
            {
                "alert": f"Burn{slo}",
                "expr": f'slo:error:ratio{{slo="{slo}"}} > 0.1',
                "labels": {"slo": slo, "owner": "{{ $labels.job }}"},
                "annotations": {"description": BUDGET_QUERY.replace("SLO", slo)},
            },
        ],
    }


SLO_RULES = {"groups": [_slo_group("a"), _slo_group("b")]}


def test_a_rule_whose_labels_contradict_what_is_read_stays_out_of_the_closure():
    tests = [_alert_test("a burns", "Burna", 'raw{job="x"}', True), _alert_test("b", "Burnb", "raw", False)]
    a, b = rule_slices.slices(_doc(tests), [SLO_RULES])
    # slo:error:ratio{slo="a"} and the printf query's budget:left{slo="a"} are written by group a only
    assert _kept(a) == {"slo-a": ["slo:error:ratio", "budget:left", "Burna"]}
    assert _kept(b) == {"slo-b": ["slo:error:ratio", "budget:left", "Burnb"]}


def test_an_expression_reading_an_alert_follows_only_that_alert():
    test = {"name": "expr", "promql_expr_test": [{"expr": 'ALERTS{alertname="Burnb"}', "eval_time": "1m"}]}
    [cut] = rule_slices.slices(_doc([test]), [SLO_RULES])
    assert _kept(cut) == {"slo-b": ["slo:error:ratio", "budget:left", "Burnb"]}


@pytest.mark.parametrize(
    "label, value",
    [("slo", "{{ $labels.slo }}"), ("slo", "a")],
    ids=["a templated label says nothing", "a label the reader does not require"],
)
def test_a_rule_is_followed_unless_its_label_contradicts_the_read(label, value):
    rules = {"groups": [{"name": "g", "rules": [{"record": "r", "expr": "raw", "labels": {label: value}}]}]}
    test = {"name": "expr", "promql_expr_test": [{"expr": 'r{slo=~"b", job="x"}', "eval_time": "1m"}]}
    [cut] = rule_slices.slices(_doc([test]), [rules])
    assert _kept(cut) == {"g": ["r"]}


@pytest.mark.parametrize(
    "template",
    [
        '{{ with printf "budget:left{slo=%s}" "b" | query }}{{ end }}',  # a verb it does not follow
        '{{ with printf "budget:left{slo=\\"%q\\"}" "b" | query }}{{ end }}',  # an escape
        '{{ with query "budget:left" }}{{ end }}',  # no printf
    ],
)
def test_a_template_query_it_cannot_read_keeps_every_writer_of_its_names(template):
    group = _slo_group("a")
    group["rules"][2]["annotations"] = {"description": template}
    [cut] = rule_slices.slices(
        _doc([_alert_test("a", "Burna", "raw", False)]), [SLO_RULES | {"groups": [group, _slo_group("b")]}]
    )
    assert _kept(cut) == {
        "slo-a": ["slo:error:ratio", "budget:left", "Burna"],
        "slo-b": ["slo:error:ratio", "budget:left"],
    }


# -- under promtool ----------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "out"
    (root / "rules").mkdir(parents=True)
    (root / "promtool").mkdir()
    _write(root, RULES, TESTS)
    return root


def _write(root, rules: dict, tests: list[dict]) -> None:
    (root / "rules" / "demo.rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    doc = _doc(tests, group_eval_order=["first", "second"])
    (root / "promtool" / "demo.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def _run(root, **kw) -> tuple[bool, str]:
    said: list[str] = []
    ok = verify.run(root, echo=said.append, specs=root / "no-specs", jobs=2, **kw)
    return ok, "\n".join(said)


def _with(rules: dict, record: str, expr: str) -> dict:
    out = yaml.safe_load(yaml.safe_dump(rules, sort_keys=False))
    for group in out["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == record or rule.get("alert") == record:
                rule["expr"] = expr
    return out


@pytest.mark.tools("promtool")
def test_the_slices_pass_and_a_broken_record_fails_the_same_tests_as_the_whole_file(tree):
    ok, said = _run(tree)
    assert ok, said
    # the record two steps under RawHigh halves: RawHigh no longer fires, OtherHigh's test is unmoved
    _write(tree, _with(RULES, "job:raw:sum", "sum by (job) (raw) / 4"), TESTS)
    for whole in (False, True):
        ok, said = _run(tree, cache=False, whole=whole)
        assert not ok and "name: raw high," in said and "name: other quiet," not in said, said
        assert "a servewatch bug" not in said


@pytest.mark.tools("promtool")
def test_a_tuned_alert_runs_only_the_tests_that_observe_it_again(tree):
    ok, first = _run(tree)
    assert ok and "passed before" not in first, first
    _write(tree, _with(RULES, "OtherHigh", "job:other:sum > 11"), TESTS)
    ok, second = _run(tree)
    assert ok, second
    # the check of the changed rule file runs again; of the two slices, RawHigh's kept its verdict
    assert "promtool/demo.test.yaml: 2 tests passed (" in second
    assert "1 of 2 runs passed before on the same bytes" in second, second


@pytest.mark.tools("promtool")
def test_a_slice_failing_where_the_whole_file_passes_is_a_reported_failure(tree, monkeypatch):
    """The safety net under the closure: were it ever to miss a rule, the test fails loudly."""
    real = rule_slices._Rules.keep

    def drop_the_first_record(self, closure):
        return real(self, frozenset(at for at in closure if at != (0, 0, 0)))

    monkeypatch.setattr(rule_slices._Rules, "keep", drop_the_first_record)
    ok, said = _run(tree, cache=False)
    assert not ok
    assert "failed against the rules they observe" in said and "a servewatch bug" in said, said
    assert "--whole" in said
