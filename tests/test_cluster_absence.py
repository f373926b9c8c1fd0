"""What stops being monitored raises an alert per cluster (DESIGN.md invariant 11): with a cluster label
configured, one cluster losing all its exporters, or one cluster's namespace losing all its vLLM
targets, fires for that cluster while the others keep theirs; `absent()` alone would stay silent."""

from __future__ import annotations

from pathlib import Path

import pytest

SCENARIOS = (Path(__file__).parent / "scenarios" / "clusters.yaml").read_text()


@pytest.mark.tools("promtool")
def test_a_cluster_that_loses_its_targets_fires_for_that_cluster(specs_with, tmp_path, servewatch):
    specs = specs_with(
        {
            "config.yaml": [("cluster_label: null", "cluster_label: k8s_cluster")],
            "scenarios/clusters.yaml": SCENARIOS,
        }
    )
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    rules = (out / "rules" / "gpu.rules.yaml").read_text()
    assert "count by (k8s_cluster) (up{" in rules  # the memory of which clusters had exporters
    res = servewatch("test", "--specs", specs, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr


def test_without_a_cluster_label_absent_alone_covers_the_one_cluster(default_build):
    _, files = default_build
    rules = files["rules/gpu.rules.yaml"]
    assert "cluster:dcgm_up_targets:count" not in rules and 'absent(up{job=~".*dcgm.*"})' in rules
