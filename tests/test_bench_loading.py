"""bench/loading.py on a real Prometheus 3.5: a record whose history the backfill left out is found
and backfilled again, so no rule is measured reading nothing."""

from __future__ import annotations

import math
import textwrap
import time

import pytest

from bench import loading
from servewatch_testkit.localprom import BLOCK_S, LocalPrometheus
from servewatch_testkit.synth import fleet, to_openmetrics

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

RULES = textwrap.dedent("""\
    groups:
      - name: every-2m
        interval: 2m
        rules:
          - record: engine:kv:max
            expr: max by (namespace, pod) (vllm:kv_cache_usage_perc)
          - record: engine:kv:max
            expr: max by (namespace, pod) (vllm:kv_cache_usage_perc) / 2
            labels:
              half: "yes"
      - name: default-interval
        rules:
          - record: fleet:kv:max
            expr: max(engine:kv:max)
          - record: fleet:absent:sum
            expr: sum(metric_that_no_target_exports)
""")


@pytest.fixture(params=[0, 3600], ids=["ending-on-a-block-boundary", "ending-inside-a-block"])
def unrecorded(request, tmp_path):
    """A server holding the fleet's data and none of the records' history, the data ending on a 2 h
    block boundary or an hour after one (where the wall clock puts it would vary by the hour)."""
    fl = fleet()
    boundary = math.floor(time.time() / BLOCK_S) * BLOCK_S - BLOCK_S
    start = boundary + request.param - (fl.steps - 1) * fl.step
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    with LocalPrometheus(to_openmetrics(list(fl), start, fl.step), backfill_rules=False) as prom:
        yield prom, rules, start, start + (fl.steps - 1) * fl.step


def lost_names(prom, rules, at) -> list[tuple[str, dict]]:
    return [(r["record"], r.get("labels") or {}) for _, r in loading.lost_records(prom, [rules], at)]


def test_records_missing_from_the_history_are_found_by_rule_and_labels(unrecorded):
    prom, rules, _, at = unrecorded
    # fleet:kv:max reads a record with no history: it answers nothing, so it is not found lost
    assert lost_names(prom, rules, at) == [("engine:kv:max", {}), ("engine:kv:max", {"half": "yes"})]


def test_complete_records_backfills_the_lost_ones_until_none_is_left(unrecorded):
    prom, rules, start, at = unrecorded
    again = loading.complete_records(prom, [rules], start, at, prom.backfill_restarting)
    assert again == ["engine:kv:max", "fleet:kv:max"]  # the second made from the first, with it
    assert lost_names(prom, rules, at) == []
    assert prom.query_value("count(engine:kv:max)", at) == 2 * prom.query_value(
        "count(max by (namespace, pod) (vllm:kv_cache_usage_perc))", at
    )
    # an expression with nothing to read has no record to lose
    assert prom.query_value("count(fleet:absent:sum)", at) is None


def test_a_record_the_backfill_cannot_give_stops_the_bench(unrecorded):
    prom, rules, start, at = unrecorded
    nothing = lambda *args: None  # a backfill that writes nothing
    with pytest.raises(SystemExit, match="records still missing after 1 more backfills: engine:kv:max"):
        loading.complete_records(prom, [rules], start, at, nothing, tries=1)
