"""The rules a promtool unit test can observe, so it runs against those alone.

promtool evaluates every rule of every rule file a test file names, at every step of every test, while
a test only observes the alerts it names (`alert_rule_test`) and the series its expressions read
(`promql_expr_test`). Those depend on the rules that write them, and, through the series those rules
read, on the rules that write those: the test's closure. Evaluating only the closure gives the same
samples at the same steps (rule order within a group and the order of groups are kept), so the same
verdict, in less time; and a test whose closure did not change keeps its verdict when another rule is
tuned (verdicts.py keys a run by the bytes it reads).

A rule whose own labels contradict what a reader selects is not followed: the SLO groups all
write `slo:sli_error:ratio_rate1h`, each with its own `slo` label, and a test of one SLO reads
`{slo="vllm-ttft"}`, so the other SLOs' groups stay out of its slice. Likewise `ALERTS{alertname=
"X"}` is written by alert X alone.

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


# A series a rule or test reads: its metric name and the label values it requires (equality matchers).
Read = tuple[str, frozenset[tuple[str, str]]]


def read_names(expr: str) -> set[str]:
    """The metric names `expr` selects; Unsliceable when a selector names none literally."""
    return {name for name, _ in read_selectors(expr)}


def read_selectors(expr: str) -> set[Read]:
    """What `expr` selects: each selector's metric name and the label values it requires;
    Unsliceable when a selector names no metric literally."""
    try:
        node = pp.parse(expr)
    except (ValueError, TypeError) as e:
        raise Unsliceable(f"cannot parse {expr!r}: {e}") from e
    out = set()
    for sel in tree.selectors(node):
        equal = {(m.name, m.value) for m in sel.matchers.matchers if str(m.op) in ("MatchOp.Equal", "=")}
        name = sel.name or dict(equal).get("__name__")
        if not name:
            raise Unsliceable(f"a selector without a metric name in {expr!r}")
        out.add((name, frozenset((k, v) for k, v in equal if k != "__name__")))
    return out


def slices(doc: dict, rule_docs: list[dict]) -> list[RuleSlice]:
    """The test file `doc`'s tests grouped by the rules they observe, in the order each group's first
    test comes; Unsliceable when a name cannot be followed."""
    rules = _Rules(rule_docs)
    groups: dict[frozenset, list[dict]] = {}
    for test in doc.get("tests") or []:
        groups.setdefault(rules.closure(*_observed(test)), []).append(test)
    return [RuleSlice(tuple(tests), *rules.keep(closure)) for closure, tests in groups.items()]


def _observed(test: dict) -> tuple[set[str], set[Read]]:
    """(alert names, series) a test's assertions read."""
    alerts = {case.get("alertname") for case in test.get("alert_rule_test") or []}
    reads: set[Read] = set()
    for case in test.get("promql_expr_test") or []:
        reads |= read_selectors(str(case.get("expr", "")))
    return {a for a in alerts if a}, reads


# `printf "<format>" <args> | query` in a Go template; the args are literals or $labels.x
PRINTF_QUERY_RE = re.compile(r'printf "((?:[^"\\]|\\.)*)"((?:\s+(?:"[^"\\]*"|\$[\w.]+))*)\s*\|\s*query')
TEMPLATE_ARG_RE = re.compile(r'"[^"\\]*"|\$[\w.]+')
UNKNOWN = "\x00"  # a label value known only when the alert fires


def _printf_reads(fmt: str, values: list[str | None]) -> set[Read]:
    """What the query `fmt` % values reads, where a None value is unknown: a matcher on it requires
    nothing."""
    if "\\" in fmt or fmt.count("%q") != len(values) or fmt.replace("%q", "").count("%"):
        raise Unsliceable(f"a template query servewatch cannot follow: {fmt!r}")
    expr = fmt
    for value in values:
        expr = expr.replace("%q", '"' + (UNKNOWN if value is None else value) + '"', 1)
    return {(n, frozenset((k, v) for k, v in req if v != UNKNOWN)) for n, req in read_selectors(expr)}


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
        self._reads: dict[tuple, set[Read]] = {}

    def reads(self, at: tuple) -> set[Read]:
        if at not in self._reads:
            rule = self.all[at]
            reads = read_selectors(str(rule.get("expr", "")))
            for text in [*(rule.get("annotations") or {}).values(), *(rule.get("labels") or {}).values()]:
                if "query" in str(text):
                    reads |= self._template_reads(str(text))
            self._reads[at] = reads
        return self._reads[at]

    def _template_reads(self, text: str) -> set[Read]:
        """What a template's queries read: a `printf "<selector>" args... | query` with the label
        values it spells as literals, else (any other template) every recorded name it spells."""
        found = PRINTF_QUERY_RE.findall(text)
        rest = PRINTF_QUERY_RE.sub("", text)
        spelled = rest if "query" in rest else ""  # a query it cannot read: every name it spells
        reads: set[Read] = set()
        for fmt, args in found:
            values = [a[1:-1] if a.startswith('"') else None for a in TEMPLATE_ARG_RE.findall(args)]
            try:
                reads |= _printf_reads(fmt, values)
            except Unsliceable:
                spelled += " " + fmt
        return reads | {(w, frozenset()) for w in NAME_RE.findall(spelled) if w in self.writers}

    def written(self, at: tuple) -> dict[str, str]:
        """The label values every series of the rule at `at` carries, whatever its expression gives:
        an alert's name, and its static labels that are no template."""
        rule = self.all[at]
        labels = {k: str(v) for k, v in (rule.get("labels") or {}).items() if "{{" not in str(v)}
        return labels | ({"alertname": str(rule["alert"])} if "alert" in rule else {})

    def may_write(self, at: tuple, required: frozenset[tuple[str, str]]) -> bool:
        written = self.written(at)
        return all(written.get(k, v) == v for k, v in required)

    def closure(self, alerts: set[str], reads: set[Read]) -> frozenset:
        keep = {at for at, rule in self.all.items() if rule.get("alert") in alerts}
        todo = set(reads).union(*(self.reads(at) for at in keep))
        seen: set[Read] = set()
        while todo:
            read = todo.pop()
            seen.add(read)
            name, required = read
            for at in self.writers.get(name, ()):
                if at not in keep and self.may_write(at, required):
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
