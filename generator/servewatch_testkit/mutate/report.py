"""The mutation report: counts, the kill rate, and every survivor with why it survives.

Why a survivor survives is a human's call, kept in two committed files beside the report:
  equivalent.yaml   mutant id -> why no test can tell it from the real rule (it is reported as such)
  gaps.yaml         mutant id -> the test that would kill it and who adds it (a known, planned gap)
A note whose id is no longer generated, or whose mutant is now killed, is reported as stale.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from .mutants import Mutant, Unmutated
from .operators import OPERATORS, Operator
from .runner import Result

TARGET = 0.95


@dataclass(frozen=True)
class Notes:
    equivalent: dict[str, str]
    gaps: dict[str, str]

    @classmethod
    def load(cls, folder: Path) -> Notes:
        def read(name: str) -> dict[str, str]:
            path = folder / name
            if not path.exists():
                return {}
            data = yaml.safe_load(path.read_text()) or {}
            if not isinstance(data, dict):
                raise ValueError(f"{path}: expected a mapping of mutant id -> reason")
            return {str(k): " ".join(str(v).split()) for k, v in data.items()}

        return cls(read("equivalent.yaml"), read("gaps.yaml"))

    def without_rules(self, keys: set[str]) -> Notes:
        """These notes less those on the mutants of these rules: the rules of another build (the
        configured one of --specs, or the default one), whose notes are judged in that build's report."""

        def keep(notes: dict[str, str]) -> dict[str, str]:
            return {i: why for i, why in notes.items() if rule_of(i) not in keys}

        return Notes(keep(self.equivalent), keep(self.gaps))


def rule_of(mutant_id: str) -> str:
    """The rule key of a mutant id `<rule key>/<operator>/<digits>`."""
    return mutant_id.rsplit("/", 2)[0]


FIRST_KILL = " (each mutant stopped at the first test file that failed)."


def outcome(m: Mutant, r: Result, notes: Notes) -> str:
    """killed | equivalent | known-gap | survived | invalid | timeout | error"""
    if r.status == "survived":
        if m.id in notes.equivalent:
            return "equivalent"
        if m.id in notes.gaps:
            return "known-gap"
    return r.status


def summarize(mutants: list[Mutant], results: dict[str, Result], notes: Notes) -> dict:
    """Counts over the mutants that ran; `mutants` is every generated one (for stale notes)."""
    run = [m for m in mutants if m.id in results]
    outcomes = {m.id: outcome(m, results[m.id], notes) for m in run}
    counts = Counter(outcomes.values())
    valid = sum(n for k, n in counts.items() if k != "invalid")
    killed = counts["killed"]
    equivalent = counts["equivalent"]
    ids = {m.id for m in mutants}
    stale = []
    for i in sorted({**notes.equivalent, **notes.gaps}):
        if i not in ids:
            stale.append((i, "no such mutant any more"))
        elif i in results and results[i].status != "survived":
            stale.append((i, f"noted as surviving, but {results[i].status}"))
    return {
        "total": len(run),
        "valid": valid,
        "killed": killed,
        "killed_by_incidents_only": sum(
            1 for i, o in outcomes.items() if o == "killed" and results[i].stage == "incidents"
        ),
        "survived": counts["equivalent"] + counts["known-gap"] + counts["survived"],
        "equivalent": equivalent,
        "known_gap": counts["known-gap"],
        "undocumented": counts["survived"],
        "invalid": counts["invalid"],
        "timeout": counts["timeout"],
        "error": counts["error"],
        "kill_rate": round(killed / valid, 4) if valid else None,
        "score": round(killed / (valid - equivalent), 4) if valid > equivalent else None,
        "outcomes": outcomes,
        "stale_notes": stale,
    }


def _per_operator(mutants: list[Mutant], outcomes: dict[str, str]) -> list[tuple[Operator, Counter]]:
    rows = []
    for op in OPERATORS:
        c = Counter(outcomes[m.id] for m in mutants if m.operator == op.name and m.id in outcomes)
        if c:
            rows.append((op, c))
    return rows


def to_json(mutants: list[Mutant], results: dict[str, Result], notes: Notes, run_info: dict) -> str:
    s = summarize(mutants, results, notes)
    entries = []
    for m in mutants:
        if m.id not in results:
            continue
        r = results[m.id]
        entries.append(
            {
                "id": m.id,
                "rule": m.rule.key,
                "file": f"rules/{m.rule.file}",
                "operator": m.operator,
                "description": m.description,
                "outcome": s["outcomes"][m.id],
                "killed_by": list(r.killed_by),
                "stage": r.stage,
                "detail": r.detail,
                "reason": notes.equivalent.get(m.id) or notes.gaps.get(m.id),
            }
        )
        if r.status != "killed":  # what a human needs to judge a survivor; killed ones: --list
            entries[-1].update({"expr": m.expr, "for": m.for_})
    summary = {k: v for k, v in s.items() if k != "outcomes"}
    return json.dumps({"run": run_info, "summary": summary, "mutants": entries}, indent=2) + "\n"


