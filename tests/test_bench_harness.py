"""The logic of the fleet benchmark (bench/): what Grafana would send, and how query statistics are read."""

import json

import pytest
import yaml

from bench import anchors, fleet, grafana, loading, report
from bench.promstats import Cost, Runner, median, total

# --------------------------------------------------------------------------- Grafana variables


def test_all_uses_all_value_unescaped():
    var = {"name": "model", "multi": True, "includeAll": True, "allValue": ".*"}
    assert grafana.format_selection(var, ["a", "b"], is_all=True) == ".*"


def test_all_without_all_value_is_the_alternation_of_every_option():
    var = {"name": "instance", "multi": True, "includeAll": True}
    assert grafana.format_selection(var, ["10.0.0.1:9400", "10.0.0.2:9400"], is_all=True) == (
        r"(10\\.0\\.0\\.1:9400|10\\.0\\.0\\.2:9400)"
    )


def test_one_value_of_a_multi_variable_is_regex_escaped_for_a_promql_string():
    var = {"name": "model", "multi": True, "includeAll": True, "allValue": ".*"}
    value = grafana.format_selection(var, ["mistralai/Mixtral-8x7B-Instruct-v0.1"], is_all=False)
    assert value == r"mistralai/Mixtral-8x7B-Instruct-v0\\.1"
    # inside a PromQL string the doubled backslash reads as one: a regex matching the literal dot
    expr = grafana.interpolate('x{model_name=~"$model"}', {"model": value})
    assert expr == r'x{model_name=~"mistralai/Mixtral-8x7B-Instruct-v0\\.1"}'


def test_single_select_variable_is_not_regex_escaped():
    var = {"name": "model_name", "multi": False, "includeAll": False}
    assert grafana.format_selection(var, ["Qwen/Qwen3-30B-A3B.v1"], is_all=False) == "Qwen/Qwen3-30B-A3B.v1"
    assert grafana.plain_escape("it's") == "it\\\\'s"


def test_regex_escape_doubles_backslashes_for_the_string():
    assert grafana.regex_escape("a\\b(c)") == "a\\\\\\\\b\\\\(c\\\\)"


def test_interpolate_fills_every_syntax_and_leaves_label_replace_groups():
    expr = (
        'label_replace(x{a=~"$a", b="${b}", c="${c:regex}", d="[[d]]"}[$__rate_interval], '
        '"p", "$1", "q", "(.*)")'
    )
    out = grafana.interpolate(expr, {"a": "1", "b": "2", "c": "3", "d": "4", "__rate_interval": "2m"})
    assert out == 'label_replace(x{a=~"1", b="2", c="3", d="4"}[2m], "p", "$1", "q", "(.*)")'


def test_a_repeated_panels_raw_value_and_query_result_options():
    out = grafana.interpolate('x{m="${model:raw}", n=~"$model"}', {"model": "a\\\\.b", "model:raw": "a.b"})
    assert out == 'x{m="a.b", n=~"a\\\\.b"}'
    host = {
        "query": "query_result(count by (Hostname, hostname) (up))",
        "regex": '/(?:Hostname|hostname)="([^"]+)"/',
    }
    assert grafana.query_result_query(host) == "count by (Hostname, hostname) (up)"
    series = [{"metric": {"Hostname": "a"}}, {"metric": {"hostname": "c"}}, {"metric": {"Hostname": "a"}}]
    assert grafana.query_result_options(host, series) == ["a", "c"]
    assert grafana.query_result_query({"query": "label_values(up, job)"}) is None


def test_interpolate_names_an_unknown_variable():
    with pytest.raises(ValueError, match="cluster"):
        grafana.interpolate('x{cluster=~"$cluster"}', {})


def test_rate_interval_and_durations():
    assert grafana.rate_interval(30, 30) == 120  # 1 h range, 30 s timeInterval: 4 x scrape wins
    assert grafana.rate_interval(300, 30) == 330  # zoomed out: interval + scrape
    assert [grafana.duration(s) for s in (120, 90, 3600, 330)] == ["2m", "90s", "1h", "330s"]
    with pytest.raises(ValueError):
        grafana.duration(0)


def test_label_values_query_forms():
    assert grafana.label_values_query({"query": "label_values(model_name)"}) == (None, "model_name")
    selector = 'vllm:num_requests_running{namespace=~"$namespace"}'
    var = {"query": {"query": f"label_values({selector}, model_name)"}}
    assert grafana.label_values_query(var) == (selector, "model_name")
    with pytest.raises(ValueError, match="label_values"):
        grafana.label_values_query({"name": "x", "query": "query_result(up)"})


