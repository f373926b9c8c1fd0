"""What a CI reads: the four formats, the exit codes and --fail-on, and every way to suppress."""

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

FIXTURES = Path(__file__).parent / "lint_fixtures"
WARNING_ONLY = FIXTURES / "saturation-avg" / "bad.rules.yaml"  # one warning
ERRORS = FIXTURES / "label-unknown" / "bad.rules.yaml"  # two errors


def lint(servewatch, *args, cwd=None):
    return servewatch("lint", "--specs", "", *args, cwd=cwd)


def test_json_has_every_field(servewatch):
    res = lint(servewatch, "--format", "json", ERRORS)
    report = json.loads(res.stdout)
    first = report["findings"][0]
    assert first["file"] == str(ERRORS) and first["line"] == 7 and first["check"] == "label-unknown"
    assert first["severity"] == "error" and "model_name" in first["message"] and "modelName" in first["fix"]
    assert report["summary"]["error"] == 2 and report["summary"]["fail_on"] == "warning"


def test_junit_has_a_failure_per_finding_at_or_above_fail_on(servewatch):
    res = lint(servewatch, "--format", "junit", ERRORS, WARNING_ONLY, "--fail-on", "error")
    suites = ET.fromstring(res.stdout)
    by_file = {s.get("name"): s for s in suites.iter("testsuite")}
    assert by_file[str(ERRORS)].get("failures") == "2"
    warning_suite = by_file[str(WARNING_ONLY)]
    assert warning_suite.get("failures") == "0" and warning_suite.find("testcase/skipped") is not None


def test_github_annotations(servewatch):
    res = lint(servewatch, "--format", "github", ERRORS)
    lines = res.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"::error file={ERRORS},line=7,title=servewatch lint [label-unknown]::")
    assert "%0Afix: did you mean 'modelName'?" in lines[0]


def test_text_names_place_check_and_fix(servewatch):
    res = lint(servewatch, ERRORS)
    assert f"{ERRORS}:7: error [label-unknown]" in res.stdout and "    fix: did you mean" in res.stdout
    assert "2 errors, 0 warnings" in res.stderr


@pytest.mark.parametrize(
    "fail_on, path, code",
    [
        ("warning", WARNING_ONLY, 1),
        ("error", WARNING_ONLY, 0),
        ("info", WARNING_ONLY, 1),
        ("error", ERRORS, 1),
        ("warning", FIXTURES / "saturation-avg" / "good.rules.yaml", 0),
    ],
)
def test_exit_code_follows_fail_on(servewatch, fail_on, path, code):
    res = lint(servewatch, "--fail-on", fail_on, path)
    assert res.returncode == code
    # the summary says what the exit status says
    verdict = "passed" if code == 0 else "failed"
    assert res.stderr.rstrip().endswith(f"info: {verdict} (--fail-on {fail_on})"), res.stderr


def test_disable_and_enable_by_id(servewatch):
    assert lint(servewatch, "--disable", "label-unknown", ERRORS).returncode == 0
    assert lint(servewatch, "--enable", "counter-rate,syntax", ERRORS).returncode == 0
    assert lint(servewatch, "--enable", "label-unknown", ERRORS).returncode == 1
    res = lint(servewatch, "--disable", "label-unkown", ERRORS)
    assert res.returncode == 2 and "did you mean 'label-unknown'?" in res.stderr


def test_an_inline_comment_suppresses_one_rule(tmp_path, servewatch):
    text = ERRORS.read_text().replace(
        "      - record: gpu:fb_used:max\n",
        "      # servewatch-lint disable label-unknown  (the uuid label comes from our relabeling)\n"
        "      - record: gpu:fb_used:max\n",
    )
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    report = json.loads(lint(servewatch, "--format", "json", path).stdout)
    assert [f["line"] for f in report["findings"]] == [7]  # the other rule is still reported


def test_a_file_comment_suppresses_the_whole_file(tmp_path, servewatch):
    path = tmp_path / "rules.yaml"
    path.write_text("# servewatch-lint disable-file label-unknown\n" + ERRORS.read_text())
    assert lint(servewatch, path).returncode == 0


def test_an_unknown_check_in_a_comment_is_an_input_error(tmp_path, servewatch):
    path = tmp_path / "rules.yaml"
    path.write_text("# servewatch-lint disable-file label-unknwn\n" + ERRORS.read_text())
    res = lint(servewatch, path)
    assert res.returncode == 2 and "unknown check 'label-unknwn'" in res.stdout


def test_the_settings_file_ignores_checks_per_file(tmp_path, servewatch):
    shutil.copy(ERRORS, tmp_path / "gpu.rules.yaml")
    shutil.copy(WARNING_ONLY, tmp_path / "vllm.rules.yaml")
    (tmp_path / ".servewatch-lint.yaml").write_text(
        "ignore:\n  - file: gpu.*.yaml\n    checks: [label-unknown]\n    reason: relabeled labels\n"
    )
    res = lint(servewatch, "gpu.rules.yaml", "vllm.rules.yaml", "--format", "json", cwd=tmp_path)
    assert {f["check"] for f in json.loads(res.stdout)["findings"]} == {"saturation-avg"}
    (tmp_path / ".servewatch-lint.yaml").write_text("disable: [saturation-avg, label-unknown]\n")
    assert lint(servewatch, "gpu.rules.yaml", "vllm.rules.yaml", cwd=tmp_path).returncode == 0


def test_a_broken_settings_file_names_file_line_and_field(tmp_path, servewatch):
    settings = tmp_path / "lint.yaml"
    settings.write_text(
        "disable: [counter-rate]\nignore:\n  - file: x\n    checks: [label-unknwn]\nexclude: []\n"
    )
    res = lint(servewatch, "--config", settings, ERRORS)
    assert res.returncode == 2
    assert (
        f"{settings}:4: ignore.0.checks: unknown check 'label-unknwn'; did you mean 'label-unknown'?"
        in res.stderr
    )
    assert f"{settings}:5: exclude: unknown setting" in res.stderr


def test_list_checks_names_every_check(servewatch):
    from servewatch.lint.checks import ALL

    out = servewatch("lint", "--list-checks").stdout
    assert all(check in out for check in ALL)
