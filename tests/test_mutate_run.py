"""The mutation harness end to end on a tiny rule set with real promtool: a mutant the tests notice is
killed (and the failing test named), one they cannot notice survives, promtool's rejection makes a
mutant invalid, and the report says which survivors a human explained."""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import replace
from pathlib import Path


import pytest

from servewatch_testkit.mutate import build, cli, mutants, report, runner, workspace
from servewatch_testkit.mutate.rules import load
from servewatch_testkit.mutate.workspace import Edit

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool")]

RULES = """\
groups:
- name: tiny
  rules:
  - alert: QueueLong
    expr: queue_length > 10
    for: 2m
    labels: {severity: warning}
"""

# 20 fires after `for`; 5 stays silent. Nothing sits near 10, and nothing looks before `for` has passed.
TESTS = """\
rule_files: [../rules/tiny.rules.yaml]
evaluation_interval: 1m
tests:
- name: a long queue fires
  interval: 1m
  input_series:
  - {series: 'queue_length{q="a"}', values: '20x10'}
  alert_rule_test:
  - eval_time: 5m
    alertname: QueueLong
    exp_alerts: [{exp_labels: {severity: warning, q: a}}]
- name: a short queue stays silent
  interval: 1m
  input_series:
  - {series: 'queue_length{q="b"}', values: '5x10'}
  alert_rule_test:
  - {eval_time: 5m, alertname: QueueLong, exp_alerts: []}
"""


@pytest.fixture
def tiny(tmp_path) -> Path:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "tiny.rules.yaml").write_text(RULES)
    (tmp_path / "promtool").mkdir()
    (tmp_path / "promtool" / "tiny.test.yaml").write_text(TESTS)
    return tmp_path


def _by_operator(root: Path) -> dict[str, runner.Result]:
    ms, _ = mutants.generate(root / "rules")
    results = runner.run(runner.Options(root, jobs=2, timeout_s=120), ms, progress=lambda _: None)
    return {m.operator: results[m.id] for m in ms}


def test_killed_and_surviving_mutants_on_real_promtool(tiny):
    got = _by_operator(tiny)
    # the tests resolve the threshold only to (5, 20]: 12.5 and 7.5 both pass them
    assert got["threshold-up"].status == "survived"
    assert got["threshold-down"].status == "survived"
    assert got["comparison-inclusive"].status == "survived"
    assert got["for-zero"].status == "survived"  # nothing is checked before `for` has passed
    flipped = got["comparison-flipped"]
    assert flipped.status == "killed" and flipped.stage == "promtool"
    assert set(flipped.killed_by) == {
        "promtool/tiny.test.yaml: a long queue fires",
        "promtool/tiny.test.yaml: a short queue stays silent",
    }


def test_first_kill_stops_at_the_first_failing_test_file(tiny):
    """Two test files both kill the flipped comparison: --first-kill runs only the smaller one."""
    bigger = TESTS.replace("a long queue", "a queue again") + "# padding: this file is the larger one\n"
    (tiny / "promtool" / "tiny2.test.yaml").write_text(bigger)
    ms, _ = mutants.generate(tiny / "rules")
    flipped = next(m for m in ms if m.operator == "comparison-flipped")
    full = runner.run(runner.Options(tiny, timeout_s=120), [flipped], progress=lambda _: None)
    first = runner.run(
        runner.Options(tiny, timeout_s=120, first_kill=True), [flipped], progress=lambda _: None
    )
    assert {k.split(":")[0] for k in full[flipped.id].killed_by} == {
        "promtool/tiny.test.yaml",
        "promtool/tiny2.test.yaml",
    }
    assert first[flipped.id].status == "killed"
    assert {k.split(":")[0] for k in first[flipped.id].killed_by} == {"promtool/tiny.test.yaml"}


def test_a_test_near_the_threshold_kills_the_threshold_mutants(tiny):
    near = TESTS.replace("'20x10'", "'11x10'").replace("'5x10'", "'9x10'")
    (tiny / "promtool" / "tiny.test.yaml").write_text(near)
    got = _by_operator(tiny)
    assert got["threshold-up"].status == "killed"
    assert got["threshold-down"].status == "killed"
    assert got["comparison-inclusive"].status == "survived"  # only a value of exactly 10 tells > from >=


