"""The mutation harness's mutator: each operator makes the one change it names, the printed PromQL means
what was built, and mutant ids stay put when unrelated things change."""

from __future__ import annotations

from pathlib import Path

import pytest

from servewatch.spec.loader import load
from servewatch_testkit.mutate import build, mutants, operators, report, rules, tree
from servewatch_testkit.mutate.operators import Context
from servewatch_testkit.mutate.rules import Rule

REPO = Path(__file__).resolve().parents[1]


def alert(expr: str, for_: str | None = "5m", name: str = "TestAlert") -> Rule:
    return Rule("t.rules.yaml", 0, 0, "alert", name, (), expr, for_, name)


def record(expr: str, name: str = "level:metric:op") -> Rule:
    return Rule("t.rules.yaml", 0, 0, "record", name, (), expr, None, name)


def changed(rule: Rule, operator: str, ctx: Context | None = None) -> list[str]:
    """What `operator` makes of the rule: each mutant's expression (or `for: ...`), in order."""
    ms, _ = mutants.for_rules([rule], ctx or Context())
    return [m.expr if m.expr is not None else f"for: {m.for_}" for m in ms if m.operator == operator]


# -- the tree prints back what it parsed ----------------------------------------------------------


def test_every_generated_rule_prints_back_to_the_same_tree():
    for rule in rules.load(REPO / "rules"):
        parsed = tree.parse(rule.expr)
        assert tree.reparses(parsed), rule.key


@pytest.mark.parametrize(
    "expr",
    [
        'sum by (a, b) (rate(x{y="z", w=~"q.*"}[5m] offset 1m))',
        "a / ignoring (x) group_right (c, d) b",
        "a / on () group_left b",
        "a > bool 1",
        "x @ start()",
        "rate(x[5m:30s] offset 2m)",
        "-topk(3, x)",
        'label_replace(x, "a", "$1", "b", "(.*)")',
        '{__name__="up", a="b\\"c\\\\d"}',
        'count_values("v", x) or absent(y)',
        "1e-05 * x",
    ],
)
def test_constructs_print_back(expr):
    parsed = tree.parse(expr)
    assert tree.parse(tree.render(parsed)) == parsed


def test_durations_print_in_prometheus_units():
    from datetime import timedelta

    assert tree.duration(timedelta(minutes=2, seconds=30)) == "2m30s"
    assert tree.duration(timedelta(hours=1)) == "1h"
    assert tree.duration(timedelta(milliseconds=1500)) == "1s500ms"


# -- one operator, one change ---------------------------------------------------------------------


def test_threshold_moves_up_and_down_by_the_step():
    rule = alert("m:x:max > 0.8")
    assert changed(rule, "threshold-up") == ["m:x:max > 1"]
    assert changed(rule, "threshold-down") == ["m:x:max > 0.6"]
    assert changed(alert("m:x:max > 0.8"), "threshold-up", Context(threshold_step=0.1)) == ["m:x:max > 0.88"]


def test_comparisons_flip_and_become_inclusive_but_guards_do_not():
    rule = alert("a / on (x) (b > 0) > 0.5 or up == 0")
    assert changed(rule, "comparison-flipped") == [
        "a / on (x) (b > 0) < 0.5 or up == 0",
        "a / on (x) (b > 0) > 0.5 or up != 0",
    ]
    assert changed(rule, "comparison-inclusive") == ["a / on (x) (b > 0) >= 0.5 or up == 0"]
    assert changed(rule, "threshold-up") == ["a / on (x) (b > 0) > 0.625 or up == 0"]


def test_for_is_removed_and_halved_on_alerts_only():
    assert changed(alert("x > 1", "5m"), "for-zero") == ["for: 0s"]
    assert changed(alert("x > 1", "5m"), "for-halved") == ["for: 2m30s"]
    assert changed(alert("x > 1", None), "for-zero") == []
    assert changed(record("max by (a) (x)"), "for-halved") == []


def test_zero_guard_is_removed():
    rule = record("sum by (m) (rate(e[5m])) / on (m) (sum by (m) (rate(t[5m])) > 0)")
    assert changed(rule, "guard-removed") == ["sum by (m) (rate(e[5m])) / on (m) (sum by (m) (rate(t[5m])))"]


def test_dedup_max_becomes_sum_everywhere_in_the_rule():
    rule = record("max by (a) (x) / on (a) (max by (a) (y) > 0)")
    assert changed(rule, "max-to-sum") == ["sum by (a) (x) / on (a) (sum by (a) (y) > 0)"]
    assert changed(rule, "sum-to-max") == []


