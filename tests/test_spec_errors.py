"""A spec mistake yields one clear message naming file, line and field, and writes nothing."""

import sys
import textwrap
from pathlib import Path

import pytest

from servewatch import generate
from servewatch.errors import SpecErrors
from servewatch.spec.loader import load
from servewatch.validation import validate


@pytest.fixture
def specs_copy(specs_with):
    """A fresh copy of the default specs for a test that edits files in place."""
    return specs_with()


def _replace(path, old, new):
    text = path.read_text()
    assert old in text, f"test setup: {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _errors(specs):
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    return [str(e) for e in info.value.errors]


def test_default_specs_load(repo):
    spec = load(repo / "specs")
    assert len([a for g in spec.groups if spec.group_enabled(g) for a in g.alerts]) == 22
    assert (
        len([a for g in spec.groups for a in g.alerts]) == 30
    )  # 3 need config.role or track, 2 config.client_side, 3 a client source with pools


def test_renamed_metric_names_the_replacement(specs_with, line_of):
    specs = specs_with(
        {"signals.yaml": [("metric: vllm:kv_cache_usage_perc", "metric: vllm:gpu_cache_usage_perc")]}
    )
    line = line_of(specs / "signals.yaml", "vllm:gpu_cache_usage_perc")
    [msg] = _errors(specs)
    assert f"signals.yaml:{line}: signals.engine_kv_cache_usage.metric" in msg
    assert "vllm:kv_cache_usage_perc" in msg and "0.12.0" in msg


def test_unknown_metric_suggests_a_close_name(specs_with):
    typo = ("metric: vllm:num_requests_waiting", "metric: vllm:num_request_waiting")
    [msg] = _errors(specs_with({"signals.yaml": [typo]}))
    assert "did you mean 'vllm:num_requests_waiting'" in msg


def test_typo_in_alert_field_names_file_line_and_field(specs_with, line_of):
    specs = specs_with({"alerts/vllm.yaml": [("        threshold: 50\n", "        treshold: 50\n")]})
    line = line_of(specs / "alerts" / "vllm.yaml", "treshold")
    msgs = _errors(specs)
    expected = (
        f"vllm.yaml:{line}: groups[0].alerts[1].treshold: unknown field 'treshold'; did you mean 'threshold'?"
    )
    assert any(expected in m for m in msgs), msgs


def test_bad_duration(specs_with, line_of):
    specs = specs_with({"alerts/gpu.yaml": [("for: 5m", "for: 5 minutes")]})
    line = line_of(specs / "alerts" / "gpu.yaml", "5 minutes")
    msgs = _errors(specs)
    assert any(
        f"gpu.yaml:{line}: groups[0].alerts[0].for" in m and "not a Prometheus duration" in m for m in msgs
    ), msgs


def test_yaml_syntax_error_has_a_line(specs_with):
    broken = "overrides:\n  alerts: {GPUFramebufferUsageHigh: {threshold: 0.9}\n"
    [msg] = _errors(specs_with({"overrides.yaml": broken}))
    assert "overrides.yaml:" in msg and "not valid YAML" in msg


def test_a_tab_is_named_with_its_line_and_column(specs_with, line_of):
    specs = specs_with({"config.yaml": [("  scrape_interval: 30s", "\tscrape_interval: 30s")]})
    line = line_of(specs / "config.yaml", "\tscrape_interval")
    [msg] = _errors(specs)
    assert f"config.yaml:{line}:" in msg and "a tab character at column 1" in msg, msg
    assert "replace the tab with spaces" in msg


def test_a_value_in_the_wrong_case_suggests_the_right_one(specs_with, line_of):
    specs = specs_with({"config.yaml": [("fb_units: mib", "fb_units: MiB")]})
    line = line_of(specs / "config.yaml", "fb_units: MiB")
    [msg] = _errors(specs)
    assert f"config.yaml:{line}: config.dcgm.fb_units" in msg and msg.endswith("did you mean 'mib'?"), msg


def test_a_misspelt_record_of_a_group_is_a_spec_error(specs_with, line_of):
    old = "    records: [engine_kv_cache_usage, "
    specs = specs_with({"alerts/vllm.yaml": [(old, old.replace("usage", "usag"))]})
    line = line_of(specs / "alerts" / "vllm.yaml", "engine_kv_cache_usag,")
    msgs = _errors(specs)
    assert any(
        f"vllm.yaml:{line}: groups[0].records: group records unknown signal 'engine_kv_cache_usag'" in m
        and "did you mean 'engine_kv_cache_usage'?" in m
        for m in msgs
    ), msgs


def test_override_of_unknown_alert_suggests(specs_with):
    typo = "overrides:\n  alerts:\n    GPUFramebufferUsageHi: {threshold: 0.9}\n"
    [msg] = _errors(specs_with({"overrides.yaml": typo}))
    assert "overrides.yaml:3" in msg and "did you mean 'GPUFramebufferUsageHigh'" in msg


def test_override_of_an_slo_alert_points_at_its_slo(specs_with):
    tuned = "overrides:\n  alerts:\n    VLLMTTFTErrorBudgetBurn: {for: 2m}\n"
    [msg] = _errors(specs_with({"overrides.yaml": tuned}))
    assert "overrides.yaml:3" in msg and "tune it under slos.vllm-ttft" in msg


