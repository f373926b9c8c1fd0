"""The Thanos Ruler and Mimir rule files hold exactly the groups of the plain rule files, in the shape
those rulers read. Neither thanos nor mimirtool is installable here (not in Debian, not on PyPI), so
their formats are checked structurally against what their docs define (docs/scale.md), and the
bodies by promtool 3.5 once the ruler-specific keys are taken off."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from servewatch import tools
from servewatch.render import rules as render_rules

FAMILIES = ("gpu", "vllm")
# Prometheus' rule group fields, and the one Thanos Ruler adds
GROUP_KEYS = {"name", "interval", "query_offset", "limit", "labels", "rules"}
THANOS_STRATEGIES = {"warn", "abort"}
RULE_KEYS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
# mimirtool / the Mimir ruler's default limits per tenant (operators often raise them)
MIMIR_RULES_PER_GROUP, MIMIR_GROUPS_PER_TENANT = 20, 70


def load(repo, path: str) -> dict:
    return yaml.safe_load((repo / path).read_text())


@pytest.mark.parametrize("family", FAMILIES)
def test_thanos_groups_are_the_plain_groups_with_a_partial_response_strategy(repo, family):
    plain = load(repo, render_rules.plain_path(family))
    thanos = load(repo, render_rules.thanos_path(family))
    assert set(thanos) == {"groups"}
    assert len(thanos["groups"]) == len(plain["groups"]) > 0
    for ours, theirs in zip(plain["groups"], thanos["groups"], strict=True):
        assert set(theirs) - GROUP_KEYS == {"partial_response_strategy"}
        assert theirs["partial_response_strategy"] in THANOS_STRATEGIES
        assert theirs["partial_response_strategy"] == "abort"  # an unreachable store fails the evaluation
        assert {k: v for k, v in theirs.items() if k != "partial_response_strategy"} == ours
        for rule in theirs["rules"]:
            assert set(rule) <= RULE_KEYS and ("record" in rule) != ("alert" in rule)


@pytest.mark.parametrize("family", FAMILIES)
def test_mimir_namespace_holds_the_plain_groups_within_the_default_limits(repo, family):
    plain = load(repo, render_rules.plain_path(family))
    mimir = load(repo, render_rules.mimir_path(family))
    assert set(mimir) == {"namespace", "groups"}
    assert mimir["namespace"] == f"servewatch-{family}"
    assert mimir["groups"] == plain["groups"]
    names = [g["name"] for g in mimir["groups"]]
    assert len(names) == len(set(names))  # a ruler keys a group by namespace and name
    assert all(set(g) <= GROUP_KEYS for g in mimir["groups"])
    assert all(len(g["rules"]) <= MIMIR_RULES_PER_GROUP for g in mimir["groups"])
    tenant_groups = sum(len(load(repo, render_rules.mimir_path(f))["groups"]) for f in FAMILIES)
    assert tenant_groups <= MIMIR_GROUPS_PER_TENANT


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("family", FAMILIES)
def test_the_ruler_files_bodies_pass_promtool(repo, tmp_path, family):
    """promtool refuses Thanos' extra group field (it is Thanos', not Prometheus'), and accepts the
    same file without it; the Mimir file's groups likewise without the namespace."""
    promtool = str(tools.find("promtool"))
    thanos = repo / render_rules.thanos_path(family)
    refused = subprocess.run([promtool, "check", "rules", str(thanos)], capture_output=True, text=True)
    assert (
        refused.returncode == 1 and "partial_response_strategy not found" in refused.stdout + refused.stderr
    )
    bodies = {
        "thanos.yaml": {
            "groups": [
                {k: v for k, v in g.items() if k != "partial_response_strategy"}
                for g in load(repo, render_rules.thanos_path(family))["groups"]
            ]
        },
        "mimir.yaml": {"groups": load(repo, render_rules.mimir_path(family))["groups"]},
    }
    for name, body in bodies.items():
        (tmp_path / name).write_text(yaml.safe_dump(body, sort_keys=False))
    res = subprocess.run(
        [promtool, "check", "rules", "--lint=all", "--lint-fatal", *(str(tmp_path / n) for n in bodies)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
