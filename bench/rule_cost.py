"""One evaluation of every generated rule group, rule by rule, as instant queries.

Prometheus evaluates a group's rules one after the other, each as an instant query at the
evaluation time, so a group's cost is the sum of its rules' and the rule set's the sum of its
groups'. Alerts that read recording rules need those recorded series: the caller backfills them
(``LocalPrometheus(rule_files=...)``) before measuring.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .promstats import Runner


def rule_groups(rules_dir: Path) -> list[dict]:
    """``[{file, name, rules: [{kind, name, expr}]}]`` of every ``*.rules.yaml`` in ``rules_dir``."""
    files = sorted(rules_dir.glob("*.rules.yaml"))
    if not files:
        raise ValueError(f"no *.rules.yaml in {rules_dir}: run `servewatch generate` first")
    groups = []
    for f in files:
        for g in yaml.safe_load(f.read_text()).get("groups", []):
            rules = [
                {
                    "kind": "record" if "record" in r else "alert",
                    "name": r.get("record") or r["alert"],
                    "expr": r["expr"],
                }
                for r in g.get("rules", [])
            ]
            groups.append({"file": f.name, "name": g["name"], "rules": rules})
    return groups


def measure(runner: Runner, groups: list[dict], at: float) -> dict:
    """Per rule, per group and in total: samples touched and evaluation time at ``at``."""
    out = []
    for g in groups:
        rules = [
            {"kind": r["kind"], "name": r["name"], **runner.instant(r["expr"], at).as_dict()}
            for r in g["rules"]
        ]
        out.append({"file": g["file"], "name": g["name"], "rules": rules, **_sum(rules)})
    return {"groups": out, "total": _sum(out)}


def _sum(rows: list[dict]) -> dict:
    return {
        "samples": sum(r["samples"] for r in rows),
        "peak_samples": max((r["peak_samples"] for r in rows), default=0),
        "eval_ms": round(sum(r["eval_ms"] for r in rows), 3),
    }


__all__ = ["rule_groups", "measure"]