def test_override_tunes_only_what_its_alert_has(specs_with):
    """Found by `make fuzz`: a threshold on an absence alert was a traceback."""
    tuned = (
        "overrides:\n  alerts:\n    DCGMExporterDown: {threshold: 0.5}\n"
        "    VLLMKVCacheUsageHigh: {min_traffic: 0.1}\n"
    )
    msgs = _errors(specs_with({"overrides.yaml": tuned}))
    assert any("overrides.yaml:3" in m and "no threshold to override" in m for m in msgs), msgs
    assert any("overrides.yaml:4" in m and "min_traffic needs" in m and "a gauge" in m for m in msgs), msgs


def test_a_scenario_proves_only_a_guard_its_alert_can_have(specs_with, line_of):
    """`proves: [min_traffic]` on an alert with no traffic guard (a gauge's) would never be written."""
    alert = "    alert: VLLMKVCacheUsageHigh\n"
    specs = specs_with({"scenarios/vllm.yaml": [(alert, alert + "    proves: [min_traffic]\n")]})
    line = line_of(specs / "scenarios" / "vllm.yaml", "proves: [min_traffic]")
    msgs = _errors(specs)
    assert any(f"vllm.yaml:{line}" in m and "can have no min_traffic guard" in m for m in msgs), msgs


def test_alert_without_scenarios_is_refused(specs_with):
    renamed = ("alert: VLLMRequestsWaitingHigh", "alert: VLLMRequestsWaitingVeryHigh")
    msgs = _errors(specs_with({"alerts/vllm.yaml": [renamed]}))
    assert any("VLLMRequestsWaitingVeryHigh has no firing and no silent scenario" in m for m in msgs), msgs


def test_template_outside_the_subset(specs_with):
    printf = ("{{ $value | humanize }} requests", '{{ $value | printf "%.0f" }} requests')
    msgs = _errors(specs_with({"alerts/vllm.yaml": [printf]}))
    assert any("outside the supported subset" in m for m in msgs), msgs


def test_rate_window_shorter_than_four_scrapes(specs_with):
    [msg] = _errors(specs_with({"config.yaml": [("rate_window: 5m", "rate_window: 1m")]}))
    assert "config.yaml:" in msg and "4 x scrape_interval" in msg


def test_scrape_interval_in_fractions_of_a_second_is_refused(specs_with, line_of):
    specs = specs_with({"config.yaml": [("scrape_interval: 30s", "scrape_interval: 1500ms")]})
    [msg] = _errors(specs)
    line = line_of(specs / "config.yaml", "1500ms")
    assert f"config.yaml:{line}: config.scrape_interval" in msg and "whole number of seconds" in msg


def test_for_in_fractions_of_a_second_is_refused(specs_with):
    """Found by `make fuzz`: `for: 1ms` in an override was a traceback in the boundary tests."""
    tuned = "overrides:\n  alerts:\n    VLLMKVCacheUsageHigh: {for: 1ms}\n"
    [msg] = _errors(specs_with({"overrides.yaml": tuned}))
    assert "overrides.yaml:3" in msg and "for" in msg and "whole number of seconds" in msg


def test_for_shorter_than_its_group_interval_names_the_field_that_did_it(specs_with, repo):
    """Groups of `for: 5m` alerts are evaluated every minute; a `for` tuned below the interval, or an
    interval raised above a `for`, would promise a wait the rules cannot keep."""
    tuned = "overrides:\n  alerts:\n    VLLMKVCacheUsageHigh: {for: 30s}\n"
    [msg] = _errors(specs_with({"overrides.yaml": tuned}))
    assert "overrides.yaml:3" in msg and "for 30s of alert VLLMKVCacheUsageHigh" in msg
    assert "interval 1m of its group vllm-saturation" in msg
    slowed = "overrides:\n  groups:\n    gpu-errors: {interval: 2m}\n"
    [msg] = _errors(specs_with({"overrides.yaml": slowed}))
    assert "overrides.yaml:3" in msg and "GPUXidErrors" in msg and "interval 2m" in msg
    # at the interval is fine: the wait is one evaluation
    at_interval = "overrides:\n  alerts:\n    VLLMKVCacheUsageHigh: {for: 1m}\n"
    validate(load(specs_with({"overrides.yaml": at_interval})))


def test_rate_on_a_gauge_is_refused(specs_with):
    gauge = ("metric: vllm:num_preemptions_total", "metric: vllm:num_requests_running")
    [msg] = _errors(specs_with({"signals.yaml": [gauge]}))
    assert "is a gauge; rate() needs a counter" in msg


def test_bucket_rates_need_a_histogram_per_engine_or_model(specs_with, line_of):
    counter = ("metric: vllm:request_prompt_tokens\n", "metric: vllm:prompt_tokens_total\n")
    specs = specs_with({"signals.yaml": [counter]})
    line = line_of(specs / "signals.yaml", "metric: vllm:prompt_tokens_total\n    record: model:vllm_request")
    [msg] = _errors(specs)
    assert f"signals.yaml:{line}: signals.model_prompt_length_buckets.metric" in msg
    # a histogram is named by its _bucket series: a counter has none
    assert "'vllm:prompt_tokens_total_bucket' is not in the vLLM/DCGM catalogs" in msg
    per_gpu = (
        "kind: bucket_rate\n    level: model\n    metric: vllm:request_generation",
        "kind: bucket_rate\n    level: gpu\n    metric: vllm:request_generation",
    )
    [msg] = _errors(specs_with({"signals.yaml": [per_gpu]}))
    assert "signals.model_generation_length_buckets" in msg and "level: engine or model" in msg