def results_from_json(text: str) -> tuple[dict, dict[str, Result]]:
    """(run info, results by id) of a report.json: what a later report can be combined from."""
    doc = json.loads(text)
    results = {}
    for e in doc["mutants"]:
        status = "survived" if e["outcome"] in ("equivalent", "known-gap") else e["outcome"]
        results[e["id"]] = Result(status, tuple(e["killed_by"]), e.get("detail") or "", stage=e["stage"])
    return doc["run"], results


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(
    mutants: list[Mutant],
    results: dict[str, Result],
    notes: Notes,
    run_info: dict,
    unmutated: list[Unmutated] = (),
) -> str:
    s = summarize(mutants, results, notes)
    by_id = {m.id: m for m in mutants}
    verdict = "meets" if s["kill_rate"] is not None and s["kill_rate"] >= TARGET else "misses"
    out = [
        "# Mutation report",
        "",
        "Generated by `make mutate` (generator/servewatch_testkit/mutate/); do not edit by hand. Why a",
        "survivor survives lives in equivalent.yaml (no test can tell it apart) and gaps.yaml (a test is",
        "missing and planned).",
        "",
        f"Run: {run_info.get('date', '?')}, {run_info.get('tests', '?')}, {run_info.get('jobs', '?')} jobs, "
        f"{run_info.get('wall_s', '?')} s{FIRST_KILL if run_info.get('first_kill') else '.'}",
        f"Mutants run: {run_info.get('selection', '?')}. Machine: {run_info.get('machine', '?')}.",
        "",
        "| mutants | valid | killed | survived | of which equivalent | known gap | undocumented | invalid |"
        " timeout/error |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {s['total']} | {s['valid']} | {s['killed']} | {s['survived']} | {s['equivalent']} | "
        f"{s['known_gap']} | {s['undocumented']} | {s['invalid']} | {s['timeout'] + s['error']} |",
        "",
        f"Kill rate (killed / valid): **{_pct(s['kill_rate'])}**, which {verdict} the {_pct(TARGET)} target. "
        f"Score without the documented equivalents (killed / (valid - equivalent)): {_pct(s['score'])}.",
        f"Killed by the promtool tests: {s['killed'] - s['killed_by_incidents_only']}; only by the incident "
        f"tests on real Prometheus: {s['killed_by_incidents_only']}.",
        "",
        "## By operator",
        "",
        "| operator | what it breaks | mutants | killed | equivalent | known gap | undocumented | invalid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for op, c in _per_operator(mutants, s["outcomes"]):
        out.append(
            f"| {op.name} | {_cell(op.summary)} | {sum(c.values())} | {c['killed']} | {c['equivalent']} | "
            f"{c['known-gap']} | {c['survived']} | {c['invalid']} |"
        )
    sections = [
        ("survived", "Undocumented survivors (a test is missing, or a note is)"),
        ("known-gap", "Known gaps (the test that would kill each is planned)"),
        ("equivalent", "Equivalent survivors"),
        ("timeout", "Timed out (undecided)"),
        ("error", "Errors (the harness, not the mutant)"),
        ("invalid", "Invalid mutants (not run)"),
    ]
    for kind, title in sections:
        ids = [i for i, o in s["outcomes"].items() if o == kind]
        if not ids:
            continue
        out += ["", f"## {title} ({len(ids)})", "", "| id | rule | change | reason |", "|---|---|---|---|"]
        for i in ids:
            m, r = by_id[i], results[i]
            reason = notes.equivalent.get(i) or notes.gaps.get(i) or r.detail or ""
            out.append(f"| `{i}` | {_cell(m.rule.key)} | {_cell(m.description)} | {_cell(reason)} |")
    if s["stale_notes"]:
        out += ["", "## Stale notes (fix equivalent.yaml / gaps.yaml)", ""]
        out += [f"- `{i}`: {why}" for i, why in s["stale_notes"]]
    if unmutated:
        out += ["", "## Rules not mutated", ""]
        out += [f"- {u.rule.key}: {u.reason}" for u in unmutated]
    return "\n".join(out) + "\n"