# A second alert in a group of its own, with a test of its own: the file runs as two slices.
EMPTY_RULES = """\
- name: tiny-empty
  rules:
  - alert: QueueEmpty
    expr: queue_length == 0
    labels: {severity: info}
"""
EMPTY_TEST = """\
- name: an empty queue fires
  interval: 1m
  input_series:
  - {series: 'queue_length{q="c"}', values: '0x10'}
  alert_rule_test:
  - eval_time: 5m
    alertname: QueueEmpty
    exp_alerts: [{exp_labels: {severity: info, q: c}}]
"""


def test_a_mutant_reruns_only_the_tests_that_observe_its_rule(tiny, tmp_path, monkeypatch):
    """Each test runs against the rules it observes, and a slice that passed on the same bytes is not
    run again: a mutant of QueueLong runs only QueueLong's tests, against QueueLong alone, and is
    judged as a run of the whole file judges it."""
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "cache"))
    (tiny / "rules" / "tiny.rules.yaml").write_text(RULES + EMPTY_RULES)
    (tiny / "promtool" / "tiny.test.yaml").write_text(TESTS + EMPTY_TEST)
    ms, _ = mutants.generate(tiny / "rules")
    flipped = next(m for m in ms if m.operator == "comparison-flipped" and "QueueLong" in m.id)
    opts = runner.Options(tiny, timeout_s=120)
    assert runner.baseline(opts, load(tiny / "rules")).status == "survived"  # every slice passed once

    loaded = []  # the rule files of each promtool test run
    real_run = runner._run

    def watched(cmd, cwd, deadline, env=None):
        if cmd[1:3] == ["test", "rules"]:
            loaded.append("".join(p.read_text() for p in sorted(Path(cwd).glob("*rules*.yaml"))))
        return real_run(cmd, cwd, deadline, env)

    monkeypatch.setattr(runner, "_run", watched)
    sliced = runner.run(opts, [flipped], progress=lambda _: None)[flipped.id]
    assert len(loaded) == 1 and "QueueLong" in loaded[0] and "QueueEmpty" not in loaded[0]
    whole = runner.run(replace(opts, whole=True), [flipped], progress=lambda _: None)[flipped.id]
    assert sliced.status == whole.status == "killed"
    assert (
        set(sliced.killed_by)
        == set(whole.killed_by)
        == {
            "promtool/tiny.test.yaml: a long queue fires",
            "promtool/tiny.test.yaml: a short queue stays silent",
        }
    )


# An incident module as the mutation run calls it: pytest from the checkout's root, with the mutated
# rules' folder in SERVEWATCH_RULES_DIR. It fails when the threshold is not 10 (it notices the mutant)
# or, for FLAKY, on the calls FLAKY lists (counted in a file: a failure under load, not the mutant's).
INCIDENT_MODULE = """\
import os
from pathlib import Path

CALLS = Path(__file__).with_name("calls")


def test_the_queue_alert_on_a_real_server():
    calls = int(CALLS.read_text()) + 1 if CALLS.exists() else 1
    CALLS.write_text(str(calls))
    assert calls not in FLAKY, f"server busy on call {calls}"
    rules = Path(os.environ["SERVEWATCH_RULES_DIR"], "tiny.rules.yaml").read_text()
    assert "> 10" in rules, "the threshold moved"
"""
# the repo's incident module takes --install-tools; so must a stand-in, or pytest refuses the call
INCIDENT_CONFTEST = """\
def pytest_addoption(parser):
    parser.addoption("--install-tools", action="store_true")
"""


def _incident_verdict(tiny: Path, operator: str, flaky: set[int]) -> tuple[runner.Result, int]:
    """The verdict on `operator`'s mutant with the stand-in incident module, and its number of calls."""
    tests = tiny / "incidents"
    tests.mkdir()
    (tests / "conftest.py").write_text(INCIDENT_CONFTEST)
    (tests / "test_incidents.py").write_text(INCIDENT_MODULE.replace("FLAKY", repr(flaky or {0})))
    ms, _ = mutants.generate(tiny / "rules")
    mutant = next(m for m in ms if m.operator == operator)
    module = ("incidents/test_incidents.py",)
    opts = runner.Options(tiny, with_incidents=True, timeout_s=120, incidents=module)
    result = runner.run_edits(opts, [Edit(mutant.rule, mutant.expr, mutant.for_)])
    return result, int((tests / "calls").read_text())