def test_duplicate_alert_across_files(specs_with):
    extra = textwrap.dedent("""\
        groups:
          - name: extra
            family: extra
            alerts:
              - alert: DCGMExporterDown
                absence: {kind: target_down, source: dcgm}
                summary: Twice.
                description: twice
    """)
    msgs = _errors(specs_with({"extra.yaml": extra}))
    assert any("extra.yaml:5" in m and "defined twice" in m and "gpu.yaml" in m for m in msgs), msgs


def test_jsonnet_spec_is_accepted(specs_with):
    tuning = (
        "local lib = import 'lib.libsonnet';\n"
        "{ overrides: { alerts: { GPUFramebufferUsageHigh: { threshold: lib.threshold } } } }\n"
    )
    edits = {"lib.libsonnet": "{ threshold: 0.9 }", "overrides.yaml": None, "tuning.jsonnet": tuning}
    spec = load(specs_with(edits))
    assert spec.overrides.alerts["GPUFramebufferUsageHigh"].threshold == 0.9


def test_jsonnet_import_outside_specs_is_refused(specs_with):
    evil = "local s = import '../secret.libsonnet';\n{ overrides: { alerts: s } }\n"
    specs = specs_with({"evil.jsonnet": evil})
    (specs.parent / "secret.libsonnet").write_text("{ a: 1 }")  # there to be read, were it allowed
    [msg] = _errors(specs)
    assert "evil.jsonnet" in msg and "leaves the specs folder" in msg


def test_yaml_tags_cannot_run_code(specs_with):
    [msg] = _errors(specs_with({"evil.yaml": "overrides: !!python/object/apply:os.system ['true']\n"}))
    assert "evil.yaml:1" in msg and "not valid YAML" in msg


def test_cli_error_is_one_clear_message_and_nothing_is_written(repo, specs_with, tmp_path, servewatch):
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", repo / "specs", "--out", out).returncode == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    renamed = ("metric: vllm:kv_cache_usage_perc", "metric: vllm:gpu_cache_usage_perc")
    res = servewatch("generate", "--specs", specs_with({"signals.yaml": [renamed]}), "--out", out)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert res.stderr.splitlines()[0].startswith("servewatch: error: ") and "signals.yaml:" in res.stderr
    assert "nothing was written" in res.stderr
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


def test_firing_expectation_without_the_value_its_description_shows(specs_with):
    msgs = _errors(specs_with({"scenarios/vllm.yaml": [("            value: '${above}'\n", "")]}))
    assert any("scenarios[0].expect[1].firing[0]" in m and "shows $value" in m for m in msgs), msgs


# -- one translator for every schema: "did you mean" at any depth ----------------------------------------

# DCGMExporterDown's first step, up to the end of its query's kind (in no YAML alias: reported once)
TARGETS_DOWN_STEP = "`config.targets.dcgm` at all.\n        query: {kind: absence"


@pytest.mark.parametrize(
    "file, old, new, where, message",
    [
        (
            "config.yaml",
            "    fb_units: mib",
            "    fb_unit: mib",
            "config.dcgm.fb_unit",
            "unknown field 'fb_unit'; did you mean 'fb_units'?",
        ),
        (
            "alerts/gpu.yaml",
            "absence: {kind: target_down, source: dcgm}",
            "absence: {kind: target_down, sorce: dcgm}",
            "groups[2].alerts[0].absence.sorce",
            "unknown field 'sorce'; did you mean 'source'?",
        ),
        (
            "alerts/gpu.yaml",
            "absence: {kind: target_down, source: dcgm}",
            "absence: {kind: target_dwn, source: dcgm}",
            "groups[2].alerts[0].absence.kind",
            "Input should be 'partner_missing', 'target_down', 'metrics_absent', 'inputs_missing', "
            "'no_progress', 'part_missing', 'rank_idle', 'client_missing', 'pool_missing' or 'pool_gone'; "
            "did you mean 'target_down'?",
        ),
        (
            "dashboards.yaml",
            "      resync_period: 10m",
            "      resync_perod: 10m",
            "dashboards.defaults.kubernetes.resync_perod",
            "unknown field 'resync_perod'; did you mean 'resync_period'?",
        ),
        (
            "runbooks.yaml",
            "        unhealthy: {alert: 0.97}",
            "        unhealthy: {alerts: 0.97}",
            "runbooks.GPUFramebufferUsageHigh.steps[3].unhealthy.alerts",
            "unknown field 'alerts'; did you mean 'alert'?",
        ),
        (
            "runbooks.yaml",
            TARGETS_DOWN_STEP + "}\n        unit: count\n        empty: healthy",
            TARGETS_DOWN_STEP + "}\n        unit: count\n        empty: helthy",
            "runbooks.DCGMExporterDown.steps[0].empty",
            "Input should be 'healthy', 'suspicious', 'unhealthy', 'no-data' or 'info'; "
            "did you mean 'healthy'?",
        ),
        (
            "runbooks.yaml",
            TARGETS_DOWN_STEP + "}",
            TARGETS_DOWN_STEP + ", sorce: dcgm}",
            "runbooks.DCGMExporterDown.steps[0].query.sorce",
            "unknown field 'sorce'; did you mean 'source'?",
        ),
        (
            "runbooks.yaml",
            TARGETS_DOWN_STEP + "}",
            TARGETS_DOWN_STEP.replace("absence", "absense") + "}",
            "runbooks.DCGMExporterDown.steps[0].query",
            "unknown query kind 'absense'; did you mean 'absence'?; use one of signal, quantile,",
        ),
    ],
    ids=[
        "config-dcgm-key",
        "alert-absence-key",
        "alert-absence-kind-value",
        "dashboards-defaults-key",
        "runbook-threshold-key",
        "runbook-verdict-value",
        "runbook-query-key",
        "runbook-query-kind",
    ],
)
def test_misspelt_key_or_value_at_depth_names_the_right_one(
    repo, specs_with, line_of, file, old, new, where, message
):
    assert (repo / "specs" / file).read_text().count(old) == 1, f"test setup: {old!r} is not once in {file}"
    specs = specs_with({file: [(old, new)]})
    path = specs / file
    first_change = next(i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b)
    line = line_of(path, new) + old[:first_change].count("\n")
    expected = f"{path.as_posix()}:{line}: {where}: {message}"
    msgs = _errors(specs)
    assert any(m.startswith(expected) for m in msgs), (expected, msgs)


