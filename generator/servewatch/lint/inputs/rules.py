"""Prometheus rule groups (plain files, PrometheusRule spec, Mimir/Thanos namespace files) -> Rules."""

from __future__ import annotations

from ..findings import LintLocation
from ..subjects import Rule, parse_query
from . import comments
from .documents import Doc, value_at


def is_rule_groups(groups) -> bool:
    """A list of Prometheus rule groups (Grafana-managed alert groups have `data`, not `expr`)."""
    if not isinstance(groups, list) or not groups:
        return False
    rules = [r for g in groups if isinstance(g, dict) for r in (g.get("rules") or []) if isinstance(r, dict)]
    return all(isinstance(g, dict) and "name" in g for g in groups) and all(
        ("alert" in r or "record" in r) for r in rules
    )


def read_groups(
    doc: Doc, groups_path: tuple, file: str, form: str, known_checks: set[str]
) -> tuple[list[Rule], list[tuple[int | None, str]]]:
    """Rules under `groups_path` of `doc`, and (line, problem) for what cannot be read."""
    groups = value_at(doc.data, groups_path)
    problems: list[tuple[int | None, str]] = []
    suppressions = comments.scan(doc.text, doc.shift, known_checks) if doc.text else comments.Suppressions()
    problems += suppressions.problems
    found = []
    for gi, group in enumerate(groups):
        for ri, raw in enumerate(group.get("rules") or []):
            path = groups_path + (gi, "rules", ri)
            if not isinstance(raw, dict) or ("expr" not in raw):
                problems.append((doc.line_of(path), "a rule without expr"))
                continue
            found.append((path, group, raw))
    starts = comments.next_starts([doc.line_of(p) or 0 for p, _, _ in found])
    lines = doc.text.splitlines()
    rules = []
    for path, group, raw in found:
        kind = "alert" if "alert" in raw else "record"
        name = str(raw.get(kind))
        start = doc.line_of(path) or 0
        disabled = suppressions.file_wide | suppressions.for_rule(start, starts[start], lines, doc.shift)
        disabled = frozenset(disabled)
        where = f"{kind} {name}"
        expr_loc = LintLocation(file, doc.text_line_of(path + ("expr",)), None, where)
        field_lines = {"for": doc.line_of(path + ("for",))}
        for section in ("labels", "annotations"):
            for key in raw.get(section) or {}:
                field_lines[f"{section}.{key}"] = doc.line_of(path + (section, key))
        rules.append(
            Rule(
                kind=kind,
                name=name,
                query=parse_query(str(raw["expr"]), expr_loc, "rule", disabled=disabled),
                location=LintLocation(file, start, None, where),
                form=form,
                group=str(group.get("name", "")),
                for_=str(raw["for"]) if raw.get("for") is not None else None,
                labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
                annotations={str(k): str(v) for k, v in (raw.get("annotations") or {}).items()},
                field_lines={k: v for k, v in field_lines.items() if v},
                disabled=disabled,
            )
        )
    return rules, problems
