"""Label values of generated test series that every configured selector accepts (DESIGN invariant 14).

The rules read each source's series through config.selectors, so a generated test whose series a
selector does not match tests nothing and fails. A scenario's or a synthetic model's label values
are kept where every matcher of the source accepts them, and otherwise replaced, the same way in
the series and in the alerts the test expects: by the matcher's own value (`=`), by a string its
regex matches (`=~`: one per alternative, `.*` standing for the old value so values stay apart;
checked with RE2 as Prometheus reads it), or by the old value made different (`!=`, `!~`). Two
values of one test become one only where the selector leaves no other (`job="dcgm-exporter"`, the
usual config) and the label is one the test's rules aggregate away: not the identity of the source
(a GPU; an engine, a model) nor a label the alerts it checks may carry (a target's job). Two scrapes
of one GPU by two jobs so become two scrapes by one job, told apart by their `instance`; the test
must still tell its series apart, and each check its alerts (`keep_apart`). An `up` series beside
them takes the same values and must stay a target of config.targets (TargetConflict). Where no value
fits, SelectorConflict names the selector: `servewatch check` refuses the config with it
(validation/selector_checks.py).
"""

from __future__ import annotations

import re

from ..promql import builders as b
from ..promql.labels import record_labels, returned
from ..spec import matchers as m

IDENTITY_LEVELS = {"dcgm": ("gpu",), "vllm": ("engine", "model"), "gateway": ("engine", "model")}
SERIES_RE = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$", re.S)


class SelectorConflict(ValueError):
    """No label value satisfies a source's selector (or keeps a test's values apart)."""

    def __init__(self, source: str, selector: str, label: str, old: str | None):
        self.source, self.selector, self.label = source, selector, label
        shown = "no value" if old is None else f"{old!r}"
        super().__init__(
            f"{selector!r}: the generated tests need a {label} value it matches "
            f"for {shown} (and one apart from the others of the same test), and servewatch finds none; "
            "write a selector with an equality or an alternative per value, or leave it empty"
        )


class TargetConflict(SelectorConflict):
    """A value the selector needs takes an `up` series of the test out of config.targets: the
    source's own targets would be no targets (its absence alerts fire for none)."""

    def __init__(self, source: str, selector: str, label: str, value: str, target: str, targets: str):
        ValueError.__init__(
            self,
            f'{selector!r}: the generated tests give the series it selects {label}="{value}", and the '
            f"`up` series of their target too, which config.targets.{target} ({targets!r}) does not "
            "match: the target's absence alerts would fire, as they would on Prometheus; make "
            f"config.targets.{target} match the targets of the series the selector selects",
        )
        self.source, self.selector, self.label = source, selector, label