# -- hostile files: whatever a spec file holds, reading it ends in data or in file:line ---------------------


def _only_error(specs):
    """The one error loading `specs` gives (reading fails before validation can start)."""
    [msg] = _errors(specs)
    return msg


@pytest.mark.parametrize(
    "data, message",
    [
        ("overrides: {}\n# caf\xe9\n".encode("latin-1"), ":2: the file is not UTF-8 text (byte 0xe9"),
        ("overrides: {}\n".encode("utf-16"), ":1: the file is UTF-16 text; save it as UTF-8"),
        ("overrides: {}\n".encode("utf-32"), ":1: the file is UTF-32 text; save it as UTF-8"),
        (b"overrides: {}\n\x00\x01", ":2: the file holds a NUL character"),
    ],
    ids=["latin-1", "utf-16", "utf-32", "nul"],
)
def test_a_file_that_is_not_utf8_text_is_named_with_its_line(specs_copy, data, message):
    (specs_copy / "tuning.yaml").write_bytes(data)
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{(specs_copy / 'tuning.yaml').as_posix()}{message}"), msg


def test_a_utf8_byte_order_mark_is_accepted(specs_copy):
    f = specs_copy / "overrides.yaml"
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    validate(load(specs_copy))


def test_a_symlink_to_a_binary_is_refused_not_read_as_text(specs_copy):
    (specs_copy / "tools.yaml").symlink_to(sys.executable)
    msg = _only_error(specs_copy)
    assert "tools.yaml:" in msg and "is not UTF-8 text" in msg, msg


def test_a_huge_file_is_refused_before_it_is_parsed(specs_copy):
    (specs_copy / "huge.yaml").write_text("# padding\n" * 300_000)
    assert "huge.yaml: the file is larger than" in _only_error(specs_copy)


def test_yaml_nested_hundreds_of_levels_is_refused_with_its_line(specs_copy):
    (specs_copy / "deep.yaml").write_text("overrides:\n  alerts: " + "[" * 600 + "]" * 600 + "\n")
    msg = _only_error(specs_copy)
    assert "deep.yaml:2: overrides.alerts" in msg and "nested deeper than 32 levels" in msg, msg


def test_yaml_that_nests_itself_through_an_alias_is_refused(specs_copy):
    (specs_copy / "loop.yaml").write_text("overrides: &a\n  alerts: [*a]\n")
    msg = _only_error(specs_copy)
    assert "loop.yaml:" in msg and ("nested deeper" in msg or "recursive" in msg), msg


def test_yaml_alias_bomb_is_refused(specs_copy):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (specs_copy / "bomb.yaml").write_text("\n".join(lines) + "\n")
    msg = _only_error(specs_copy)
    assert "bomb.yaml:" in msg and "expands to more than 100000 values" in msg, msg


def _jsonnet(specs, text, name="tuning.jsonnet"):
    (specs / name).write_text(text)
    return (specs / name).as_posix()


def test_jsonnet_runtime_error_keeps_jsonnets_file_line_and_column(specs_copy):
    f = _jsonnet(specs_copy, "local f(x) = x.y;\n{ overrides: f(1) }\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{f}:1:14: Jsonnet error: can only index objects"), msg


def test_jsonnet_error_in_an_import_names_the_imported_file(specs_copy):
    (specs_copy / "lib.libsonnet").write_text("{\n  value: error 'no value here',\n}\n")
    _jsonnet(specs_copy, "local lib = import 'lib.libsonnet';\n{ overrides: lib.value }\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(
        f"{(specs_copy / 'lib.libsonnet').as_posix()}:2:10: Jsonnet error: no value here"
    ), msg


def test_jsonnet_static_error_keeps_its_line_and_column(specs_copy):
    f = _jsonnet(specs_copy, '{\n  overrides: { a: "\\ud800" },\n}\n')
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{f}:2:") and "Unicode escape" in msg, msg