def test_choose_keeps_all_then_pick_then_prefer_then_first():
    all_var = {"name": "namespace", "includeAll": True, "current": {"value": ["$__all"]}}
    assert grafana.choose(all_var, ["a", "b"], {}) == (["a", "b"], True)
    assert grafana.choose(all_var, ["a", "b"], {"namespace": "b"}) == (["b"], False)
    single = {"name": "namespace", "current": {}}
    assert grafana.choose(single, ["a", "b"], {}) == (["a"], False)
    assert grafana.choose(single, ["a", "b"], {}, prefer={"namespace": "b"}) == (["b"], False)
    assert grafana.choose(single, ["a", "b"], {}, prefer={"namespace": "gone"}) == (["a"], False)
    with pytest.raises(ValueError, match="offers no value"):
        grafana.choose(single, [], {})


def test_sort_options():
    assert grafana.sort_options({"sort": 1}, ["b", "a", "C"]) == ["C", "a", "b"]
    assert grafana.sort_options({"sort": 3}, ["10", "9", "1"]) == ["1", "9", "10"]
    assert grafana.sort_options({}, ["b", "a"]) == ["b", "a"]


def test_default_view_skips_panels_of_collapsed_rows():
    board = {
        "panels": [
            {"type": "stat", "title": "top", "targets": [{"expr": "up"}]},
            {"type": "row", "title": "open", "collapsed": False, "panels": []},
            {"type": "timeseries", "title": "shown", "targets": [{"expr": "a"}, {"expr": "b", "hide": True}]},
            {"type": "text", "title": "no query"},
            {
                "type": "row",
                "title": "closed",
                "collapsed": True,
                "panels": [{"type": "table", "title": "hidden", "targets": [{"expr": "c", "instant": True}]}],
            },
        ]
    }
    every = grafana.panels(board)
    assert [(p.title, p.row, p.collapsed) for p in every] == [
        ("top", "", False),
        ("shown", "open", False),
        ("hidden", "closed", True),
    ]
    assert [t.expr for t in every[1].targets] == ["a"]  # hidden targets are not sent
    assert every[2].targets[0].instant
    assert [p.title for p in grafana.default_view(board)] == ["top", "shown"]