def test_an_incident_test_that_notices_the_mutant_kills_it_on_a_rerun_too(tiny):
    # the promtool tests pass 12.5 (test_killed_and_surviving_mutants...): only the incident test sees it
    result, calls = _incident_verdict(tiny, "threshold-up", flaky=set())
    assert result.status == "killed" and result.stage == "incidents"
    assert result.killed_by == ("incidents/test_incidents.py::test_the_queue_alert_on_a_real_server",)
    assert "the threshold moved" in result.detail
    assert calls == 2  # the module, then its failed test again


def test_an_incident_failure_that_does_not_repeat_is_not_a_kill(tiny):
    """for-zero changes nothing the stand-in looks at: its one failure is the server's, not the mutant's."""
    result, calls = _incident_verdict(tiny, "for-zero", flaky={1})
    assert (result.status, calls) == ("survived", 3)  # failed, passed alone, then the module passed
    assert "server busy on call 1" in result.detail  # the flake's reason, for whoever chases it

    again, calls = _incident_verdict(_fresh(tiny), "for-zero", flaky={1, 3})
    assert (again.status, calls) == ("error", 4)  # failures that never repeat decide nothing
    assert "passed on a rerun" in again.detail and "test_the_queue_alert_on_a_real_server" in again.detail
    assert "server busy on call 3" in again.detail


def _fresh(tiny: Path) -> Path:
    shutil.rmtree(tiny / "incidents")
    return tiny


def test_a_rule_promtool_rejects_is_invalid_and_the_baseline_passes(tiny):
    (rule,) = load(tiny / "rules")
    opts = runner.Options(tiny, timeout_s=60)
    bad = runner.run_edits(opts, [Edit(rule, expr="queue_length >")])
    assert bad.status == "invalid" and "promtool check rules" in bad.detail
    assert runner.baseline(opts, [rule]).status == "survived"


def test_the_workspace_keeps_the_layout_the_tests_point_at(tiny):
    """The copy holds the changed rules, the tests, and the rule files beside the tests that they load
    too (as promtool/slo.test.yaml loads slo.inputs.rules.yaml), and runs only the tests."""
    (rule,) = load(tiny / "rules")
    beside = "groups: []\n"
    (tiny / "promtool" / "beside.rules.yaml").write_text(beside)
    work = workspace.create(tiny, [Edit(rule, expr="queue_length > 99", for_="0s")], parent=tiny)
    assert (work / "promtool" / "beside.rules.yaml").read_text() == beside
    text = (work / "rules" / "tiny.rules.yaml").read_text()
    assert "queue_length > 99" in text and "for:" not in text
    assert workspace.test_files(work) == [Path("promtool/tiny.test.yaml")]
    assert workspace.rule_files_of(work, Path("promtool/tiny.test.yaml")) == {"tiny.rules.yaml"}
    assert (tiny / "rules" / "tiny.rules.yaml").read_text() == RULES  # the original is untouched


def test_the_report_counts_explained_survivors_and_flags_stale_notes(tiny):
    notes_dir = tiny / "notes"
    notes_dir.mkdir()
    ms, _ = mutants.generate(tiny / "rules")
    ids = {m.operator: m.id for m in ms}
    (notes_dir / "equivalent.yaml").write_text(
        f"{ids['comparison-inclusive']}: no queue is exactly 10 long\n"
    )
    (notes_dir / "gaps.yaml").write_text(
        textwrap.dedent(f"""\
        {ids["threshold-up"]}: a scenario at 11 that fires
        {ids["comparison-flipped"]}: wrongly noted, this one is killed
        QueueLong/threshold-up/000000: an id that no longer exists
        """)
    )
    out = tiny / "out"
    assert cli.main(["--root", str(tiny), "--out", str(out), "--notes", str(notes_dir)]) == 0
    data = json.loads((out / "report.json").read_text())
    outcome = {m["operator"]: m["outcome"] for m in data["mutants"]}
    assert outcome["comparison-inclusive"] == "equivalent"
    assert outcome["threshold-up"] == "known-gap"
    assert outcome["threshold-down"] == "survived"
    assert outcome["comparison-flipped"] == "killed"
    s = data["summary"]
    assert s["valid"] == len(ms) and s["killed"] + s["survived"] == s["valid"]
    assert s["score"] == pytest.approx(s["killed"] / (s["valid"] - 1))
    assert [i for i, _ in s["stale_notes"]] == sorted(
        [ids["comparison-flipped"], "QueueLong/threshold-up/000000"]
    )
    md = (out / "REPORT.md").read_text()
    assert "no queue is exactly 10 long" in md and "Stale notes" in md