def test_jsonnet_lone_surrogate_in_the_result_is_refused(specs_copy):
    f = _jsonnet(specs_copy, "{ overrides: { alerts: { X: { labels: { a: std.char(55296) } } } } }\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{f}: Jsonnet error: the result holds a character that is not valid Unicode"), msg


def test_jsonnet_import_that_is_not_utf8_is_refused(specs_copy):
    (specs_copy / "lib.libsonnet").write_bytes(b"{ a: '\xff' }")
    f = _jsonnet(specs_copy, "local lib = import 'lib.libsonnet';\n{ overrides: lib }\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{f}:1:") and "is not UTF-8 text" in msg, msg


def test_an_error_is_one_line_whatever_the_spec_holds(specs_copy):
    (specs_copy / "odd.yaml").write_text('"over\\nrides\\u2028": {}\n')
    msg = _only_error(specs_copy)
    assert "\n" not in msg and "\u2028" not in msg and "odd.yaml:1:" in msg, msg


# -- hostile values: each is refused at its file:line, never written into a rule promtool rejects ----------

GPU_ALERTS = "alerts/gpu.yaml"
FB_ALERT = "groups[0].alerts[0]"  # GPUFramebufferUsageHigh


def _fb_alert(key, old, new, message):
    """A case changing `key: old` of GPUFramebufferUsageHigh to `key: new`."""
    return (GPU_ALERTS, f"{key}: {old}", f"{key}: {new}", f"{FB_ALERT}.{key}", message)


GPU_SCENARIO = '{series: \'[[fb_used]]{UUID="GPU-aaaa", gpu="0"'


