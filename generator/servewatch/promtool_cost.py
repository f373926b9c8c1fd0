"""What a `promtool test rules` run costs, estimated from its test file before it runs.

promtool evaluates every rule it loads at every evaluation step of a test, from 0 to the test's last
`eval_time`, and reads each input series at each step: a test costs about steps x (rules + input
series). A file's size says little of that: a month-long test of a few series at a 2-hour step is
small and slow, a table of short tests is large and quick. verify.py starts the costliest runs first
and packs the cheap ones into shared promtool processes (promtool_runs.py) by this estimate.
"""

from __future__ import annotations

from .spec.fields import DURATION_RE, duration_ms

DEFAULT_INTERVAL_S = 60.0  # promtool's evaluation_interval when a file sets none
CHECKS = ("alert_rule_test", "promql_expr_test")


def rule_count(rule_docs: list[dict]) -> int:
    """The rules in these rule-file documents."""
    return sum(
        len(g.get("rules") or [])
        for d in rule_docs
        for g in (d.get("groups") or [] if isinstance(d, dict) else [])
        if isinstance(g, dict)
    )


def interval_s(doc: dict) -> float:
    """The evaluation step of the test file `doc`, in seconds."""
    return _seconds(doc.get("evaluation_interval")) or DEFAULT_INTERVAL_S


def test_cost(test: dict, step_s: float, rules: int) -> float:
    """steps x (rules + input series) of one test of a file evaluated every `step_s` with `rules`."""
    if not isinstance(test, dict):
        return 0.0
    cases = [case for key in CHECKS for case in test.get(key) or [] if isinstance(case, dict)]
    end = max((_seconds(case.get("eval_time")) for case in cases), default=0.0)
    return (end // step_s + 1) * (rules + len(test.get("input_series") or []))


def _seconds(text) -> float:
    """A Prometheus duration in seconds; 0 for anything else (promtool says what is wrong with it)."""
    if not isinstance(text, str) or not text or not DURATION_RE.fullmatch(text):
        return 0.0
    return duration_ms(text) / 1000