class Conform:
    """The replacements of one generated test: the same old value becomes the same new one."""

    def __init__(self, model, alerts=None):
        """`alerts`: the rules the test checks, whose labels keep their values apart; without
        them no two values become one."""
        self.model = model
        self.alerts = alerts
        self.mapping: dict[tuple[str, str | None], str | None] = {}
        self.used: dict[str, set[str]] = {}
        self.origin: dict[tuple[str, str | None], str] = {}  # (label, old): whose selector replaced it
        self.shared: list[tuple[str, str, str | None]] = []  # (source, label, old) given a used value

    def matchers(self, source: str) -> list[tuple[str, str, str]]:
        return b.parse_matchers(self.model.config.selector(source))

    def labels(self, source: str, labels: dict[str, str]) -> dict[str, str]:
        """`labels` of a series of `source`, with the values its selector needs."""
        out = dict(labels)
        by_label: dict[str, list[tuple[str, str]]] = {}
        for label, op, value in self.matchers(source):
            by_label.setdefault(label, []).append((op, value))
        for label, ms in by_label.items():
            new = self.value(source, label, out.get(label), ms)
            if new is None:
                out.pop(label, None)
            else:
                out[label] = new
        return out

    def value(self, source: str, label: str, old: str | None, ms: list[tuple[str, str]]) -> str | None:
        key = (label, old)
        if key in self.mapping:
            new = self.mapping[key]
            if all(m.accepts(op, v, new or "") for op, v in ms):
                return new
        used = self.used.setdefault(label, set())
        for new in self._candidates(label, old, ms):
            if new in used and self.mapping.get(key) != new:
                continue
            if all(m.accepts(op, v, new or "") for op, v in ms):
                self.mapping[key] = new
                self.origin.setdefault(key, source)
                if new is not None:
                    used.add(new)
                return new
        if self._may_share(source, label):
            for new in self._candidates(label, old, ms):
                if new is not None and all(m.accepts(op, v, new) for op, v in ms):
                    self.mapping[key] = new
                    self.origin.setdefault(key, source)
                    self.shared.append((source, label, old))
                    return new
        raise SelectorConflict(source, self.model.config.selector(source), label, old)

    def _may_share(self, source: str, label: str) -> bool:
        """Whether two values of `label` may become one: the test's rules aggregate it away."""
        if self.alerts is None:
            return False
        levels = IDENTITY_LEVELS.get(source, ("gpu", "engine", "model"))
        if any(label in self.model.builder.labels.identity(level) for level in levels):
            return False
        records = record_labels(self.model.records())
        carried = [returned(rule.expr, records) for rule in self.alerts]
        return not any(c.open or label in c.known for c in carried)

    def keep_apart(self, pairs) -> None:
        """`pairs`: (before, after) of the series of this test, or of the alerts one check
        expects. A shared value must not make two of them one: SelectorConflict names it."""
        pairs = list(pairs)
        if self.shared and len({after for _, after in pairs}) < len({before for before, _ in pairs}):
            source, label, old = self.shared[0]
            raise SelectorConflict(source, self.model.config.selector(source), label, old)

    @staticmethod
    def _candidates(label: str, old: str | None, ms: list[tuple[str, str]]):
        yield old  # kept where it is accepted (None: the label stays absent)
        base = old or label.lower()
        for op, v in ms:
            if op == "=":
                yield v
            elif op == "=~":
                for fill in (base, *(f"{base}-{n}" for n in range(1, 4))):
                    yield from m.examples(v, fill)
        for n in ("x", "y", "z"):
            yield f"{base}-{n}"

    def mapped(self, label: str, value: str) -> str:
        """What `value` of `label` became in this test's series (itself where it was kept)."""
        new = self.mapping.get((label, value), value)
        return value if new is None else new

    def remap(self, series: str) -> str:
        """A series of the test with every value replaced elsewhere in it replaced here too (an `up`
        series beside the engine metrics it belongs with, whatever its source's selector)."""
        found = SERIES_RE.match(series)
        if not found or not found.group(2):
            return series
        name, body = found.group(1), found.group(2)[1:-1]
        labels = {label: value for label, _, value in b.parse_matchers(body)} if body.strip() else {}
        new = {k: self.mapped(k, v) for k, v in labels.items()}
        if new == labels:
            return series
        if name == "up":
            self._still_a_target(labels, new)
        return _text(name, new)

    def _still_a_target(self, old: dict[str, str], new: dict[str, str]) -> None:
        """An `up` series that was a target of a source (config.targets) must stay one."""
        for target, text in self.model.config.targets.items():
            ms = b.parse_matchers(text)
            if not all(m.accepts(op, v, old.get(label, "")) for label, op, v in ms):
                continue
            for label, op, v in ms:
                if not m.accepts(op, v, new.get(label, "")):
                    source = self.origin.get((label, old.get(label)), target)
                    selector = self.model.config.selector(source)
                    raise TargetConflict(source, selector, label, new.get(label, ""), target, text)

    def series(self, source_of, series: str) -> str:
        """A promtool series selector (`name{a="x", ...}`) with the values its source's selector needs."""
        found = SERIES_RE.match(series)
        if not found:
            return series
        name, body = found.group(1), (found.group(2) or "{}")[1:-1]
        labels = {label: value for label, _, value in b.parse_matchers(body)} if body.strip() else {}
        new = self.labels(source_of(name), labels)
        # a client histogram's series that measure its quantity, where the scenario names none
        measuring = self.model.builder.labels.client.measuring(name)
        new = {**new, **{k: v for k, v in measuring.items() if k not in new}}
        if new == labels and list(new) == list(labels):
            return series
        return _text(name, new)


def series_key(series: str) -> tuple:
    """A promtool series selector as its name and label set, whatever the order of its labels."""
    found = SERIES_RE.match(series)
    if not found:
        return (series,)
    body = (found.group(2) or "{}")[1:-1]
    labels = {label: value for label, _, value in b.parse_matchers(body)} if body.strip() else {}
    return (found.group(1), frozenset(labels.items()))


def _text(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())  # values as written (escapes kept)
    return f"{name}{{{inner}}}" if inner else name
