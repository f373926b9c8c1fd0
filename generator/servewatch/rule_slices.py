"""The rules a promtool unit test can observe, so it runs against those alone.

promtool evaluates every rule of every rule file a test file names, at every step of every test, while
a test only observes the alerts it names (`alert_rule_test`) and the series its expressions read
(`promql_expr_test`). Those depend on the rules that write them, and, through the series those rules
read, on the rules that write those: the test's closure. Evaluating only the closure gives the same
samples at the same steps (rule order within a group and the order of groups are kept), so the same
verdict, in less time; and a test whose closure did not change keeps its verdict when another rule is
tuned (verdicts.py keys a run by the bytes it reads).

What a name cannot be read from, the closure cannot follow: a selector without a literal metric name
(`{__name__=~"..."}`), or an expression that does not parse. Such a test file runs whole. An alert's
templates may run queries (`{{ query "..." }}`): every recorded name that appears in them joins the
closure, which can only take in more rules than needed, never fewer.

verify.py runs each slice (the tests that share a closure) as a test file of its own beside rule files
that hold the closure, and confirms any failure on the whole file before reporting it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import promql_parser as pp

from .promql import tree

ALERT_SERIES = ("ALERTS", "ALERTS_FOR_STATE")  # what every alerting rule writes
NAME_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


class Unsliceable(Exception):
    """A name the closure needs cannot be read: run the file whole."""


@dataclass(frozen=True)
class RuleSlice:
    """Tests of one file that observe the same rules, and those rules as rule-file documents."""

    tests: tuple[dict, ...]
    rule_docs: tuple[dict, ...]  # one per rule file of the test file, in its order
    group_names: frozenset[str]  # the groups that kept a rule

    @property
    def rules(self) -> int:
        return sum(len(g["rules"]) for d in self.rule_docs for g in d["groups"])


def read_names(expr: str) -> set[str]:
    """The metric names `expr` selects; Unsliceable when a selector names none literally."""
    try:
        node = pp.parse(expr)
    except (ValueError, TypeError) as e:
        raise Unsliceable(f"cannot parse {expr!r}: {e}") from e
    out = set()
    for sel in tree.selectors(node):
        name = sel.name or _literal_name(sel)
        if not name:
            raise Unsliceable(f"a selector without a metric name in {expr!r}")
        out.add(name)
    return out


def _literal_name(sel) -> str | None:
    for m in sel.matchers.matchers:
        if m.name == "__name__" and str(m.op) in ("MatchOp.Equal", "="):
            return m.value
    return None


def slices(doc: dict, rule_docs: list[dict]) -> list[RuleSlice]:
    """The test file `doc`'s tests grouped by the rules they observe, in the order each group's first
    test comes; Unsliceable when a name cannot be followed."""
    rules = _Rules(rule_docs)
    groups: dict[frozenset, list[dict]] = {}
    for test in doc.get("tests") or []:
        groups.setdefault(rules.closure(*_observed(test)), []).append(test)
    return [RuleSlice(tuple(tests), *rules.keep(closure)) for closure, tests in groups.items()]


def _observed(test: dict) -> tuple[set[str], set[str]]:
    """(alert names, series names) a test's assertions read."""
    alerts = {case.get("alertname") for case in test.get("alert_rule_test") or []}
    names: set[str] = set()
    for case in test.get("promql_expr_test") or []:
        names |= read_names(str(case.get("expr", "")))
    return {a for a in alerts if a}, names


class _Rules:
    """The rules of a test file's rule files, indexed by what they write."""

    def __init__(self, rule_docs: list[dict]):
        self.docs = rule_docs
        # (file index, group index, rule index) -> rule
        self.all = {
            (f, g, r): rule
            for f, d in enumerate(rule_docs)
            for g, group in enumerate((d or {}).get("groups") or [])
            for r, rule in enumerate(group.get("rules") or [])
        }
        self.writers: dict[str, list[tuple]] = {}
        for at, rule in self.all.items():
            for name in [rule["record"]] if "record" in rule else ALERT_SERIES:
                self.writers.setdefault(name, []).append(at)
        self._reads: dict[tuple, set[str]] = {}

    def reads(self, at: tuple) -> set[str]:
        if at not in self._reads:
            rule = self.all[at]
            names = read_names(str(rule.get("expr", "")))
            for text in [*(rule.get("annotations") or {}).values(), *(rule.get("labels") or {}).values()]:
                if "query" in str(text):  # a template query: any recorded name it spells
                    names |= {w for w in NAME_RE.findall(str(text)) if w in self.writers}
            self._reads[at] = names
        return self._reads[at]

    def closure(self, alerts: set[str], names: set[str]) -> frozenset:
        keep = {at for at, rule in self.all.items() if rule.get("alert") in alerts}
        todo = set(names).union(*(self.reads(at) for at in keep))
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            seen.add(name)
            for at in self.writers.get(name, ()):
                if at not in keep:
                    keep.add(at)
                    todo |= self.reads(at) - seen
        return frozenset(keep)

    def keep(self, closure: frozenset) -> tuple[tuple[dict, ...], frozenset[str]]:
        docs, names = [], set()
        for f, d in enumerate(self.docs):
            groups = []
            for g, group in enumerate((d or {}).get("groups") or []):
                kept = [rule for r, rule in enumerate(group.get("rules") or []) if (f, g, r) in closure]
                if kept:
                    groups.append({**group, "rules": kept})
                    names.add(group.get("name"))
            docs.append({"groups": groups})
        return tuple(docs), frozenset(names)
