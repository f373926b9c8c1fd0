"""servewatch_testkit.rule_stages: recording rules cut into the stages promtool can backfill in order."""

import pytest
import yaml

from servewatch import generate
from servewatch.promql import builders as b
from servewatch_testkit.rule_stages import backfilled, reads, stages


def group(name, *rules, **extra):
    return {"name": name, **extra, "rules": list(rules)}


def rec(record, expr):
    return {"record": record, "expr": expr}


def test_reads_names_every_selected_metric():
    assert reads('sum by (le) (rate(a_bucket{x="1"}[5m])) / on () b:c:d and up offset 5m') == {
        "a_bucket",
        "b:c:d",
        "up",
    }


def test_a_record_comes_one_stage_after_the_records_it_reads():
    first = {
        "groups": [
            group(
                "g",
                rec("m:b:rate5m", "sum by (le) (rate(x_bucket[5m]))"),
                rec("m:q:p95", "histogram_quantile(0.95, m:b:rate5m)"),
                {"alert": "A", "expr": "m:q:p95 > 1"},
                interval="1m",
            )
        ]
    }
    second = {"groups": [group("h", rec("m:q:max", "max(m:q:p95)"), rec("n:raw", "max(y)"))]}
    got = stages([first, second])
    assert got == [
        [
            {"groups": [group("g", rec("m:b:rate5m", "sum by (le) (rate(x_bucket[5m]))"), interval="1m")]},
            {"groups": [group("h", rec("n:raw", "max(y)"))]},
        ],
        [
            {"groups": [group("g", rec("m:q:p95", "histogram_quantile(0.95, m:b:rate5m)"), interval="1m")]},
            {"groups": []},
        ],
        [{"groups": []}, {"groups": [group("h", rec("m:q:max", "max(m:q:p95)"))]}],
    ]


def test_no_records_no_stages_and_cycles_are_refused():
    assert stages([{"groups": [group("g", {"alert": "A", "expr": "up == 0"})]}]) == []
    loop = {"groups": [group("g", rec("a:b:c", "d:e:f"), rec("d:e:f", "a:b:c"))]}
    with pytest.raises(ValueError, match="cycle: a:b:c -> d:e:f -> a:b:c"):
        stages([loop])


def test_a_memory_is_backfilled_as_the_maximum_of_what_it_saw_over_its_window():
    """A memory reads its own previous value, which a backfill has not written: it is backfilled as
    the subquery it equals live, in the stage of what it reads besides itself."""
    memory = b.remember('x{a!=""}', ["a"], "m:x:last_seen", 3600)
    assert "last_over_time(m:x:last_seen[" in memory
    assert (
        backfilled("m:x:last_seen", memory)
        == 'max by (a) (max_over_time((group by (a) (x{a!=""}) * time())[3600s:]))'
    )
    assert backfilled("other:x:last_seen", memory) == memory  # only a record's read of itself
    got = stages(
        [{"groups": [group("g", rec("m:x:last_seen", memory), rec("m:x:used", "max(m:x:last_seen)"))]}]
    )
    assert [[r["expr"] for f in stage for g in f["groups"] for r in g["rules"]] for stage in got] == [
        [backfilled("m:x:last_seen", memory)],
        ["max(m:x:last_seen)"],
    ]


def test_the_generated_quantiles_read_their_bucket_rates_one_stage_later(repo):
    """Every quantile record of the default rules is backfilled after the bucket rates it reads."""
    _, files = generate.build(repo / "specs")
    vllm = yaml.safe_load(files["rules/vllm.rules.yaml"])
    cut = stages([vllm])
    names = [{r["record"] for g in s[0]["groups"] for r in g["rules"]} for s in cut]
    assert len(cut) == 2
    assert "model:vllm_time_to_first_token_seconds_bucket:rate5m" in names[0]
    assert names[1] == {
        "model:vllm_time_to_first_token_seconds:histogram_quantile_rate5m",
        "model:vllm_inter_token_latency_seconds:histogram_quantile_rate5m",
        "model:vllm_e2e_request_latency_seconds:histogram_quantile_rate5m",
        "model:vllm_nixl_xfer_time_seconds:histogram_quantile_rate5m",
        "model:vllm_request_errors:ratio_rate5m",
        "model:vllm_request_aborts:ratio_rate5m",
        "model:vllm_request_engine_errors:ratio_rate5m",
        "model:vllm_prompt_tokens:rate5m",
        "model:vllm_generation_tokens:rate5m",
    }
