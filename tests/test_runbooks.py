"""Runbooks: one page per alert, every runbook_url resolves, every query parses and names only known series,
spec mistakes in `runbooks:` point at file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

import promql_parser
import pytest
import yaml

from servewatch import catalog as catalog_mod
from servewatch import generate
from servewatch.errors import SpecErrors
from servewatch.model import Model
from servewatch.lint import engine as lint
from servewatch.render import runbooks as render_runbooks
from servewatch.promql import builders as b
from servewatch.runbooks import book, links
from servewatch.runbooks.queries import Queries, ScopedBuilder, parse_filter
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch_testkit.rule_stages import reads

REPO = Path(__file__).resolve().parents[1]
PROMQL_BLOCK = re.compile(r"```promql\n(.*?)\n```", re.S)


def _pages(files):
    return {p: t for p, t in files.items() if p.startswith("runbooks/") and p != "runbooks/README.md"}


def test_every_alert_has_a_written_page(default_build):
    model, files = default_build
    names = {a.alert for a in model.alerts()}
    assert set(_pages(files)) == {f"runbooks/{n}.md" for n in names}
    index = files["runbooks/README.md"]
    for n in names:
        assert f"[{n}]({n}.md)" in index
        assert "No runbook for this alert is written" not in files[f"runbooks/{n}.md"]
    gated = {a.alert for g in model.spec.groups if not model.spec.group_enabled(g) for a in g.alerts}
    assert gated, "the shipped specs have alerts that need config.role or config.track"
    assert set(model.spec.runbooks) == names | gated, "the shipped specs write a runbook for every alert"


def test_pages_have_the_sections_on_call_needs(default_build):
    model, files = default_build
    for path, text in _pages(files).items():
        anchors = links.anchors(text)
        for section in (
            "meaning",
            "not-meaning",
            "impact",
            "dashboards",
            "investigation",
            "causes",
            "actions",
        ):
            assert section in anchors, f"{path} lacks #{section}"
        assert "| Healthy" in text or "| Any series" in text, path
        assert "[[" not in text, f"{path} has an unreplaced token"
        assert "servewatch investigate" in text


def test_each_step_has_an_anchor_and_a_query(default_build):
    model, files = default_build
    for page in book.pages(model):
        text = files[links.page_path(page.name)]
        anchors = links.anchors(text)
        for ps in page.steps:
            assert ps.id in anchors
            assert f"```promql\n{ps.expr}\n```" in text


def test_every_runbook_url_resolves_to_a_page(default_build):
    model, files = default_build
    rules = [yaml.safe_load(files[p]) for p in files if p.startswith("rules/") and p.endswith(".rules.yaml")]
    urls = [
        r["annotations"]["runbook_url"]
        for doc in rules
        for g in doc["groups"]
        for r in g["rules"]
        if "alert" in r
    ]
    assert len(urls) == len(model.alerts())
    for url in urls:
        rel, _, problem = links.resolve(url, files)
        assert problem is None, problem
        assert rel == links.page_path(url.rsplit("/", 1)[-1].removesuffix(".md"))


@pytest.mark.parametrize(
    "pattern",
    [
        "https://wiki.example.com/servewatch/runbooks/{alert}.md#investigation",
        "https://example.com/x/runbooks/{alert}.md#meaning",
        "https://example.com/runbooks/{alert}.md#{alert_lower}",
    ],
)
def test_runbook_url_with_anchor_resolves(repo, specs_with, pattern):
    [url] = re.findall(r"runbook_url: .*", (repo / "specs" / "config.yaml").read_text())
    model, files = generate.build(specs_with({"config.yaml": [(url, f"runbook_url: {pattern}")]}))
    for a in model.alerts():
        rel, anchor, problem = links.resolve(a.annotations["runbook_url"], files)
        assert problem is None, problem
        assert anchor


def test_runbook_url_to_a_missing_anchor_is_reported(default_build):
    _, files = default_build
    _, _, problem = links.resolve("https://x/runbooks/VLLMKVCacheUsageHigh.md#no-such-step", files)
    assert "no anchor #no-such-step" in problem
    _, _, problem = links.resolve("https://x/runbooks/NoSuchAlert.md", files)
    assert "no generated runbook page" in problem


def _names_in(expr) -> list[tuple[str, bool]]:
    """(metric name or __name__ regex, is_regex) for every selector in a parsed expression."""
    out = []
    for node, _ in lint.walk(expr):
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                out.append((node.name, False))
            for m in node.matchers.matchers:
                if m.name == "__name__":
                    out.append((m.value, m.op != promql_parser.MatchOp.Equal))
    return out


def test_every_query_on_every_page_parses_and_names_known_series(default_build):
    model, files = default_build
    cat = catalog_mod.load()
    records = {r.record for r in model.records()}
    known = set(cat.metrics) | records
    seen_queries = 0
    for path, text in _pages(files).items():
        for q in PROMQL_BLOCK.findall(text):
            seen_queries += 1
            expr = promql_parser.parse(q)
            names = _names_in(expr)
            assert names, f"{path}: no selector in {q}"
            for name, is_regex in names:
                if is_regex:
                    rx = re.compile(name)
                    assert any(rx.fullmatch(n) for n in known), (
                        f"{path}: pattern {name} matches no catalog metric"
                    )
                else:
                    assert cat.lookup(name) or name in records, (
                        f"{path}: {name} is not a catalog metric or recording rule"
                    )
    assert seen_queries > 60


def test_every_page_query_passes_the_house_lint(default_build):
    """Explicit matching, guarded division, counters under rate(), le kept, windows >= 4x scrape."""
    model, files = default_build
    ctx = lint.LintContext(catalog_mod.load(), {r.record for r in model.records()})
    for path, text in _pages(files).items():
        for q in PROMQL_BLOCK.findall(text):
            # regex names: checked above; the imbalance page shows the deployment average on purpose
            problems = [p for p in lint.lint(q, ctx) if p.check not in ("metric-known", "saturation-avg")]
            assert not problems, f"{path}: {problems}\n{q}"


def test_queries_use_the_alert_signals_expressions(default_build):
    """A signal alert's page shows the expression its recording rule records, written from the raw
    series: the same as the rule's own where the rule reads no other record (one that reads the
    bucket rates recorded before it in its group gives the same value: tests/promtool/). An alert
    with a `min_traffic` guard shows it guarded the same way: only where the alert can fire."""
    model, _ = default_build
    recorded = {(r.record, r.labels.get("quantile")): r.expr for r in model.records()}
    records = {r.record for r in model.records()}
    for page in book.pages(model):
        spec = page.alert.spec
        if not spec.signal:
            continue
        sig = model.signal(spec.signal)
        q = f"{spec.quantile:g}" if spec.quantile is not None else None
        raw = model.builder.expr(sig, quantile=spec.quantile)
        own = [ps.expr for ps in page.steps if raw in ps.expr]
        assert own, page.name
        if spec.min_traffic is not None:
            traffic = f"{model.builder.denominator(sig)} >= {spec.min_traffic:g}"
            assert b.only_where(raw, traffic, model.builder.labels.identity(sig.level)) in own, page.name
        else:
            assert raw in own, page.name
        if not reads(recorded[(sig.record, q)]) & records:
            assert recorded[(sig.record, q)] == raw, page.name


def test_thresholds_default_to_the_alert_and_follow_overrides(default_model, specs_with):
    model = default_model
    page = next(p for p in book.pages(model) if p.name == "VLLMTimeToFirstTokenP95High")
    assert page.step("ttft").limits.unhealthy == 2
    assert page.step("queue-time").limits.unhealthy == 1.0
    assert page.step("itl").limits.unhealthy == 0.1  # the ITL alert's threshold
    kv = next(p for p in book.pages(model) if p.name == "VLLMKVCacheUsageHigh").step("kv-usage")
    assert (kv.limits.suspicious, kv.limits.unhealthy, kv.limits.op) == (0.85, 0.95, ">")

    overrides = (
        "overrides:\n  alerts:\n    VLLMTimeToFirstTokenP95High: "
        "{threshold: 4}\n    VLLMKVCacheUsageHigh: {threshold: 0.9}\n"
    )
    model = Model(load(specs_with({"overrides.yaml": overrides})))
    pages = {p.name: p for p in book.pages(model)}
    assert pages["VLLMTimeToFirstTokenP95High"].step("queue-time").limits.unhealthy == 2.0
    assert pages["VLLMEndToEndLatencyP95High"].step("ttft").limits.unhealthy == 4
    assert pages["VLLMKVCacheUsageHigh"].step("kv-usage").limits.unhealthy == 0.9
    text = render_runbooks.render(model)["runbooks/VLLMTimeToFirstTokenP95High.md"]
    assert "above 2.00 s (0.5 x VLLMTimeToFirstTokenP95High's threshold 4, tuned in overrides)" in text


def test_alert_without_runbook_gets_a_default_page(repo, specs_with):
    data = yaml.safe_load((repo / "specs" / "runbooks.yaml").read_text())
    del data["runbooks"]["VLLMRequestErrorRateHigh"]
    model = Model(load(specs_with({"runbooks.yaml": yaml.safe_dump(data, sort_keys=False)})))
    files = render_runbooks.render(model)
    page = files["runbooks/VLLMRequestErrorRateHigh.md"]
    assert "No runbook for this alert is written" in page
    assert "alert-value" in links.anchors(page)
    assert (
        "Alerts without a written runbook (default page only): VLLMRequestErrorRateHigh."
        in files["runbooks/README.md"]
    )


def test_disabled_alert_has_no_page(specs_with):
    disabled = "overrides:\n  alerts:\n    VLLMPreemptionsHigh: {enabled: false}\n"
    files = render_runbooks.render(Model(load(specs_with({"overrides.yaml": disabled}))))
    assert "runbooks/VLLMPreemptionsHigh.md" not in files
    assert "VLLMPreemptionsHigh" not in files["runbooks/README.md"]


# -- spec mistakes ------------------------------------------------------------------------------------


def _edit_and_load(specs_with, line_of, old: str, new: str):
    specs = specs_with({"runbooks.yaml": [(old, new)]})
    with pytest.raises(SpecErrors) as exc:
        validate(load(specs))
    return [str(e) for e in exc.value.errors], line_of(REPO / "specs" / "runbooks.yaml", old)


@pytest.mark.parametrize(
    "old,new,field,message",
    [
        (
            "        query: {kind: signal, signal: gpu_fb_used_ratio}\n",
            "        query: {kind: signal, signal: gpu_fb_used_ratoi}\n",
            "runbooks.GPUFramebufferUsageHigh.steps[0].query.signal",
            "unknown signal 'gpu_fb_used_ratoi'",
        ),
        (
            '        query: {kind: quantile, metric: "vllm:request_queue_time_seconds", quantile: 0.95}\n',
            '        query: {kind: quantile, metric: "vllm:time_in_queue_requests", quantile: 0.95}\n',
            "query.metric",
            "was removed (gone in 0.9.1)",
        ),
        (
            "        query: {kind: signal, signal: gpu_fb_used_ratio}\n",
            "        query: {kind: signals, signal: gpu_fb_used_ratio}\n",
            "runbooks.GPUFramebufferUsageHigh.steps[0].query",
            "unknown query kind",
        ),
        (
            "        unit: ratio\n        suspicious: {alert: 0.97}\n",
            "        unit: ratio\n        suspicous: {alert: 0.97}\n",
            "runbooks.GPUFramebufferUsageHigh.steps[0].suspicous",
            "unknown field 'suspicous'",
        ),
        (
            "        unhealthy: {alert: 1, of: VLLMRequestsWaitingHigh}\n",
            "        unhealthy: {alert: 1, of: VLLMRequestWaitingHigh}\n",
            "unhealthy.of",
            "unknown alert 'VLLMRequestWaitingHigh'",
        ),
        (
            "([[step:fullest-gpus]])",
            "([[step:fullest-gpu]])",
            "runbooks.GPUFramebufferUsageHigh.actions[0]",
            "[[step:fullest-gpu]] names no step",
        ),
        (
            "      - id: fullest-gpus\n",
            "      - id: Fullest_GPUs\n",
            "runbooks.GPUFramebufferUsageHigh.steps[0].id",
            "must be lower-case letters",
        ),
        (
            "  GPUFramebufferUsageHigh:\n",
            "  GPUFramebufferUsageHi:\n",
            "runbooks.GPUFramebufferUsageHi",
            "runbook for unknown alert 'GPUFramebufferUsageHi'",
        ),
        (
            "        suspicious: 1.08\n        unhealthy: 1.15\n",
            "        suspicious: 1.5\n        unhealthy: 1.15\n",
            "steps[2].suspicious",
            "suspicious (1.5) is beyond unhealthy (1.15)",
        ),
    ],
)
def test_spec_mistakes_name_file_line_and_field(specs_with, line_of, old, new, field, message):
    errors, line = _edit_and_load(specs_with, line_of, old, new)
    # a step shared by several pages (a YAML alias) is reported once per page, all at its one definition
    assert len({(e.split(": ")[0], e.rsplit(": ", 1)[-1]) for e in errors}) == 1, errors
    err = errors[0]
    assert "runbooks.yaml:" in err and field in err and message in err, err
    got = int(re.search(r"runbooks\.yaml:(\d+)", err).group(1))
    assert abs(got - line) <= 12, (got, line, err)


def test_cli_reports_runbook_mistakes_without_traceback(specs_with, servewatch, tmp_path):
    specs = specs_with({"runbooks.yaml": [("kind: trend", "kind: trnd")]})
    p = servewatch("generate", "--specs", specs, "--out", tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert re.search(
        r"servewatch: error: .*runbooks\.yaml:\d+: runbooks\.VLLMRequestsWaitingHigh\.steps\[2\]\.query: "
        r"unknown query kind",
        p.stderr,
    ), p.stderr
    assert not (tmp_path / "runbooks").exists()


# -- scoped queries -----------------------------------------------------------------------------------


def test_filters_go_into_selectors_only_where_the_label_exists(default_model):
    model = default_model
    sb = ScopedBuilder(model.config, [parse_filter("namespace=llm"), parse_filter("model_name=~deepseek.*")])
    assert (
        sb.select("vllm:kv_cache_usage_perc")
        == 'vllm:kv_cache_usage_perc{namespace="llm", model_name=~"deepseek.*"}'
    )
    # cache_config_info has no model_name label: the filter would empty it
    assert sb.select("vllm:cache_config_info") == 'vllm:cache_config_info{namespace="llm"}'
    # on DCGM series the workload namespace is exported_namespace (ServiceMonitor, honorLabels false)
    assert sb.select("fb_used") == 'DCGM_FI_DEV_FB_USED{exported_namespace="llm"}'
    assert sb.up("vllm") == 'up{job=~".*vllm.*", namespace="llm"}'
    gpu = ScopedBuilder(model.config, [parse_filter("UUID=GPU-1"), parse_filter("exported_namespace=llm")])
    assert gpu.select("vllm:num_requests_waiting") == 'vllm:num_requests_waiting{namespace="llm"}'
    assert gpu.select("fb_free") == 'DCGM_FI_DEV_FB_FREE{UUID="GPU-1", exported_namespace="llm"}'


def test_scoped_pages_parse(default_build):
    model, _ = default_build
    sb = ScopedBuilder(model.config, [parse_filter('namespace="a\\"b"'), parse_filter("pod!=x")])
    for page in book.pages(model, builder=sb):
        for ps in page.steps:
            promql_parser.parse(ps.expr)
        if page.name == "VLLMKVCacheUsageHigh":
            expr = Queries(model, sb).build(page.steps[0].step.query, page.alert)
            assert 'vllm:kv_cache_usage_perc{namespace="a\\"b", pod!="x"}' in expr


@pytest.mark.parametrize(
    "text,expected",
    [
        ("pod=a", ("pod", "=", "a")),
        ("pod!=a", ("pod", "!=", "a")),
        ("job=~.*vllm.*", ("job", "=~", ".*vllm.*")),
        ('model_name="x=y"', ("model_name", "=", "x=y")),
        ("ns!~a|b", ("ns", "!~", "a|b")),
    ],
)
def test_parse_filter(text, expected):
    assert parse_filter(text) == expected


@pytest.mark.parametrize("bad", ["pod", "=a", "1x=2", ""])
def test_parse_filter_rejects(bad):
    with pytest.raises(ValueError):
        parse_filter(bad)


# -- dashboard links ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old,new,field,message",
    [
        (
            "{uid: servewatch-moe-deployment, slug: moe-deployment, title: MoE deployment, "
            "vars: {namespace: namespace}}\n    steps:\n      - id: fullest-gpus",
            "{uid: servewatch-moe-deploymnt, slug: moe-deployment, title: MoE deployment, "
            "vars: {namespace: namespace}}\n    steps:\n      - id: fullest-gpus",
            "runbooks.GPUFramebufferUsageHigh.dashboards[1].uid",
            "dashboard uid 'servewatch-moe-deploymnt' is not a generated "
            "dashboard; did you mean 'servewatch-moe-deployment'?",
        ),
        (
            "vars: {host: host, uuid: UUID}}\n    steps:\n      - &s_exporter_up",
            "vars: {host: host, uuid: UUID, nmspace: namespace}}\n    steps:\n      - &s_exporter_up",
            "runbooks.GPUFramebufferMetricsMissing.dashboards[0].vars.nmspace",
            "dashboard 'servewatch-gpu-fleet' has no variable 'nmspace'; it has ",
        ),
    ],
    ids=["uid-typo", "variable-typo"],
)
def test_runbook_dashboard_links_must_exist(
    specs_with, line_of, servewatch, tmp_path, old, new, field, message
):
    """A runbook's dashboard link names a generated dashboard and only variables it has: a typo in the uid
    or a variable is a spec error at generate time, with file, line and field, and nothing is written."""
    assert (REPO / "specs" / "runbooks.yaml").read_text().count(old) == 1, old
    specs = specs_with({"runbooks.yaml": [(old, new)]})
    line = line_of(REPO / "specs" / "runbooks.yaml", old)
    with pytest.raises(SpecErrors) as exc:
        validate(load(specs))
    errors = [str(e) for e in exc.value.errors]
    assert len(errors) == 1, errors
    assert re.fullmatch(rf".*runbooks\.yaml:{line}: {re.escape(field)}: {re.escape(message)}.*", errors[0]), (
        errors[0]
    )

    p = servewatch("generate", "--specs", specs, "--out", tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"runbooks.yaml:{line}: {field}: " in p.stderr, p.stderr
    assert not (tmp_path / "runbooks").exists()


def test_shipped_runbook_dashboard_links_land_on_generated_boards(default_build):
    from servewatch.plan.dashboards import build

    model, _ = default_build
    boards = {b["uid"]: {v["name"] for v in b["templating"]["list"]} for b in build(model).values()}
    links = [(name, d) for name, rb in model.spec.runbooks.items() for d in rb.dashboards]
    assert links
    for name, d in links:
        assert d.uid in boards and set(d.vars) <= boards[d.uid], (name, d)


# -- what the pages tell on-call (issue 4's investigation directions) ------------------------------------
# Per alert: the steps the page must have (id -> query kind) and, per page section, phrases (regular
# expressions, case-insensitive, over the section's text with Markdown emphasis and line breaks removed)
# that must appear, and ones that must not.

LATENCY = {
    "steps": {
        "ttft": "signal",
        "itl": "signal",  # split time to first token from decode
        "queue-time": "quantile",
        "prefill-time": "quantile",  # queue vs prefill
        "prompt-length-change": "mean",
        "output-length": "mean",  # input and output lengths
        "errors": "signal",
        "waiting": "signal",
    },
    "phrases": {"ttft": [r"includes the time a request waits in the queue"], "itl": [r"queueing does not"]},
    "forbidden": [r"(excludes|without|does not include|not including) (the )?queu"],
}
DIRECTIONS: dict[str, dict] = {
    "VLLMKVCacheUsageHigh": {
        "steps": {
            "kv-usage": "signal",
            "preemptions": "signal",
            "preemptions-per-request": "ratio",
            "prefix-cache-hits": "ratio",
            "errors": "signal",
            "itl": "signal",
            "ttft": "signal",
        },
        "phrases": {
            "not-meaning": [
                r"not that requests are refused",
                r"does not reject a request because the kv cache is full",
                r"conclude refusals from the ratio alone",
            ],
            "preemptions": [r"recomputed"],
            "prefix-cache-hits": [r"prefix caching help"],
        },
    },
    "VLLMTimeToFirstTokenP95High": {
        **LATENCY,
        "phrases": {**LATENCY["phrases"], "meaning": [r"includes queueing"]},
    },
    "VLLMInterTokenLatencyP95High": {
        **LATENCY,
        "phrases": {
            **LATENCY["phrases"],
            "not-meaning": [r"waiting happens before the first token and shows in ttft"],
        },
    },
    "VLLMEndToEndLatencyP95High": {
        **LATENCY,
        "phrases": {**LATENCY["phrases"], "meaning": [r"sum of queueing, prefill and decode"]},
    },
    "VLLMRequestsWaitingHigh": {
        "steps": {
            "waiting": "signal",
            "queue-growth": "trend",
            "arrivals-change": "rate",  # arrival rate
            "prompt-length": "mean",
            "output-length": "mean",  # request lengths
            "throughput": "signal",
            "running": "signal",
            "kv-usage": "signal",
        },  # throughput, concurrency, headroom
        "phrases": {
            "not-meaning": [r"concurrency limit", r"headroom"],
            "running": [r"concurrency"],
            "actions": [r"scheduling change", r"scale out"],
        },
    },
    "GPUFramebufferUsageHigh": {
        "steps": {
            "fullest-gpus": "signal",
            "fullest-rank": "signal",
            "rank-imbalance": "imbalance",
            "deployment-average": "signal",
            "reserved-memory": "gauge",
            "label-layout": "labels",
            "exporter-generation": "names",
        },
        "phrases": {
            "fullest-gpus": [r"which gpu or mig instance is full, and which pod holds it"],
            "fullest-rank": [r"never judge a deployment by its average or total"],
            "not-meaning": [r"reserved memory .* is not in the denominator"],
            "reserved-memory": [r"outside the ratio's denominator"],
            "label-layout": [r"exporter label layout"],
            "exporter-generation": [r"exporter generation"],
        },
    },
    "VLLMSignalMetricsMissing": {
        "steps": {"missing-inputs": "absence", "vllm-names": "names"},
        "phrases": {
            "vllm-names": [r"a similar name next to the missing one is a rename"],
            "not-meaning": [r"not a missing target"],
        },
    },
    "VLLMMetricsAbsent": {
        "steps": {"target-up": "up", "absent-condition": "absence", "vllm-names": "names"},
        "phrases": {"target-up": [r"a dead target, not a rename"], "vllm-names": [r"renamed"]},
    },
    "DCGMExporterDown": {
        "steps": {
            "targets-down": "absence",
            "exporter-up": "up",
            "fb-metric-names": "names",
            "exporters-by-job": "names",
            "label-layout": "labels",
        },
        "phrases": {
            "targets-down": [r"a dead target, not a rename"],
            "fb-metric-names": [r"the metric was renamed, not lost"],
            "not-meaning": [r"not necessarily a dead exporter"],
        },
    },
    "GPUFramebufferMetricsMissing": {
        "steps": {
            "exporter-up": "up",
            "fb-metric-names": "names",
            "partner-missing": "absence",
            "label-layout": "labels",
        },
        "phrases": {
            "exporter-up": [r"a dead target, not a rename"],
            "fb-metric-names": [r"the metric was renamed, not lost"],
        },
    },
}
NEXT_ANCHOR = re.compile(r'<a id="[^"]+"></a>')


def _sections(text: str) -> dict[str, str]:
    """anchor -> the page text from that anchor to the next one, flattened for phrase matching."""
    marks = list(NEXT_ANCHOR.finditer(text))
    out = {}
    for m, nxt in zip(marks, marks[1:] + [None], strict=True):
        body = text[m.end() : nxt.start() if nxt else len(text)]
        out[links.ANCHOR_RE.match(m.group(0)).group(1)] = " ".join(
            body.replace("**", "").replace("`", "").split()
        )
    return out


# issue 7: an SLO alert's page says which windows burn, for which model, and where the time goes
SLO_STEPS = {
    "burn-long": "slo",
    "burn-short": "slo",
    "burn-6h": "slo",
    "burn-3d": "slo",
    "budget-left": "slo",
    "traffic": "slo",
}
DIRECTIONS["VLLMTTFTErrorBudgetBurn"] = {
    "steps": {
        **SLO_STEPS,
        "per-engine-ttft": "quantile",
        "queue-time": "quantile",
        "prefill-time": "quantile",
        "decode-time": "quantile",
    },
    "phrases": {
        "meaning": [r"a model's requests", r"tier=page", r"tier=ticket", r"both windows"],
        "not-meaning": [r"not a momentary spike", r"queueing", r"prefill"],
        "burn-short": [r"burn has\s+stopped"],
    },
}
DIRECTIONS["VLLMAvailabilityErrorBudgetBurn"] = {
    "steps": {**SLO_STEPS, "by-reason": "signal", "engine-errors": "ratio", "ttft": "signal"},
    "phrases": {"meaning": [r"a model's finished requests", r"abort or error"], "not-meaning": [r"abort"]},
}


def check_directions(model, files) -> list[str]:
    problems = []
    pages = {p.name: p for p in book.pages(model)}
    for alert, want in DIRECTIONS.items():
        page, text = pages[alert], files[links.page_path(alert)]
        sections = _sections(text)
        for step_id, kind in want["steps"].items():
            ps = page.step(step_id)
            if ps is None or step_id not in sections:
                problems.append(f"{alert}: no step {step_id!r}")
            elif ps.step.query.kind != kind:
                problems.append(f"{alert}: step {step_id!r} is a {ps.step.query.kind} query, not {kind}")
        for section, phrases in want["phrases"].items():
            body = sections.get(section, "")
            for phrase in phrases:
                if not re.search(phrase, body, re.I):
                    problems.append(f"{alert}: #{section} does not say /{phrase}/")
        flat = " ".join(sections.values())
        for phrase in want.get("forbidden", ()):
            if re.search(phrase, flat, re.I):
                problems.append(f"{alert}: the page says /{phrase}/")
    return problems


def test_pages_give_the_investigation_directions_of_issue_4(default_build):
    model, files = default_build
    assert set(DIRECTIONS) == {a.alert for a in model.alerts()} - {
        "VLLMPreemptionsHigh",
        "VLLMRequestErrorRateHigh",
        "VLLMEngineStalled",
        # issue 21's alerts: their pages are checked by the scenarios and incidents, not issue 4's list
        "VLLMEngineMissing",
        "VLLMEngineIdle",
        "GPUMissing",
        "GPUXidErrors",
        "VLLMKVTransferFailures",
        "VLLMKVNotificationFailures",
        "VLLMKVRequestsExpired",
        "VLLMKVTransferTimeP95High",
        "SLOInputsMissing",  # issue 22.1's, after issue 4
    }
    assert check_directions(model, files) == []


@pytest.mark.parametrize(
    "old,new,problem",
    [
        (
            "it **includes queueing**",
            "it **excludes queueing**",
            "VLLMTimeToFirstTokenP95High: #meaning does not say",
        ),
        (
            "It includes the time a request waits in the queue",
            "It excludes the time a request waits in the queue",
            "VLLMEndToEndLatencyP95High: #ttft does not say",
        ),
        (
            "      - **Not that requests are refused.**",
            "      - **Maybe requests are refused.**",
            "VLLMKVCacheUsageHigh: #not-meaning does not say /not that requests are refused/",
        ),
        (
            '      - *s_waiting\n      - *s_errors\n    causes:\n      - "A larger',
            '      - *s_errors\n    causes:\n      - "A larger',
            "VLLMInterTokenLatencyP95High: no step 'waiting'",
        ),
        (
            "Never judge a deployment by its average or total",
            "Judge a deployment by its total",
            "GPUFramebufferUsageHigh: #fullest-rank does not say",
        ),
    ],
    ids=["ttft-excludes-queueing", "ttft-step-wording", "kv-refusals", "itl-no-waiting-step", "fb-total"],
)
def test_the_directions_check_catches_a_wrong_page(specs_with, old, new, problem):
    model = Model(load(specs_with({"runbooks.yaml": [(old, new)]})))
    problems = check_directions(model, render_runbooks.render(model))
    assert any(p.startswith(problem) for p in problems), problems
