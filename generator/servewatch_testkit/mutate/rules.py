"""The generated rule files (rules/*.rules.yaml) as a flat list of rules, each with a readable unique key."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from servewatch import yamlio


@dataclass(frozen=True)
class Rule:
    file: str  # name under rules/, e.g. vllm.rules.yaml
    group: int  # index of its group in the file
    index: int  # index in the group's rules
    kind: str  # alert | record
    name: str
    labels: tuple[tuple[str, str], ...]
    expr: str
    for_: str | None
    key: str  # unique and readable: the name, with its static labels for records that share a name


def _base_key(kind: str, name: str, labels: tuple[tuple[str, str], ...]) -> str:
    if kind == "record" and labels:
        return name + "[" + ",".join(f"{k}={v}" for k, v in labels) + "]"
    return name


def load(rules_dir: Path) -> list[Rule]:
    """Every rule of rules_dir/*.rules.yaml, in file order (files sorted by name)."""
    raw = []
    for path in sorted(rules_dir.glob("*.rules.yaml")):
        doc = yamlio.load(path.read_text()) or {}
        for g, group in enumerate(doc.get("groups") or []):
            for i, rule in enumerate(group.get("rules") or []):
                kind = "alert" if "alert" in rule else "record"
                labels = tuple(sorted((str(k), str(v)) for k, v in (rule.get("labels") or {}).items()))
                if kind == "alert":
                    labels = ()  # severity and friends never distinguish two alerts
                raw.append((path.name, g, i, kind, rule[kind], labels, rule["expr"], rule.get("for")))
    seen: Counter[str] = Counter()
    out = []
    for file, g, i, kind, name, labels, expr, for_ in raw:
        key = _base_key(kind, name, labels)
        seen[key] += 1
        if seen[key] > 1:
            key += f"#{seen[key]}"
        out.append(Rule(file, g, i, kind, name, labels, expr, for_, key))
    return out