def test_a_label_is_dropped_from_every_by_on_and_group_left():
    rule = record("max by (a, b) (x) * on (a, b) group_left (c) group by (a, b, c) (y)")
    assert changed(rule, "label-dropped") == [
        "max by (b) (x) * on (b) group_left (c) group by (b, c) (y)",
        "max by (a) (x) * on (a) group_left (c) group by (a, c) (y)",
        "max by (a, b) (x) * on (a, b) group_left () group by (a, b) (y)",
    ]


def test_the_wrong_quantile_is_computed_or_read():
    rule = record("histogram_quantile(0.95, sum by (le) (rate(x_bucket[5m])))")
    assert changed(rule, "quantile-swapped") == ["histogram_quantile(0.5, sum by (le) (rate(x_bucket[5m])))"]
    assert changed(record("histogram_quantile(0.5, y)"), "quantile-swapped") == [
        "histogram_quantile(0.99, y)"
    ]
    assert changed(alert('m:l:q{quantile="0.95"} > 2'), "quantile-swapped") == ['m:l:q{quantile="0.5"} > 2']


def test_the_wrong_metric_is_a_sibling_from_the_catalog_or_the_records():
    fb = record("max by (UUID) (DCGM_FI_DEV_FB_USED) / on (UUID) max by (UUID) (DCGM_FI_DEV_FB_USED)")
    assert changed(fb, "metric-swapped") == [
        "max by (UUID) (DCGM_FI_DEV_FB_FREE) / on (UUID) max by (UUID) (DCGM_FI_DEV_FB_FREE)"
    ]
    ctx = Context(records=frozenset({"engine:a:max", "engine:b:max", "engine:c:rate5m"}))
    assert changed(alert("engine:a:max > 1"), "metric-swapped", ctx) == ["engine:b:max > 1"]
    hist = record("rate(vllm:e2e_request_latency_seconds_count[5m])")
    assert changed(hist, "metric-swapped") == ["rate(vllm:request_prefill_time_seconds_count[5m])"]
    assert changed(record("max(vllm:num_preemptions_total)"), "metric-swapped") == []  # no sibling


def test_each_branch_of_an_or_chain_is_removed_in_turn():
    assert changed(alert("a == 0 or b or absent(c)"), "or-branch-removed") == [
        "a == 0 or b",
        "b or absent(c)",
        "a == 0 or absent(c)",
    ]
    # a parenthesized `or` is one branch of the outer chain, and a chain of its own
    assert changed(alert("(a or b) or c"), "or-branch-removed") == ["c", "(a or b)", "(b) or c", "(a) or c"]


def test_the_unless_presence_check_is_removed():
    assert changed(alert("up == 1 unless on (job) group by (job) (m)"), "unless-removed") == ["up == 1"]


def test_windows_double_together():
    rule = record("rate(x[5m]) / on () (rate(y[1m]) > 0)")
    assert changed(rule, "window-doubled") == ["rate(x[10m]) / on () (rate(y[2m]) > 0)"]


def test_matchers_and_regex_alternatives_are_dropped_one_at_a_time():
    rule = record('rate(x{r=~"abort|error", job="v"}[5m])')
    assert changed(rule, "matcher-dropped") == ['rate(x{job="v"}[5m])', 'rate(x{r=~"abort|error"}[5m])']
    assert changed(rule, "alternative-dropped") == [
        'rate(x{r=~"error", job="v"}[5m])',
        'rate(x{r=~"abort", job="v"}[5m])',
    ]


def test_every_operator_has_a_case_in_this_file():
    tested = {
        "threshold-up",
        "threshold-down",
        "comparison-flipped",
        "comparison-inclusive",
        "for-zero",
        "for-halved",
        "guard-removed",
        "max-to-sum",
        "sum-to-max",
        "label-dropped",
        "quantile-swapped",
        "metric-swapped",
        "window-doubled",
        "or-branch-removed",
        "unless-removed",
        "matcher-dropped",
        "alternative-dropped",
    }
    assert {op.name for op in operators.OPERATORS} == tested


def test_sum_becomes_max():
    rule = record("sum by (m) (max by (m, e) (rate(x[5m])))")
    assert changed(rule, "sum-to-max") == ["max by (m) (max by (m, e) (rate(x[5m])))"]


# -- ids and descriptions -------------------------------------------------------------------------


def test_every_mutant_of_the_generated_rules_is_valid_described_and_uniquely_named():
    ms, skipped = mutants.generate(REPO / "rules")
    assert not skipped
    assert len({m.id for m in ms}) == len(ms)
    for m in ms:
        assert m.invalid is None, m.id
        assert m.description and "\n" not in m.description, m.id
        assert m.expr != m.rule.expr or m.for_ is not None, m.id


