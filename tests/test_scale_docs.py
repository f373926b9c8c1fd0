"""docs/scale.md's configuration examples are accepted by the real tools, and what it says a tool
refuses, the tool refuses."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from servewatch import tools

pytestmark = pytest.mark.integration


def blocks(repo, first_line: str) -> str:
    """The ```yaml block of docs/scale.md whose first line is `first_line`."""
    text = (repo / "docs" / "scale.md").read_text()
    found = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith(first_line)]
    assert len(found) == 1, first_line
    return found[0]


def run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.tools("promtool")
def test_the_agent_and_central_configs_pass_promtool(repo, tmp_path):
    promtool = tools.find("promtool")
    (tmp_path / "agent.yml").write_text(blocks(repo, "# agent.yml"))
    res = run(promtool, "check", "config", "--agent", tmp_path / "agent.yml")
    assert res.returncode == 0, res.stdout + res.stderr
    shutil.copytree(repo / "rules", tmp_path / "rules")
    (tmp_path / "central.yml").write_text(blocks(repo, "# central.yml"))
    res = run(promtool, "check", "config", tmp_path / "central.yml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 2 rule files found" in res.stdout


@pytest.mark.tools("promtool")
def test_rule_query_concurrency_is_not_a_prometheus_3_5_setting(tmp_path):
    (tmp_path / "p.yml").write_text("global:\n  rule_query_concurrency: 4\n")
    res = run(tools.find("promtool"), "check", "config", tmp_path / "p.yml")
    assert res.returncode == 1 and "field rule_query_concurrency not found" in res.stdout + res.stderr


@pytest.mark.tools("vmagent")
def test_the_stream_aggregation_config_passes_vmagent(repo, tmp_path):
    aggr = tmp_path / "aggr.yml"
    aggr.write_text(blocks(repo, "# -remoteWrite.streamAggr.config"))
    vmagent = tools.find("vmagent")
    args = ["-dryRun", "-remoteWrite.url=http://127.0.0.1:1/api/v1/write"]
    res = run(vmagent, *args, f"-remoteWrite.streamAggr.config={aggr}", cwd=tmp_path)
    assert res.returncode == 0 and "all the configs are ok" in res.stdout + res.stderr
    aggr.write_text(aggr.read_text().replace("outputs: [total]", "outputs: [totals]"))
    res = run(vmagent, *args, f"-remoteWrite.streamAggr.config={aggr}", cwd=tmp_path)
    assert res.returncode != 0 and 'unsupported output="totals"' in res.stdout + res.stderr  # it does check