def test_every_generated_dashboard_query_interpolates(repo):
    """Each committed dashboard's queries resolve with its variables set and the macros filled."""
    for path in sorted((repo / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        values = {v["name"]: "x" for v in board["templating"]["list"]}
        values.update(__rate_interval="2m", __interval="30s", __range="1h")
        for panel in grafana.panels(board):
            for target in panel.targets:
                assert "$" not in grafana.interpolate(target.expr, values).replace("$1", ""), panel.title


def test_anchor_dashboards_match_their_reference_counts():
    """vllm-metrics.md section 6.1: 12 panels, 27 queries; dcgm.md section 3: 8 panels."""
    vllm = grafana.panels(anchors.vllm_example())
    assert (len(vllm), sum(len(p.targets) for p in vllm)) == (12, 27)
    assert len(grafana.panels(anchors.dcgm_exporter())) == 8
    titles = {
        (d["uid"], p.title)
        for d in (anchors.vllm_example(), anchors.dcgm_exporter())
        for p in grafana.panels(d)
    }
    assert all(q.anchor in titles for q in anchors.QUANTITIES)


# --------------------------------------------------------------------------- query statistics

STATS = {
    "timings": {"evalTotalTime": 0.0125, "execTotalTime": 0.013},
    "samples": {"totalQueryableSamples": 1150, "peakSamples": 126},
}


def test_cost_from_stats():
    assert Cost.from_stats(STATS) == Cost(1150, 126, 0.0125)
    assert Cost.from_stats(STATS).as_dict() == {"samples": 1150, "peak_samples": 126, "eval_ms": 12.5}


def test_missing_stats_is_a_clear_error():
    with pytest.raises(ValueError, match="stats=all"):
        Cost.from_stats(None)
    with pytest.raises(ValueError, match="stats=all"):
        Cost.from_stats({"timings": {}})


def test_median_of_runs_and_total():
    runs = [Cost(10, 5, 0.3), Cost(10, 6, 0.1), Cost(10, 5, 0.2)]
    assert median(runs) == Cost(10, 6, 0.2)
    assert total([Cost(1, 4, 0.5), Cost(2, 3, 0.25)]) == Cost(3, 4, 0.75)
    with pytest.raises(ValueError, match="changed"):
        median([Cost(10, 1, 0.1), Cost(11, 1, 0.1)])


def test_runner_discards_warmup_and_sends_stats_all():
    calls = []

    class Api:
        def api(self, path, **params):
            calls.append((path, params))
            eval_s = [9.0, 0.3, 0.1, 0.2][len(calls) - 1]  # the warm-up run is slow
            return {"stats": {**STATS, "timings": {"evalTotalTime": eval_s}}}

    cost = Runner(Api(), repeats=3, warmup=1).range("up", 0, 3600, 30)
    assert cost == Cost(1150, 126, 0.2)
    assert calls[0] == (
        "/api/v1/query_range",
        {"stats": "all", "query": "up", "start": "0", "end": "3600", "step": "30"},
    )


# --------------------------------------------------------------------------- report


def test_growth_exponent():
    assert report.growth_exponent([512, 1024, 2048], [10, 20, 40]) == pytest.approx(1.0)
    assert report.growth_exponent([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)
    assert report.growth_exponent([512], [3]) is None


def test_quantity_targets():
    assert report.quantity_target("histogram", 450.0) == (">= 10x", "met")
    assert report.quantity_target("histogram", 1.0)[1] == "missed (1.00x)"
    assert report.quantity_target("gauge", 1.0)[1] == "met"
    assert report.quantity_target("counter", 1.0)[0] == "none set"


def test_overlapping_blocks():
    from bench.loading import overlapping

    assert overlapping([{"minTime": 0, "maxTime": 100}, {"minTime": 50, "maxTime": 60}])
    assert overlapping(
        [{"minTime": 0, "maxTime": 100}, {"minTime": 5, "maxTime": 6}, {"minTime": 200, "maxTime": 300}]
    )
    assert not overlapping(
        [{"minTime": 100, "maxTime": 200}, {"minTime": 0, "maxTime": 100}]
    )  # maxTime exclusive
    assert not overlapping([])


# --------------------------------------------------------------------------- rule cost


def test_rule_groups_carry_their_interval():
    from bench import rule_cost

    groups = rule_cost.parse(
        "x.rules.yaml",
        "groups:\n- {name: a, rules: [{record: 'a:b:c', expr: up}]}\n"
        "- {name: b, interval: 1m, rules: [{alert: A, expr: 'a:b:c > 1'}]}\n",
    )
    assert [(g["name"], g["interval_s"]) for g in groups] == [("a", 30), ("b", 60)]
    assert groups[1]["rules"] == [{"kind": "alert", "name": "A", "expr": "a:b:c > 1"}]


def test_a_concurrent_group_costs_its_slowest_independent_rule_then_the_chain():
    """Prometheus 3.5's batches: rules without dependencies side by side, rules with both
    dependencies and dependents one after another, then the rest side by side."""
    from bench.rule_cost import concurrent_ms

    rules = [
        {"kind": "record", "name": "m:a_bucket:rate5m", "expr": "sum by (le) (rate(a_bucket[5m]))"},
        {"kind": "record", "name": "m:b_bucket:rate5m", "expr": "sum by (le) (rate(b_bucket[5m]))"},
        {"kind": "record", "name": "m:a:p95", "expr": "histogram_quantile(0.95, m:a_bucket:rate5m)"},
        {"kind": "record", "name": "m:b:p95", "expr": "histogram_quantile(0.95, m:b_bucket:rate5m)"},
        {"kind": "alert", "name": "A", "expr": "m:a:p95 > 1"},
        {"kind": "alert", "name": "B", "expr": "m:b:p95 > 1"},
    ]
    costs = [{"eval_ms": ms} for ms in (40, 30, 2, 3, 1, 0.5)]
    assert concurrent_ms(rules, costs) == 40 + (2 + 3) + 1


def test_the_rule_set_per_30_s_weights_each_group_by_its_interval():
    from bench import rule_cost

    class Fixed:
        def instant(self, expr, at):
            return Cost(10, 10, 0.01)  # 10 ms each

    groups = [
        {
            "file": "f",
            "name": "fast",
            "interval_s": 30,
            "rules": [{"kind": "record", "name": "a:b:c", "expr": "x"}],
        },
        {
            "file": "f",
            "name": "slow",
            "interval_s": 60,
            "rules": [{"kind": "record", "name": "d:e:f", "expr": "y"}],
        },
    ]
    total = rule_cost.measure(Fixed(), groups, 0)["total"]
    assert (total["eval_ms"], total["eval_ms_per_30s"], total["concurrent_ms"]) == (20, 15, 10)
    assert report.per_30s({**total, "cpu_ms": 8.0}, "cpu") == 6.0


def test_the_fleet_fits_one_tsdb_block_whatever_the_hour():
    from bench.loading import BLOCK_S, block_aligned_start

    for now in (7200 * 1000 + 1, 7200 * 1000 + 3599, 7200 * 1000 + 7199):
        start = block_aligned_start(120, 30, now)
        end = start + 119 * 30
        assert start // BLOCK_S == (end + 90) // BLOCK_S  # data and a minute of recorded series after it
        assert end < now
    with pytest.raises(SystemExit, match="do not fit"):
        block_aligned_start(240, 30, 7200 * 1000)


def test_a_workdir_that_is_not_there_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        fleet.parse_args(["--workdir", str(tmp_path / "missing"), "--gpus", "512"])
    assert stopped.value.code == 2
    assert "is not a folder; create it first" in capsys.readouterr().err
    assert fleet.parse_args(["--workdir", str(tmp_path), "--gpus", "512"]).workdir == tmp_path


def test_aba_needs_a_before_side(capsys):
    with pytest.raises(SystemExit) as stopped:
        fleet.parse_args(["--aba", "--gpus", "512"])
    assert stopped.value.code == 2
    assert "--aba needs --before" in capsys.readouterr().err
    assert fleet.parse_args(["--aba", "--before", "main", "--rules-only"]).rules_only


def test_aba_lists_rule_by_rule_only_the_groups_that_differ():
    def side(gpu_samples: int, extra: bool = False) -> dict:
        gpu = [{"name": "a:b:c", "samples": gpu_samples, "eval_ms": 2.0}]
        gpu += [{"name": "x:y:z", "samples": 5, "eval_ms": 1.0}] if extra else []
        groups = [
            {"name": "gpu", "interval_s": 30, "rules": gpu, "samples": 1, "eval_ms": 1.0},
            {"name": "vllm", "interval_s": 30, "rules": [{"name": "V", "samples": 7, "eval_ms": 1.0}]},
        ]
        total = {"samples": 1, "eval_ms": 1.0, "samples_per_30s": 1, "cpu_ms": 1.0}
        return {"groups": groups, "total": total}

    size = {"rules": side(10, extra=True), "rules_before": side(30), "rules_before_first": side(30)}
    assert report.differing_groups(size) == ["gpu"]
    text = "\n".join(report.aba_section([size], ["1,024 GPUs"]))
    assert "| gpu | x:y:z | - | 5 / 1.0 ms | - |" in text
    assert "vllm" not in text.split("Rule by rule")[1]


def test_the_costliest_rules_are_ranked_per_30_s():
    groups = [
        {"name": "fast", "interval_s": 30, "rules": [{"name": "A", "samples": 3, "eval_ms": 4.0}]},
        {
            "name": "slow",
            "interval_s": 60,
            "rules": [
                {"name": "B", "samples": 9, "eval_ms": 6.0},
                {"name": "B", "samples": 1, "eval_ms": 10.0},
            ],
        },
    ]
    ranked = report.costliest({"groups": groups}, n=2)
    assert [(r["rule"], r["eval_ms_per_30s"]) for r in ranked] == [("B #2", 5.0), ("A", 4.0)]
    size = {
        "shape": {"gpus": 1024},
        "rules": {"groups": groups, "total": {"eval_ms": 20.0, "eval_ms_per_30s": 12.0}},
    }
    text = "\n".join(report.costliest_section([size], "rules", n=1))
    assert "| 1 | B #2 | slow (every 60 s) | 1 | 10.0 ms | 5.0 ms | 41.7% |" in text


def test_interleave_pairs_only_the_rules_whose_expression_differs():
    from bench import interleave

    def groups(expr_b: str) -> list[dict]:
        rules = [{"name": "A", "expr": "x"}, {"name": "B", "expr": "y"}, {"name": "B", "expr": expr_b}]
        return [{"name": "g", "rules": rules}]

    assert interleave.differing(groups("z"), groups("z")) == []
    assert interleave.differing(groups("z"), groups("w")) == [
        {"group": "g", "rule": "B #2", "before": "z", "now": "w"}
    ]
    with pytest.raises(SystemExit):
        fleet.parse_args(["--interleave", "3", "--gpus", "512"])


def test_the_fleet_table_says_how_the_data_reached_prometheus():
    backfilled = {
        "openmetrics": {"series": 1000, "samples": 120000, "bytes": 2**30, "write_s": 3.0},
        "tsdb": {"backfill_openmetrics": 7.4, "backfill_rules": 2.2},
    }
    scraped = {"series": 1000, "replay": {"steps": 121, "seconds": 95.2}, "backfill_s": 61.0}
    assert report.data_cells(backfilled) == [
        "1,000",
        "120,000 samples backfilled: 1.00 GiB of OpenMetrics in 3.0 s, promtool 7 s",
        "2 s",
    ]
    assert report.data_cells(scraped) == ["1,000", "scraped: 121 steps in 95 s", "61 s"]
    # a replay that fell behind says how many steps its series kept
    check = {"up": {"series": 8, "min_samples": 114.0, "max_samples": 120.0}, "expected_samples": 120}
    check["vllm:x"] = {"series": None, "min_samples": None, "max_samples": None}  # a family not there
    behind = {**scraped, "replay": {**scraped["replay"], "check": check}}
    assert report.data_cells(behind)[1] == "scraped: 121 steps in 95 s, **114 of 120 steps per series kept**"
    whole = {"up": {"series": 8, "min_samples": 120.0, "max_samples": 120.0}, "expected_samples": 120}
    assert report.data_cells({**scraped, "replay": {**scraped["replay"], "check": whole}})[1] == (
        "scraped: 121 steps in 95 s"
    )


def test_the_data_is_backfilled_unless_scraping_is_asked_for(capsys):
    assert fleet.parse_args([]).load == "backfill"
    assert fleet.parse_args(["--load", "scrape", "--scrape-interval", "5s"]).scrape_interval == "5s"
    with pytest.raises(SystemExit):
        fleet.parse_args(["--load", "remote-write"])
    assert "invalid choice" in capsys.readouterr().err


def test_the_bench_asks_prometheus_for_uncompressed_answers():
    """The bench's queries stand for rule evaluations, which Prometheus makes without an HTTP answer:
    an answer it gzips costs a compressor's allocations that no rule evaluation pays."""
    import http.server
    import threading

    from bench.promstats import Uncompressed
    from servewatch.promapi import PromApiError

    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append((self.path, self.headers.get("Accept-Encoding")))
            ok = "bad" not in self.path
            body = {"status": "success", "data": {"result": []}} if ok else {"status": "error", "error": "no"}
            text = json.dumps(body).encode()
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = Uncompressed(f"http://127.0.0.1:{server.server_port}/")
        assert api.api("/api/v1/query", query="up", stats="all") == {"result": []}
        with pytest.raises(PromApiError, match="no"):
            api.api("/api/v1/bad", query="up")
    finally:
        server.shutdown()
        server.server_close()
    assert [enc for _, enc in asked] == ["identity", "identity"]
    assert asked[0][0].startswith("/api/v1/query?") and "stats=all" in asked[0][0]


def test_before_a_specs_build_is_that_build_at_the_ref(repo):
    """`--before REF --specs DIR` compares DIR's build before and after: the rules REF's generator
    makes from DIR (here the identity build, with its canary comparisons), not the committed rules/
    of REF (the default build, which has none)."""
    from bench import rule_cost

    def names(groups):
        return {r["name"] for g in groups for r in g["rules"]}

    commit, built = rule_cost.rule_groups_at(repo, "HEAD", repo / "bench" / "mutation" / "specs")
    _, committed = rule_cost.rule_groups_at(repo, "HEAD")
    canary = "VLLMCanaryTimeToFirstTokenWorse"
    assert canary in names(built) and canary not in names(committed)
    assert len(commit) == 40


def test_a_lost_record_is_backfilled_again_with_every_record_made_from_it(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "g",
                        "rules": [
                            {"record": "a:x", "expr": "max(x)"},
                            {"record": "a:x", "expr": "min(x)", "labels": {"kind": "min"}},
                            {"record": "b:y", "expr": "max(y)"},
                            {"record": "c:x", "expr": "a:x * 2"},
                            {"record": "d:x", "expr": "c:x + b:y"},
                            {"record": "e:m", "expr": "max(e) or last_over_time(e:m[5m])"},
                        ],
                    }
                ]
            }
        )
    )
    first = yaml.safe_load(rules.read_text())["groups"][0]["rules"][0]
    lost = [(str(rules), first)]
    redo = loading.with_readers(lost, [rules])
    # the other rule of a:x kept its history; c:x reads a:x, d:x reads c:x; a memory reads itself only
    redone = [(r["record"], r["expr"]) for _, r in redo]
    assert redone == [("a:x", "max(x)"), ("c:x", "a:x * 2"), ("d:x", "c:x + b:y")]
