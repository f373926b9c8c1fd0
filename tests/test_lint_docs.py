"""docs/lint.md has a section per check with a failing and a passing example, and they do what the
page says: the failing example reports its check, the passing one reports nothing."""

import json
import re
from pathlib import Path

import pytest

from servewatch import catalog
from servewatch.lint import runner
from servewatch.lint.checks import ALL
from servewatch.lint.facts import LintContext

DOC = Path(__file__).resolve().parents[1] / "docs" / "lint.md"
SECTION_RE = re.compile(r"^### ([\w-]+)\n(.*?)(?=^### |\Z)", re.S | re.M)
EXAMPLE_RE = re.compile(r"^(Fails|Passes):\n```(\w+)\n(.*?)\n```", re.S | re.M)
PANEL_BOARD = {
    "title": "t",
    "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
}


def sections() -> dict[str, dict[str, tuple[str, str]]]:
    out = {}
    for name, body in SECTION_RE.findall(DOC.read_text()):
        out[name] = {kind: (lang, text) for kind, lang, text in EXAMPLE_RE.findall(body)}
    return out


# what a check learns from a live Prometheus, as its section says the examples assume
LIVE = {"classic-on-native": {"native_histograms": frozenset({"vllm:e2e_request_latency_seconds"})}}


def lint_example(tmp_path, lang: str, text: str, check: str = ""):
    ctx = LintContext(catalog.load(), scrape_interval_s=30, min_range_s=120, **LIVE.get(check, {}))
    if lang == "promql":
        return runner.run([], [text], ctx, runner.select())
    if lang == "json":
        data = json.loads(text)
        if "targets" in data:  # one panel: inside a dashboard with a datasource variable
            data = {**PANEL_BOARD, "panels": [{"gridPos": {"x": 0, "y": 0, "w": 24, "h": 8}, **data}]}
        text = json.dumps(data)
    path = tmp_path / f"example.{lang}"
    path.write_text(text)
    return runner.run([str(path)], [], ctx, runner.select())


def test_every_check_has_a_section_with_both_examples():
    found = sections()
    assert list(found) == list(ALL), "sections in the order of checks/__init__.py"
    for name, examples in found.items():
        assert set(examples) == {"Fails", "Passes"}, name


@pytest.mark.parametrize("check", list(ALL))
def test_the_examples_do_what_the_page_says(tmp_path, check):
    examples = sections()[check]
    bad = lint_example(tmp_path, *examples["Fails"], check)
    assert check in {f.check for f in bad.findings}, [f.message for f in bad.findings]
    good = lint_example(tmp_path, *examples["Passes"], check)
    assert good.findings == [], [f"[{f.check}] {f.message}" for f in good.findings]
