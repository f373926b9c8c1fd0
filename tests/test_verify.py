"""`servewatch test`'s runner (verify.py, verdicts.py): test files side by side, a large file cut
into shards of whole tests, and verdicts kept for runs that passed on the same promtool and bytes."""

from __future__ import annotations

import os
import re
import shutil

import pytest
import yaml

from servewatch import promtool_runs, verify

pytestmark = pytest.mark.tools("promtool")

RULES = {
    "groups": [
        {
            "name": "demo",
            "rules": [
                {"record": "job:up:sum", "expr": "sum by (job) (up)"},
                {
                    "alert": "DemoDown",
                    "expr": "up == 0",
                    "for": "1m",
                    "labels": {"severity": "warning"},
                    "annotations": {"summary": "Down.", "description": "{{ $labels.job }} is down."},
                },
            ],
        }
    ]
}
# test names with what a regular expression reads as syntax: a shard must select each literally
NAMES = ["a.b (x)", "c|d [e]", "f+g*h? ^i$", "j{1} \\k", "plain"]


def _test(name: str, value: int) -> dict:
    """A test that passes for value 0 (DemoDown fires) and fails for any other (it is not expected)."""
    fired = {
        "exp_labels": {"job": "x", "severity": "warning"},
        "exp_annotations": {"summary": "Down.", "description": "x is down."},
    }
    expected = [fired] if value == 0 else []
    return {
        "name": name,
        "interval": "1m",
        "input_series": [{"series": 'up{job="x"}', "values": "0x5"}],
        "alert_rule_test": [{"eval_time": "3m", "alertname": "DemoDown", "exp_alerts": expected}],
    }