@pytest.mark.parametrize(
    "file, old, new, field, message",
    [
        *[
            _fb_alert(key, old, new, message)
            for key, old, new, message in [
                # durations: Prometheus' grammar and range (promtool 3.5 takes 2562047h, refuses 2562048h)
                ("for", "5m", "99999999999h", "longer than Prometheus can hold"),
                ("for", "5m", "2562048h", "longer than Prometheus can hold"),
                ("for", "5m", '"5m\\n"', "is not a Prometheus duration"),
                ("for", "5m", "30s5m", "largest first"),
                ("for", "5m", "-5m", "is not a Prometheus duration"),
                # numbers: finite, a number (not a bool or a string), and exactly what the rule will say
                ("threshold", "0.95", ".nan", "finite number"),
                ("threshold", "0.95", ".inf", "finite number"),
                ("threshold", "0.95", "1.0e+999", "finite number"),
                ("threshold", "0.95", "true", "valid number"),
                ("threshold", "0.95", '"0.95"', "valid number"),
                ("threshold", "0.95", "0.9512345", "significant digits"),
            ]
        ],
        ("config.yaml", "scrape_interval: 30s", "scrape_interval: 0s", "config.scrape_interval", "than zero"),
        # names and label values
        (
            GPU_ALERTS,
            "severity: warning\n",
            'severity: warning\n        labels: {team: "a\\nb"}\n',
            f"{FB_ALERT}.labels.team",
            "control character",
        ),
        (
            GPU_ALERTS,
            "severity: warning\n",
            "severity: warning\n        labels: {tëam: a}\n",
            f"{FB_ALERT}.labels.tëam",
            "is not a label name",
        ),
        (
            GPU_ALERTS,
            "severity: warning\n",
            "severity: warning\n        labels: {'': a}\n",
            f"{FB_ALERT}.labels.",
            "is not a label name",
        ),
        (
            GPU_ALERTS,
            "severity: warning\n",
            "severity: warning\n        labels: {team: '{{ $labels.x }}'}\n",
            f"{FB_ALERT}.labels.team",
            "must be static",
        ),
        (
            GPU_ALERTS,
            "severity: warning\n",
            "severity: warning\n        annotations: {x: 'a {{ b'}\n",
            f"{FB_ALERT}.annotations.x",
            "not closed",
        ),
        ("config.yaml", "cluster_label: null", "cluster_label: __name__", "config.cluster_label", "reserved"),
        # found by `make fuzz`: PromQL reads NaN and Inf as numbers where a label is due, a traceback
        (
            "config.yaml",
            "cluster_label: null",
            "cluster_label: NaN",
            "config.cluster_label",
            "reads as a number",
        ),
        (
            "config.yaml",
            "dcgm: [UUID, GPU_I_ID]",
            "dcgm: [UUID, inf]",
            "config.identity.dcgm",
            "reads as a number",
        ),
        # found by `make fuzz`: a model label the engine identity drops broke the dashboards' links,
        # reported without a file and line
        (
            "config.yaml",
            "vllm: [namespace, pod, model_name, engine]",
            "vllm: [pod, model_name, engine]",
            "config.identity.model",
            "namespace must be in identity.vllm too",
        ),
        (
            "config.yaml",
            "dcgm: [UUID, GPU_I_ID]",
            "dcgm: [UUID, UUID]",
            "config.identity.dcgm",
            "listed twice",
        ),
        (
            "config.yaml",
            "rule_namespace: monitoring",
            "rule_namespace: 'a b'",
            "config.rule_namespace",
            "Kubernetes name",
        ),
        (
            "config.yaml",
            "release: kube-prometheus-stack",
            'release: "kube\\nprom"',
            "config.rule_labels.release",
            "Kubernetes label value",
        ),
        (
            "signals.yaml",
            "  engine_requests_waiting:\n",
            "  'engine requests waiting':\n",
            "signals.engine requests waiting",
            "is not a signal name",
        ),
        # URL patterns: {alert}, {alert_lower}; {uid}, {slug}; no other braces
        (
            "config.yaml",
            "runbooks/{alert}.md",
            "runbooks/{team}/{alert}.md",
            "config.runbook_url",
            "unknown placeholder '{team}'; known: {alert}, {alert_lower}",
        ),
        (
            "config.yaml",
            "runbooks/{alert}.md",
            "runbooks/{0}/{alert}.md",
            "config.runbook_url",
            "unknown placeholder '{0}'",
        ),
        ("config.yaml", "runbooks/{alert}.md", "runbooks/{/{alert}.md", "config.runbook_url", "a lone brace"),
        ("config.yaml", "runbooks/{alert}.md", "runbooks/{{alert}}.md", "config.runbook_url", "a lone brace"),
        (
            "config.yaml",
            "runbooks/{alert}.md",
            "runbooks/alert.md",
            "config.runbook_url",
            "must contain {alert}",
        ),
        ("config.yaml", "d/{uid}/{slug}", "d/{uid}/{slug}{", "config.dashboard_url", "a lone brace"),
        (
            "config.yaml",
            "d/{uid}/{slug}",
            "d/{uid}/{team}",
            "config.dashboard_url",
            "unknown placeholder '{team}'; known: {uid}, {slug}",
        ),
        (
            "config.yaml",
            "d/{uid}/{slug}",
            "d/{uid}/{slug}?orgId=1",
            "config.dashboard_url",
            "leave out ? and #",
        ),
        # matchers: PromQL's string syntax and RE2 regexes, in config, signals and runbooks
        (
            "config.yaml",
            "dcgm: 'job=~\".*dcgm.*\"'",
            "dcgm: 'job=~\"(dcgm\"'",
            "config.targets.dcgm",
            "not valid RE2 syntax: missing )",
        ),
        ("config.yaml", "    dcgm: ''\n", "    dcgm: 'job=~\"[\"'\n", "config.selectors.dcgm", "missing ]"),
        (
            "config.yaml",
            "    dcgm: ''\n",
            '    dcgm: "job=\\"a\\nb\\""\n',
            "config.selectors.dcgm",
            "raw control character",
        ),
        (
            "config.yaml",
            "    dcgm: ''\n",
            "    dcgm: 'job=~\"\\d+\"'\n",
            "config.selectors.dcgm",
            "unknown escape sequence \\d",
        ),
        (
            "config.yaml",
            "    dcgm: ''\n",
            "    dcgm: '__name__=\"x\"'\n",
            "config.selectors.dcgm",
            "the metric name",
        ),
        (
            "config.yaml",
            "dcgm: 'job=~\".*dcgm.*\"'",
            "dcgm: ''",
            "config.targets.dcgm",
            "every scrape target",
        ),
        (
            "signals.yaml",
            "'finished_reason=~\"abort|error\"'",
            "'finished_reason=~\"abort(?=x)\"'",
            "signals.model_request_error_ratio.matchers",
            "invalid perl operator",
        ),
        (
            "signals.yaml",
            "'finished_reason=~\"abort|error\"'",
            "'finished_reason=~\"a\\\\Cb\"'",
            "signals.model_request_error_ratio.matchers",
            "\\C (any byte)",
        ),
        (
            "runbooks.yaml",
            "matchers: 'reason=\"capacity\"'",
            "matchers: 'reason=~\"(capacity\"'",
            "runbooks.VLLMKVCacheUsageHigh.steps",
            "missing )",
        ),
        # scenarios: promtool's series notation, bounded
        (
            "scenarios/gpu.yaml",
            GPU_SCENARIO,
            '{series: \'[[fb_used]]{UUID=GPU-aaaa", gpu="0"',
            "scenarios[0].series[0].series",
            "expected a double-quoted value",
        ),
        (
            "scenarios/gpu.yaml",
            GPU_SCENARIO,
            '{series: \'[[fb_used]]{UUID=~"GPU-aaaa", gpu="0"',
            "scenarios[0].series[0].series",
            'a series has label="value"',
        ),
        (
            "scenarios/gpu.yaml",
            GPU_SCENARIO,
            '{series: \'[[nope]]{UUID="GPU-aaaa", gpu="0"',
            "scenarios[0].series[0].series",
            "unknown token [[nope]]",
        ),
        (
            "scenarios/gpu.yaml",
            "values: '${used}x${span}'",
            "values: '${used}x99999999999999999999'",
            "scenarios[0].series[0].values",
            "more than 100000 samples",
        ),
        (
            "scenarios/gpu.yaml",
            "values: '${used}x${span}'",
            "values: '1,2'",
            "scenarios[0].series[0].values",
            "is not a sample",
        ),
        (
            "scenarios/gpu.yaml",
            "      - {at: 'for - eval_interval', firing: []}",
            "      - {at: 100y, firing: []}",
            "scenarios[0].expect[0].at",
            "(7d)",
        ),
        (  # issue 22.6: promtool refuses a duration past int64 nanoseconds ("duration out of range")
            "scenarios/gpu.yaml",
            "let: {used: '80000 * above'",
            "let: {used: '80000 * above + 0 * 2562048h'",
            "scenarios[0].let.used",
            "longer than Prometheus can hold",
        ),
        (
            "scenarios/gpu.yaml",
            "      - {at: 'for - eval_interval', firing: []}",
            "      - {at: 'for + 2562048h', firing: []}",
            "scenarios[0].expect[0].at",
            "longer than Prometheus can hold",
        ),
        (  # an expression of durations is held to the 7d a literal `at` is held to
            "scenarios/gpu.yaml",
            "      - {at: 'for - eval_interval', firing: []}",
            "      - {at: 'for + 8d', firing: []}",
            "scenarios[0].expect[0].at",
            "later than a scenario may run (7d)",
        ),
        (  # the tests of an absence alert wait out its `for` too
            "alerts/vllm.yaml",
            "absence: {kind: metrics_absent, source: vllm, startup_grace: 45m}\n        for: 10m",
            "absence: {kind: metrics_absent, source: vllm, startup_grace: 45m}\n        for: 200y",
            "groups[7].alerts[0].for",
            "promtool loads at most 100,000 per series",
        ),
        (
            "scenarios/gpu.yaml",
            "name: full GPU next to an empty one on the same host",
            "name: ' '",
            "scenarios[0].name",
            "must not be empty",
        ),
    ],
    ids=lambda v: None,
)
def test_a_hostile_value_is_refused_at_its_line(specs_copy, file, old, new, field, message):
    path = specs_copy / file
    text = path.read_text()
    assert text.count(old) >= 1, f"test setup: {old!r} not in {path}"
    at = text.index(old)
    path.write_text(text.replace(old, new, 1))
    first_change = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(old))
    line = text[: at + first_change].count("\n") + 1
    msgs = _errors(specs_copy)
    assert len(msgs) == 1, msgs
    [msg] = msgs
    assert msg.startswith(f"{path.as_posix()}:"), msg
    assert f": {field}" in msg and message in msg, (field, message, msg)
    found_line = int(msg[len(path.as_posix()) + 1 :].split(":")[0])
    assert abs(found_line - line) <= 1, (line, msg)  # a flow mapping may start on the line before