def test_ids_are_pinned_so_notes_on_survivors_keep_matching():
    ms, _ = mutants.for_rules([alert("m:x:max > 0.8", name="PinnedAlert")], Context())
    # changing these breaks every note in bench/mutation/*.yaml: do it only on purpose
    assert [m.id for m in ms][:3] == [
        "PinnedAlert/threshold-up/1c9d60",
        "PinnedAlert/threshold-down/733f4e",
        "PinnedAlert/comparison-flipped/e24fa2",
    ]


def test_ids_do_not_move_when_other_rules_or_other_parts_of_the_rule_change():
    target = alert("a:b:max > 0.8 or up == 0", name="A")
    alone = {m.description: m.id for m in mutants.for_rules([target], Context())[0]}
    other = alert("x > 1", name="B")
    with_other = {
        m.description: m.id for m in mutants.for_rules([other, target], Context())[0] if m.rule.key == "A"
    }
    assert alone == with_other
    edited = alert("a:b:max > 0.8 or up == 1", name="A")
    moved = {m.description: m.id for m in mutants.for_rules([edited], Context())[0]}
    assert moved["threshold 0.8 -> 1"] == alone["threshold 0.8 -> 1"]  # the threshold's text is unchanged
    assert set(moved.values()) != set(alone.values())  # the `up` comparison's mutants changed


def test_the_same_change_twice_in_a_rule_gets_a_numbered_id():
    ms, _ = mutants.for_rules([record('x{job="a"} / on () x{job="a"}')], Context())
    ids = [m.id for m in ms if m.operator == "matcher-dropped"]
    assert len(ids) == 2 and ids[1] == ids[0] + ".2"


def test_records_sharing_a_name_are_told_apart_by_their_labels():
    keys = [r.key for r in rules.load(REPO / "rules") if r.name.endswith("histogram_quantile_rate5m")]
    assert len(keys) == len(set(keys)) and any(k.endswith("[quantile=0.95]") for k in keys)


def test_a_report_of_a_subset_says_which_mutants_ran():
    from servewatch_testkit.mutate.cli import _selection

    assert _selection([], [], 874, 874) == "all 874 mutants"
    assert _selection(["VLLMKV", "DCGM"], ["for-zero"], 3, 874) == (
        "3 of 874 mutants (ids containing `VLLMKV` or `DCGM`; operators for-zero)"
    )


# -- the rules of a configured build (--specs) ----------------------------------------------------


def _listed(capsys, *argv: str) -> set[str]:
    """The rule keys of the mutants `--list` prints."""
    from servewatch_testkit.mutate import cli

    assert cli.main(["--root", str(REPO), *argv, "--list"]) == 0
    return {report.rule_of(line.split("\t")[0]) for line in capsys.readouterr().out.splitlines()}


def test_specs_only_new_mutates_the_rules_only_the_configured_build_has(capsys):
    """Every alert of a group that needs a role, a track or a client source is mutated, and no rule
    the checkout's rules/ already has."""
    spec = load(REPO / build.CONFIGURED)
    needy = {a.alert for g in spec.groups if g.needs and spec.group_enabled(g) for a in g.alerts}
    listed = _listed(capsys, "--specs", str(REPO / build.CONFIGURED), "--only-new")
    assert needy and needy <= listed
    assert not listed & {r.key for r in rules.load(REPO / "rules")}


@pytest.mark.parametrize(
    "config, said",
    [
        (None, "no such folder"),
        ("extends: servewatch\nconfig:\n  role: {labl: x}\n", "config.yaml:3"),
    ],
    ids=["missing", "invalid"],
)
def test_a_bad_specs_folder_is_a_clear_error(tmp_path, capsys, config, said):
    from servewatch_testkit.mutate import cli

    specs = tmp_path / "specs"
    if config is not None:
        specs.mkdir()
        (specs / "config.yaml").write_text(config)
    assert cli.main(["--root", str(REPO), "--specs", str(specs), "--list"]) == 2
    err = capsys.readouterr().err
    assert f"mutate: specs folder {specs}" in err and said in err and "Traceback" not in err


def test_only_new_needs_specs_and_specs_runs_no_incident_tests(capsys):
    """`make mutate` always asks for the incident tests: with --specs none applies, and it says so."""
    from servewatch_testkit.mutate import cli

    assert cli.main(["--root", str(REPO), "--only-new", "--list"]) == 2
    assert "--only-new goes with --specs" in capsys.readouterr().err
    specs = str(REPO / build.CONFIGURED)
    assert cli.main(["--root", str(REPO), "--specs", specs, "--with-incidents", "--list"]) == 0
    assert f"no incident test applies to --specs {specs}" in capsys.readouterr().err