def _tree(tmp_path, values: dict[str, int], small: int = 0):
    """rules/demo.rules.yaml and promtool/big.test.yaml with a test per name (value 0 passes), and
    `small` more test files of one passing test each."""
    (tmp_path / "rules").mkdir(parents=True)
    (tmp_path / "rules" / "demo.rules.yaml").write_text(yaml.safe_dump(RULES, sort_keys=False))
    (tmp_path / "promtool").mkdir()
    body = {"rule_files": ["../rules/demo.rules.yaml"], "tests": [_test(n, v) for n, v in values.items()]}
    (tmp_path / "promtool" / "big.test.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    for i in range(small):
        one = {"rule_files": ["../rules/demo.rules.yaml"], "tests": [_test(f"small {i}", 0)]}
        (tmp_path / "promtool" / f"small{i}.test.yaml").write_text(yaml.safe_dump(one, sort_keys=False))
    return tmp_path


@pytest.fixture(autouse=True)
def verdicts(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "verdicts"


def _run(root, **kw) -> tuple[bool, list[str]]:
    said: list[str] = []
    ok = verify.run(root, echo=said.append, specs=root / "no-specs", **kw)
    return ok, said


def test_a_file_larger_than_its_share_runs_in_shards_that_cover_each_test_once(tmp_path):
    # every test fails, so promtool names each test a shard ran
    root = _tree(tmp_path / "t", dict.fromkeys(NAMES, 1))
    jobs = verify._units(verify.test_files(root), cores=2)
    assert len(jobs) == 2 and all(any(a.startswith("--run=") for a in j.args) for j in jobs)
    ok, said = _run(root, jobs=2)
    assert not ok
    ran = re.findall(r"^\s+name: (.*),\s*$", "\n".join(said), re.M)
    assert sorted(ran) == sorted(NAMES), said


def test_a_pass_is_kept_and_any_changed_byte_runs_again(tmp_path, verdicts):
    root = _tree(tmp_path / "t", dict.fromkeys(NAMES, 0), small=2)
    ok, first = _run(root)
    assert ok, first
    assert not any("passed before" in line for line in first)
    jobs = 1 + len(verify._units(verify.test_files(root), cores=os.cpu_count() or 1))  # with the check
    assert len(list(verdicts.iterdir())) == jobs
    ok, second = _run(root)
    assert ok and all("passed before on the same bytes" in line for line in second), second
    # a rule file the tests read changed: run whole, the check and every test run again, and pass
    rules = root / "rules" / "demo.rules.yaml"
    rules.write_text(rules.read_text() + "# a comment\n")
    ok, third = _run(root, whole=True)
    assert ok and not any("passed before" in line for line in third), third
    # against the rules each test observes, a comment changes none of them: only the check runs
    rules.write_text(rules.read_text() + "# another comment\n")
    ok, sliced = _run(root)
    assert ok and sliced[0].startswith("promtool check rules: 1 rule files passed (0"), sliced
    assert all("passed before on the same bytes" in line for line in sliced[1:]), sliced
    ok, forced = _run(root, cache=False)
    assert ok and not any("passed before" in line for line in forced), forced


def test_a_pass_is_kept_for_the_same_files_in_another_folder(tmp_path):
    """A CI checkout elsewhere or a copy in a temporary folder proves nothing new: only the bytes and
    the layout between the files count, not where they lie."""
    root = _tree(tmp_path / "t", dict.fromkeys(NAMES, 0), small=2)
    ok, first = _run(root)
    assert ok and not any("passed before" in line for line in first), first
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(root, moved)
    ok, second = _run(moved)
    assert ok and all("passed before on the same bytes" in line for line in second), second


def test_a_failure_is_never_kept(tmp_path, verdicts):
    root = _tree(tmp_path / "t", {"fails": 1})
    for _ in range(2):
        ok, said = _run(root)
        assert not ok and any("name: fails," in line for line in said), said
    assert len(list(verdicts.iterdir())) == 1  # only the rule check passed


def test_the_report_puts_failures_first_then_a_line_per_file_then_the_total(tmp_path):
    values = {"passes": 0, "fails once": 1, "fails twice": 1}
    root = _tree(tmp_path / "t", values, small=2)
    first = root / "promtool" / "a-passing.test.yaml"  # sorts before the failing file
    first.write_text((root / "promtool" / "small0.test.yaml").read_text())
    ok, said = _run(root, jobs=2)
    assert not ok
    lines = "\n".join(said).splitlines()
    assert all(line.strip() for line in lines), "no blank-line padding"
    big, smalls = root / "promtool" / "big.test.yaml", [first, *sorted((root / "promtool").glob("small*"))]
    heading = lines.index(f"{big}, what promtool said:")
    failures = [i for i, line in enumerate(lines) if re.match(r"\s+name: fails (once|twice),", line)]
    per_file = [i for i, line in enumerate(lines) if line.startswith(f"{root}") and i != heading]
    assert len(failures) == 2 and heading < min(failures) and max(failures) < min(per_file)
    assert [lines[i].split(": ")[0] for i in per_file] == [str(big), *map(str, smalls)]  # failed first
    assert lines[per_file[0]].startswith(f"{big}: 2 of 3 tests FAILED (")
    assert all(": 1 test passed (" in lines[i] for i in per_file[1:])
    assert lines[-1].startswith("servewatch test: FAILED: 4 test files, 6 tests, 2 failed in "), lines[-1]


def test_a_file_promtool_cannot_read_fails_the_total_too(tmp_path):
    root = _tree(tmp_path / "t", {"passes": 0})
    (root / "promtool" / "broken.test.yaml").write_text("tests: [not a test\n")
    ok, said = _run(root)
    assert not ok
    assert said[-1].startswith("servewatch test: FAILED: 2 test files"), said[-1]
    assert "failures uncounted" in said[-1]


def test_cheap_files_share_a_promtool_run_and_a_failure_is_named_on_its_file_alone(tmp_path, verdicts):
    """Ten one-test files on one worker: four promtool runs of two or three files each; the failing
    file is run again alone, so it alone is named, and every other file keeps a verdict of its own."""
    root = _tree(tmp_path / "t", {"fails": 1}, small=9)
    jobs = verify._units(verify.test_files(root), cores=1)
    runs = promtool_runs.packed(jobs, workers=1)
    assert len(runs) == promtool_runs.PACKS_PER_WORKER and all(len(run) > 1 for run in runs), runs
    ok, said = _run(root, jobs=1)
    assert not ok
    big, text = root / "promtool" / "big.test.yaml", "\n".join(said)
    named = [line for line in text.splitlines() if "what promtool said" in line]
    assert named == [f"{big}, what promtool said:"], text
    assert "name: fails," in text and not re.search(r"name: small \d", text), text
    assert sum(": 1 test passed (" in line for line in said) == 9, said
    assert len(list(verdicts.iterdir())) == 1 + 9  # the rule check and each passing file, alone
    ok, again = _run(root, jobs=1)
    assert sum("1 test passed (passed before on the same bytes)" in line for line in again) == 9, again


def _long_and_wide(root):
    """A small month-long test file and a large one of many short tests."""
    _tree(root, {f"short {i:03}": 0 for i in range(60)})
    long = yaml.safe_load((root / "promtool" / "big.test.yaml").read_text())
    long["evaluation_interval"] = "1m"
    long["tests"] = [_test("a month", 0)]
    long["tests"][0]["promql_expr_test"] = [{"expr": "up", "eval_time": "30d", "exp_samples": []}]
    (root / "promtool" / "long.test.yaml").write_text(yaml.safe_dump(long, sort_keys=False))
    return root


def test_the_costliest_run_by_steps_rules_and_series_starts_first(tmp_path):
    root = _long_and_wide(tmp_path / "t")
    long, wide = root / "promtool" / "long.test.yaml", root / "promtool" / "big.test.yaml"
    assert long.stat().st_size * 10 < wide.stat().st_size
    jobs = verify._units(verify.test_files(root), cores=1)
    first = max(jobs, key=lambda j: j.cost)
    assert first.files == (long,), [(j.files, j.cost) for j in jobs]
    # 43,201 one-minute steps x (2 rules + 1 series), against 60 tests of 4 steps x 3
    assert first.cost == 43_201 * 3 and sum(j.cost for j in jobs if j is not first) == 60 * 4 * 3


GC_GOAL = re.compile(r"^gc \d+ @.* (\d+) MB goal", re.M)


@pytest.mark.parametrize("gogc", [None, "100"])
def test_promtool_collects_garbage_at_gogc_400_unless_the_user_set_gogc(tmp_path, monkeypatch, gogc):
    """Go's first collection comes at a 4 MB heap x GOGC/100 (gctrace shows its goal)."""
    root = _tree(tmp_path / "t", {"passes": 0})
    monkeypatch.setenv("GODEBUG", "gctrace=1")
    if gogc is None:
        monkeypatch.delenv("GOGC", raising=False)
    else:
        monkeypatch.setenv("GOGC", gogc)
    [result] = verify.prove([root / "promtool" / "big.test.yaml"], cache=False, whole=True)
    assert result.passed, result.output
    goals = [int(goal) for goal in GC_GOAL.findall(result.output)]
    if gogc is None:
        assert all(goal >= 16 for goal in goals), goals  # 4 MB x 400/100, if it collects at all
    else:
        assert goals and min(goals) < 16, result.output  # the user's: 4 MB x 100/100