REPO_SPECS = Path(__file__).resolve().parents[1] / "specs"


def _rules_text(specs):
    _, files = generate.build(specs)
    return "".join(text for path, text in files.items() if path.endswith(".rules.yaml"))


@pytest.mark.parametrize(
    "section, written, kept, selected",
    [
        ("targets", "dcgm: 'job=\"gpu-metrics\"'", "vllm", ['up{job="gpu-metrics"}', 'up{job=~".*vllm.*"}']),
        (
            "selectors",
            "vllm: 'env=\"prod\"'",
            "dcgm",
            ['vllm:kv_cache_usage_perc{env="prod"}', "(DCGM_FI_DEV_FB_USED)"],
        ),
    ],
)
def test_a_map_naming_one_source_keeps_the_others_default(specs_with, section, written, kept, selected):
    text = (REPO_SPECS / "config.yaml").read_text()
    block = text[text.index(f"  {section}:\n") :]
    block = block[: block.index("\n", block.index("    vllm:")) + 1]
    specs = specs_with({"config.yaml": [(block, f"  {section}:\n    {written}\n")]})
    assert getattr(load(specs).config, section)[kept] == getattr(load(REPO_SPECS).config, section)[kept]
    rules = _rules_text(specs)
    assert all(s in rules for s in selected), selected


def test_a_signal_the_dashboards_read_cannot_be_removed(specs_copy):
    f = specs_copy / "signals.yaml"
    text = f.read_text()
    start = text.index("  engine_preemptions_rate:\n")
    f.write_text(text[:start] + text[text.index("  engine_prompt_tokens_rate:\n") :])
    line = text[: text.index("\nsignals:")].count("\n") + 2  # the line of `signals:`
    expected = f"{f.as_posix()}:{line}: signals: the dashboards read signal 'engine_preemptions_rate'"
    msgs = _errors(specs_copy)
    assert any(m.startswith(expected) for m in msgs), msgs


# -- found by tests/test_fuzz_specs.py -------------------------------------------------------------------


def test_yaml_lines_are_counted_as_editors_count_them(specs_copy):
    # YAML also breaks lines at U+0085 and U+2028: a line number past them would point too far
    (specs_copy / "tuning.yaml").write_text("# caf\u2028\u0085\noverrides:\n  alerts: {X: {for: 5 m}}\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{(specs_copy / 'tuning.yaml').as_posix()}:3: overrides.alerts.X.for"), msg


def test_a_character_yaml_refuses_is_named_with_its_line(specs_copy):
    (specs_copy / "tuning.yaml").write_text("overrides:\n  alerts: {}\n  # \x7f\n")
    msg = _only_error(specs_copy)
    assert msg.startswith(f"{(specs_copy / 'tuning.yaml').as_posix()}:3: not valid YAML: character U+007F"), (
        msg
    )


def test_matchers_are_respelt_so_joined_selectors_stay_valid(specs_copy):
    # the dashboards append their variable matchers with ", ": a trailing comma gave "a, , b"
    _replace(specs_copy / "config.yaml", "    vllm: ''\n", '    vllm: \' env = "pr\\"od" ,\'\n')
    spec = load(specs_copy)
    assert spec.config.selectors["vllm"] == 'env="pr\\"od"'
    assert 'vllm:kv_cache_usage_perc{env="pr\\"od"}' in _rules_text(specs_copy)