def test_notes_that_are_not_a_mapping_are_refused(tmp_path):
    (tmp_path / "equivalent.yaml").write_text("- just a list\n")
    with pytest.raises(ValueError, match="mapping of mutant id"):
        report.Notes.load(tmp_path)


def test_runs_of_parts_combine_into_one_report(tiny, tmp_path):
    """A full run in two parts: the combined report covers every mutant once, each with its verdict."""

    ms, _ = mutants.generate(tiny / "rules")
    notes = tmp_path / "notes"
    notes.mkdir()
    common = ["--root", str(tiny), "--notes", str(notes), "--jobs", "2"]
    assert cli.main([*common, "--only", "threshold", "--out", str(tmp_path / "a")]) == 0
    assert cli.main([*common, "--operator", "comparison-flipped", "--out", str(tmp_path / "b")]) == 0
    out = tmp_path / "all"
    combine = ["--combine", str(tmp_path / "a"), "--combine", str(tmp_path / "b"), "--out", str(out)]
    assert cli.main([*common, *combine]) == 0
    doc = json.loads((out / "report.json").read_text())
    outcomes = {m["id"]: m["outcome"] for m in doc["mutants"]}
    ran = [m for m in ms if "threshold" in m.id or m.operator == "comparison-flipped"]
    assert set(outcomes) == {m.id for m in ran}
    assert {outcomes[m.id] for m in ran if m.operator == "comparison-flipped"} == {"killed"}
    assert {outcomes[m.id] for m in ran if "threshold" in m.id} == {"survived"}
    scope = f"({len(ran)} of the {len(ms)} mutants of the checkout's rules/)"
    selection = doc["run"]["selection"]
    assert selection.startswith(f"{len(ran)} of {len(ms)} mutants {scope}, combined from 2 runs")
    assert cli.main([*common, "--combine", str(tmp_path / "missing"), "--out", str(out)]) == 2


def test_a_configured_build_is_mutated_against_its_own_generated_tests(tmp_path):
    """--specs generates the configured build and runs its promtool tests: a canary comparison
    flipped is killed by a test file of that build, and the default build's notes are not its stale ones."""
    repo = Path(__file__).resolve().parents[1]
    specs = repo / build.CONFIGURED
    build.write(specs, tmp_path / "built")
    ms, _ = mutants.generate(tmp_path / "built" / "rules")
    flipped = next(m for m in build.only_new(ms, repo / "rules") if m.operator == "comparison-flipped")
    out = tmp_path / "out"
    argv = ["--root", str(repo), "--specs", str(specs), "--only-new", "--only", flipped.id]
    assert cli.main([*argv, "--jobs", "1", "--first-kill", "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    (entry,) = doc["mutants"]
    assert entry["outcome"] == "killed" and entry["killed_by"][0].startswith("promtool/vllm.")
    assert doc["run"]["specs"] == str(build.CONFIGURED) and doc["summary"]["stale_notes"] == []
    combined = tmp_path / "combined"  # counts the mutants of the build the part ran on, and only those
    assert cli.main(["--root", str(repo), "--combine", str(out), "--out", str(combined)]) == 0
    run = json.loads((combined / "report.json").read_text())["run"]
    new = len(build.only_new(ms, repo / "rules"))
    assert run["selection"].startswith(f"1 of {new} mutants (1 of the {new} mutants of the rules only")
    assert run["builds"] == [{"specs": str(build.CONFIGURED), "only_new": True}]
