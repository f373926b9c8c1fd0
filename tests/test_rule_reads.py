"""What the testkit leaves out of a test's data and rules: only what the rules (or the alerts) read."""

from __future__ import annotations

import yaml
from servewatch_testkit import rule_reads

RULES = {
    "groups": [
        {
            "name": "inputs",
            "interval": "1m",
            "rules": [
                {"record": "a:rate5m", "expr": "rate(a_total[5m])"},
                {"record": "unread:rate5m", "expr": "rate(unread_total[5m])"},
            ],
        },
        {"name": "derived", "rules": [{"record": "a:ratio", "expr": "a:rate5m / on() b"}]},
        {"name": "boards", "rules": [{"record": "c:sum", "expr": "sum(c)"}]},
        {"name": "alerts", "rules": [{"alert": "AHigh", "expr": "a:ratio > 0.5", "for": "5m"}]},
    ]
}


def test_the_alerts_closure_keeps_the_records_alerts_read_through_records_and_drops_the_rest(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(RULES, sort_keys=False))
    kept = rule_reads.alerts_closure([path])
    assert [(g["name"], [r.get("record") or r["alert"] for r in g["rules"]]) for g in kept] == [
        ("inputs", ["a:rate5m"]),
        ("derived", ["a:ratio"]),
        ("alerts", ["AHigh"]),
    ]
    assert kept[0]["interval"] == "1m"  # a group keeps its own settings
    assert rule_reads.names_read(kept) == {"a_total", "a:rate5m", "b", "a:ratio"}
    assert "c" in rule_reads.selected_names([path])