@pytest.mark.parametrize("regex", [r"\\Q.*\\E", r"(?P<n>a)(?P<n>b)"])
def test_a_regex_servewatchs_own_promql_reader_cannot_read_is_refused(specs_copy, regex):
    _replace(specs_copy / "config.yaml", "    vllm: ''\n", f"    vllm: 'job=~\"{regex}\"'\n")
    msg = _only_error(specs_copy)
    assert "config.selectors.vllm" in msg and "promql-parser" in msg, msg


def test_a_duration_number_past_32_bits_asks_for_a_larger_unit(specs_copy):
    _replace(specs_copy / "config.yaml", "rate_window: 5m", "rate_window: 4294967296ms")
    msg = _only_error(specs_copy)
    assert "config.rate_window" in msg and "write it with a larger unit" in msg, msg


def test_an_output_folder_that_cannot_be_written_changes_nothing(specs_copy, tmp_path, servewatch):
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs_copy, "--out", out).returncode == 0
    _replace(specs_copy / "alerts" / "gpu.yaml", "threshold: 0.95", "threshold: 0.97")
    (out / "rules" / "mimir").rename(tmp_path / "mimir")
    (out / "rules" / "mimir").write_text("a file where a folder must be\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    res = servewatch("generate", "--specs", specs_copy, "--out", out)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "cannot write the output" in res.stderr and "nothing was written" in res.stderr
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the rules that could be written were not: no mix of old and new


def test_ratio_threshold_outside_zero_to_one_is_refused(specs_with):
    """Found by `make fuzz`: a GPU memory threshold of 1e300 was a traceback. A percent written where
    the ratio is meant (95 for 0.95) would make an alert that never fires."""
    tuned = (
        "overrides:\n  alerts:\n    GPUFramebufferUsageHigh: {threshold: 95}\n"
        "    VLLMKVCacheUsageHigh: {threshold: 1.0e+300}\n"
        "    VLLMRequestsWaitingHigh: {threshold: 500}\n"
    )
    msgs = _errors(specs_with({"overrides.yaml": tuned}))
    assert len(msgs) == 2, msgs  # the queue length is a count, not a ratio: 500 is fine
    assert any(
        "overrides.yaml:3" in m and "threshold 95 is outside 0-1" in m and "write 0.95" in m for m in msgs
    )
    assert any("overrides.yaml:4" in m and "threshold 1e+300 is outside 0-1" in m for m in msgs), msgs


def test_ratio_threshold_at_the_ends_of_zero_to_one_is_accepted(specs_with):
    tuned = (
        "overrides:\n  alerts:\n    GPUFramebufferUsageHigh: {threshold: 1}\n"
        "    VLLMKVCacheUsageHigh: {threshold: 0}\n"
    )
    model = validate(load(specs_with({"overrides.yaml": tuned}))).model
    assert model.alert("GPUFramebufferUsageHigh").spec.threshold == 1
    assert model.alert("VLLMKVCacheUsageHigh").spec.threshold == 0


def test_ratio_threshold_in_an_alert_spec_is_checked_too(specs_with, line_of):
    specs = specs_with({"alerts/gpu.yaml": [("threshold: 0.95", "threshold: 95")]})
    [msg] = _errors(specs)
    line = line_of(specs / "alerts" / "gpu.yaml", "threshold: 95")
    assert f"alerts/gpu.yaml:{line}" in msg and "groups[0].alerts[0].threshold" in msg and "write 0.95" in msg


def test_a_for_the_generated_tests_cannot_hold_is_refused(specs_with):
    """Found by `make fuzz`: `for: 292y` made building the boundary tests run out of memory. They need
    a sample every scrape_interval through the `for`, and promtool loads every one."""
    tuned = (
        "overrides:\n  alerts:\n    VLLMRequestErrorRateHigh: {for: 292y}\n"
        "    VLLMPreemptionsHigh: {for: 30d}\n"  # 30d fits
    )
    [msg] = _errors(specs_with({"overrides.yaml": tuned}))
    assert "overrides.yaml:3: overrides.alerts.VLLMRequestErrorRateHigh.for: for 292y" in msg
    assert "promtool loads at most 100,000 per series, so `for` can be at most about 34d" in msg
    [msg] = _errors(specs_with({"alerts/gpu.yaml": [("for: 5m", "for: 40d")]}))
    assert "alerts/gpu.yaml:" in msg and "groups[0].alerts[0].for: for 40d" in msg


def test_a_tuning_that_leaves_a_scenario_past_7d_is_refused_by_check(specs_with):
    """Issue 22.6 and DESIGN invariant 14: an override that pushes a scenario's checks past what a
    generated test can run is caught by `check`, not left to a red `servewatch test`."""
    tuning = "overrides:\n  alerts:\n    VLLMMetricsAbsent: {for: 8d}\n"
    msgs = _errors(specs_with({"overrides.yaml": [("overrides: {}\n", tuning)]}))
    assert msgs and all("later than a scenario may run (7d)" in m for m in msgs), msgs
    assert all("with the alert overrides of overrides.yaml" in m and ".expect[" in m for m in msgs), msgs
