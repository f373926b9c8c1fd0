"""The fixture corpus: for every check a failing file and its fixed twin, reproducing the mistakes of
the rules and dashboards people copy (shared/reference: vLLM's and NVIDIA's examples, community
rules). Each failing file must be reported where its `# expect: <check>` markers say; each fixed
twin must lint clean with every check on; whole example files report exactly their known mistakes.
A check that needs a live Prometheus (`servewatch lint --prometheus`) finds what it would have learnt
from one in its folder's live.json, and both files are linted against it.
"""

import json
import re
import subprocess
from pathlib import Path

import pytest

from servewatch import catalog, tools
from servewatch.lint import runner
from servewatch.lint.checks import ALL
from servewatch.lint.facts import LintContext

FIXTURES = Path(__file__).parent / "lint_fixtures"
CHECK_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "examples")
EXPECT_RE = re.compile(r"#\s*expect:\s*([\w-]+)")


def live(folder: Path) -> dict:
    """What lint learns from the Prometheus a folder's fixtures are linted against (its live.json),
    as LintContext fields: e.g. the histograms it stores native (classic-on-native)."""
    path = folder / "live.json"
    return {k: frozenset(v) for k, v in json.loads(path.read_text()).items()} if path.exists() else {}


def lint_files(*paths):
    facts = {k: v for p in paths for k, v in live(Path(p).parent).items()}
    ctx = LintContext(catalog.load(), scrape_interval_s=30, min_range_s=120, **facts)
    return runner.run([str(p) for p in paths], [], ctx, runner.select())


def one(folder: Path, stem: str) -> Path:
    (found,) = folder.glob(f"{stem}.*")
    return found


def test_every_check_has_a_failing_and_a_fixed_fixture():
    assert {d.name for d in CHECK_DIRS} == set(ALL)
    for d in CHECK_DIRS:
        assert one(d, "bad") and one(d, "good")


@pytest.mark.parametrize("folder", CHECK_DIRS, ids=lambda p: p.name)
def test_the_failing_fixture_is_reported_where_marked(folder):
    bad = one(folder, "bad")
    findings = [f for f in lint_files(bad).findings if f.check == folder.name]
    assert findings, f"{bad}: {folder.name} not reported"
    if bad.suffix == ".yaml":
        lines = bad.read_text().splitlines()
        marked = {i for i, text in enumerate(lines, start=1) if EXPECT_RE.search(text)}
        assert {f.location.line for f in findings} == marked
        assert all(EXPECT_RE.search(lines[i - 1]).group(1) == folder.name for i in marked)
    else:  # dashboards: a JSON path and the line it is on
        for f in findings:
            assert f.location.path and f.location.line, f


@pytest.mark.parametrize("folder", CHECK_DIRS, ids=lambda p: p.name)
def test_the_fixed_twin_lints_clean(folder):
    good = one(folder, "good")
    result = lint_files(good)
    assert result.findings == [], "\n".join(
        f"{f.location.line}: [{f.check}] {f.message}" for f in result.findings
    )
    assert result.queries > 0


# Whole files shaped like the ones users start from, and exactly the mistakes each carries.
EXAMPLES = {
    # vLLM's prometheus_grafana/grafana.json (import form): names removed in 0.12 / 0.15, and
    # averages rate(_sum) / rate(_count) with implicit matching and no guard
    "vllm-grafana.json": {"metric-known", "explicit-matching", "guarded-division"},
    # vLLM's performance_statistics.json: rates over $__interval, pickers no query reads
    "vllm-performance-statistics.json": {
        "rate-interval",
        "variable-unused",
        "explicit-matching",
        "guarded-division",
    },
    # vLLM's query_statistics.json as the API's {"dashboard": ...}: seconds shown as ms, prompt
    # quantiles across models, left-over variables
    "vllm-query-statistics.json": {"unit-mismatch", "bucket-layout-mix", "variable-unused"},
    # NVIDIA's dcgm-exporter dashboard: Angular graph panels, MiB shown as decmbytes
    "dcgm-exporter-dashboard.json": {"angular-panel", "unit-mismatch"},
    # the GPU Operator's OpenShift recording rules: a field no default counters file exports
    "gpu-operator-rules.yaml": {"metric-known"},
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_files_report_their_known_mistakes(name):
    result = lint_files(FIXTURES / "examples" / name)
    assert {f.check for f in result.findings} == EXAMPLES[name]


def test_the_vllm_example_dashboard_no_longer_passes_silently(servewatch):
    res = servewatch("lint", "--specs", "", FIXTURES / "examples" / "vllm-grafana.json")
    assert res.returncode == 1
    assert "vllm:gpu_cache_usage_perc was removed" in res.stdout
    assert "use vllm:kv_cache_usage_perc" in res.stdout


@pytest.mark.tools("promtool")
def test_rule_fixtures_are_real_rule_files():
    """promtool accepts every rule fixture but the syntax one: lint finds what promtool cannot."""
    binary = tools.find("promtool")
    for path in sorted(p for d in CHECK_DIRS for p in d.glob("*.yaml")):
        res = subprocess.run([binary, "check", "rules", str(path)], capture_output=True, text=True)
        expected_ok = path.parent.name != "syntax" or path.stem.startswith("good")
        assert (res.returncode == 0) == expected_ok, f"{path}: {res.stdout}{res.stderr}"
