"""One evaluation of every generated rule group, rule by rule, as instant queries.

Prometheus evaluates a group's rules one after the other, each as an instant query at the
evaluation time, so a group's cost is the sum of its rules' and the rule set's the sum of its
groups'. Alerts that read recording rules need those recorded series: the caller backfills them
(``LocalPrometheus(rule_files=...)``) before measuring.

Three totals come out of the same per-rule numbers:

- ``eval_ms``: every group evaluated once (the sum of all rules);
- ``eval_ms_per_30s``: what the rule set costs per 30 s, each group weighted by 30 s / its interval
  (a group evaluated every minute counts half);
- ``floor``: the samples one evaluation must read at least: every raw selector of the rule set read
  once, over the longest range any rule reads it (``raw_reads``), measured on the same Prometheus;
  ``samples_per_30s`` weights each by the fastest group that reads it;
- ``concurrent_ms``: the wall time of one cycle when Prometheus runs groups side by side (it always
  does) and, with ``--enable-feature=concurrent-rule-eval``, each group's independent rules too: per
  group the slowest rule with no dependency, then the rules that have both one after the other, then
  the slowest of the rest (Prometheus 3.5's batches), and the slowest group; as if cores were
  unlimited.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import promql_parser as pp
import yaml

from servewatch.promql import tree
from servewatch.spec.schema import seconds
from servewatch_testkit.rule_stages import reads

from .promstats import Runner

RULE_INTERVAL_S = 30  # the global evaluation_interval the rules are written for


def rule_groups(rules_dir: Path) -> list[dict]:
    """``[{file, name, interval_s, rules: [{kind, name, expr}]}]`` of every ``*.rules.yaml`` in
    ``rules_dir``."""
    files = sorted(rules_dir.glob("*.rules.yaml"))
    if not files:
        raise ValueError(f"no *.rules.yaml in {rules_dir}: run `servewatch generate` first")
    return [g for f in files for g in parse(f.name, f.read_text())]


def parse(file: str, text: str) -> list[dict]:
    groups = []
    for g in yaml.safe_load(text).get("groups", []):
        rules = [
            {
                "kind": "record" if "record" in r else "alert",
                "name": r.get("record") or r["alert"],
                "expr": r["expr"],
            }
            for r in g.get("rules", [])
        ]
        interval = seconds(g["interval"]) if g.get("interval") else RULE_INTERVAL_S
        groups.append({"file": file, "name": g["name"], "interval_s": interval, "rules": rules})
    return groups


def rule_groups_at(repo: Path, ref: str, specs: Path | None = None) -> tuple[str, list[dict]]:
    """(commit, groups) of the ``rules/*.rules.yaml`` committed at git `ref` of `repo`; with `specs`,
    of the rules the generator of `ref` makes from that specs folder (the committed rules/ are the
    default build's: comparing them with a `--specs` build would compare two builds)."""

    def git(*args: str, text: bool = True):
        res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=text)
        if res.returncode:
            err = res.stderr if text else res.stderr.decode(errors="replace")
            raise SystemExit(f"git {' '.join(args)}: {err.strip()}")
        return res.stdout

    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}").strip()
    if specs is not None:
        return commit, _generated_at(commit, git("archive", commit, "generator", "specs", text=False), specs)
    names = [
        n
        for n in git("ls-tree", "--name-only", commit, "rules/").split()
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", n)
    ]
    if not names:
        raise SystemExit(f"no rules/*.rules.yaml at {ref}")
    return commit, [g for n in sorted(names) for g in parse(Path(n).name, git("show", f"{commit}:{n}"))]


def _generated_at(commit: str, generator_tar: bytes, specs: Path) -> list[dict]:
    """The rule groups `servewatch generate --specs specs` writes with the generator of `commit`
    (its generator/ and the default specs an `extends: servewatch` reads, as `git archive` gives them)."""
    with tempfile.TemporaryDirectory(prefix="bench-before-") as scratch:
        with tarfile.open(fileobj=io.BytesIO(generator_tar)) as tar:
            tar.extractall(scratch, filter="data")
        out = Path(scratch) / "out"
        env = {**os.environ, "PYTHONPATH": str(Path(scratch) / "generator")}
        cmd = [
            sys.executable,
            "-m",
            "servewatch",
            "generate",
            "--specs",
            str(specs.resolve()),
            "--out",
            str(out),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=scratch)
        if res.returncode:
            raise SystemExit(f"servewatch generate at {commit[:12]}: {(res.stderr or res.stdout).strip()}")
        return rule_groups(out / "rules")


def measure(runner: Runner, groups: list[dict], at: float) -> dict:
    """Per rule, per group and in total: samples touched and evaluation time at ``at``."""
    out = []
    for g in groups:
        rules = [
            {"kind": r["kind"], "name": r["name"], **runner.instant(r["expr"], at).as_dict()}
            for r in g["rules"]
        ]
        measured = {"file": g["file"], "name": g["name"], "interval_s": g.get("interval_s", RULE_INTERVAL_S)}
        out.append({**measured, "rules": rules, **_sum(rules)})
        out[-1]["concurrent_ms"] = round(concurrent_ms(g["rules"], rules), 3)
    total = _sum(out)
    total["eval_ms_per_30s"] = round(sum(g["eval_ms"] * RULE_INTERVAL_S / g["interval_s"] for g in out), 3)
    total["concurrent_ms"] = max((g["concurrent_ms"] for g in out), default=0.0)
    total["samples_per_30s"] = round(sum(g["samples"] * RULE_INTERVAL_S / g["interval_s"] for g in out))
    return {"groups": out, "total": total}


def raw_reads(groups: list[dict]) -> list[dict]:
    """The raw series the rule set reads: one entry per selector (metric, matchers, offset) that no
    rule records, with the longest range a rule reads it over (0: an instant read) and the shortest
    interval of the groups that read it. A selector whose matchers include another's of the same
    metric and offset reads a subset of it and is left out."""
    records = {r["name"] for g in groups for r in g["rules"] if r["kind"] == "record"}
    found: dict[tuple, dict] = {}
    for g in groups:
        for r in g["rules"]:
            for node, parents in tree.walk(pp.parse(r["expr"])):
                if not isinstance(node, pp.VectorSelector) or node.name in records or not node.name:
                    continue
                window = _window(parents)
                matchers = frozenset(
                    tree.matcher_text(m) for m in node.matchers.matchers if m.name != "__name__"
                )
                key = (node.name, matchers, node.offset.total_seconds() if node.offset else 0.0)
                seen = found.setdefault(key, {"range_s": 0.0, "interval_s": g["interval_s"]})
                seen["range_s"] = max(seen["range_s"], window)
                seen["interval_s"] = min(seen["interval_s"], g["interval_s"])
    kept = {
        key: v
        for key, v in found.items()
        if not any(o != key and o[0] == key[0] and o[2] == key[2] and o[1] < key[1] for o in found)
    }
    out = []
    for (name, matchers, offset), v in sorted(
        kept.items(), key=lambda kv: (kv[0][0], sorted(kv[0][1]), kv[0][2])
    ):
        selector = f"{name}{{{', '.join(sorted(matchers))}}}" if matchers else name
        # wider matchers cover the narrower ones they subsume, so take the widest range among them
        window = max(
            [v["range_s"]]
            + [w["range_s"] for o, w in found.items() if o[0] == name and o[2] == offset and matchers < o[1]]
        )
        interval = min(
            [v["interval_s"]]
            + [
                w["interval_s"]
                for o, w in found.items()
                if o[0] == name and o[2] == offset and matchers < o[1]
            ]
        )
        out.append({"selector": selector, "range_s": window, "offset_s": offset, "interval_s": interval})
    return out


def _window(parents: tuple) -> float:
    """The range a selector is read over: its own `[range]`, or the subquery it sits in."""
    for node in reversed(parents):
        if isinstance(node, pp.MatrixSelector):
            return node.range.total_seconds()
        if isinstance(node, pp.SubqueryExpr):
            return node.range.total_seconds()
    return 0.0


def floor(runner: Runner, groups: list[dict], at: float) -> dict:
    """The samples every raw read of `raw_reads` loads once, measured at ``at``."""
    reads_ = []
    for read in raw_reads(groups):
        offset = f" offset {read['offset_s']:g}s" if read["offset_s"] else ""
        if read["range_s"]:  # loads what the selector loads, answers one number per series
            expr = f"count_over_time({read['selector']}[{read['range_s']:g}s]{offset})"
        else:
            expr = f"count({read['selector']}{offset})"
        reads_.append({**read, "samples": runner.instant(expr, at).samples})
    return {
        "reads": reads_,
        "samples": sum(r["samples"] for r in reads_),
        "samples_per_30s": round(sum(r["samples"] * RULE_INTERVAL_S / r["interval_s"] for r in reads_)),
    }


def concurrent_ms(rules: list[dict], costs: list[dict]) -> float:
    """One group's evaluation with its independent rules run side by side (Prometheus 3.5's
    concurrent-rule-eval batches), from each rule's own eval time."""
    records = {r["name"] for r in rules if r["kind"] == "record"}
    deps = [reads(r["expr"]) & records - {r["name"]} for r in rules]
    read_by_others = {name for d in deps for name in d}
    first, middle, last = [], [], []
    for rule, dep, cost in zip(rules, deps, costs, strict=True):
        has_dependents = rule["kind"] == "record" and rule["name"] in read_by_others
        if not dep:
            first.append(cost["eval_ms"])
        elif has_dependents:
            middle.append(cost["eval_ms"])
        else:
            last.append(cost["eval_ms"])
    return max(first, default=0.0) + sum(middle) + max(last, default=0.0)


def _sum(rows: list[dict]) -> dict:
    return {
        "samples": sum(r["samples"] for r in rows),
        "peak_samples": max((r["peak_samples"] for r in rows), default=0),
        "eval_ms": round(sum(r["eval_ms"] for r in rows), 3),
    }


__all__ = ["concurrent_ms", "floor", "measure", "parse", "raw_reads", "rule_groups", "rule_groups_at"]
