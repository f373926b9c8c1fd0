"""config.histograms: the histogram reads of each form (promql/histograms.py), the native output as
a whole, its promtool inputs (render/native_series.py) and its generated tests under real promtool.
The live proof on a Prometheus that converts to native histograms is test_native_histograms_live.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import promql_parser as pp
import pytest
import yaml

from servewatch import catalog, generate, tools, verify, writer
from servewatch.errors import SpecErrors
from servewatch.promql import builders as b
from servewatch.promql import tree, variables
from servewatch.promql.histograms import SUFFIXES, Histograms
from servewatch.render.native_series import expand, native_inputs
from servewatch.runbooks.book import pages
from servewatch.spec.loader import load
from test_dashboards import queries

CATALOG = catalog.load()
HISTOGRAMS = {n for n, m in CATALOG.metrics.items() if m.type == "histogram"}
CLASSIC = {f"{n}{suffix}" for n in HISTOGRAMS for suffix in SUFFIXES}
TTFT = "vllm:time_to_first_token_seconds"
ENGINE = ["namespace", "pod", "model_name", "engine"]


def forms(form: str) -> Histograms:
    return Histograms(form, lambda name: name in HISTOGRAMS)


@pytest.fixture(scope="module")
def built(specs_with):
    """The default specs generated in each form: (model, files) by form."""
    out = {}
    for form in ("native", "both"):
        specs = specs_with({"config.yaml": [("histograms: classic", f"histograms: {form}")]})
        out[form] = (specs, *generate.build(specs))
    return out


def _all_queries(model, files) -> list[tuple[str, str]]:
    out = []
    for path, text in sorted(files.items()):
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", path):
            for group in yaml.safe_load(text)["groups"]:
                out += [(f"{path} {r.get('record') or r.get('alert')}", r["expr"]) for r in group["rules"]]
        elif re.fullmatch(r"dashboards/[^/]+\.json", path):
            for where, expr in queries(json.loads(text)):
                out.append((where, expr.replace("$__rate_interval", "5m")))
    out += [(f"runbook {p.name} {s.number}", s.expr) for p in pages(model) for s in p.steps]
    return out


def _names(expr: str) -> set[str]:
    for text in variables.substitute(expr).candidates:  # Grafana variables as placeholders
        try:
            ast = pp.parse(text)
        except ValueError:
            continue
        return {s.name for s in tree.selectors(ast) if s.name}
    raise AssertionError(f"does not parse: {expr}")


# -- the forms -------------------------------------------------------------------------------------
def test_classic_reads_what_the_builders_always_wrote():
    for series in (f'{TTFT}_bucket{{le="2.5"}}', f"{TTFT}_count", "vllm:prompt_tokens_total"):
        assert forms("classic").deduped_rate(series, "5m", ENGINE) == b.dedup(b.rate(series, "5m"), ENGINE)
    assert forms("classic").grouping(["model_name", "le"]) == ["model_name", "le"]


def test_native_reads_one_histogram_series_without_le():
    h = forms("native")
    assert h.deduped_rate(f"{TTFT}_bucket", "5m", [*ENGINE, "le"]) == (
        f"avg by ({', '.join(ENGINE)}) (rate({TTFT}[5m]))"
    )
    assert h.deduped_rate(f'{TTFT}_count{{pod="p"}}', "5m", ENGINE) == (
        f'max by ({", ".join(ENGINE)}) (histogram_count(rate({TTFT}{{pod="p"}}[5m])))'
    )
    assert "histogram_sum(" in h.deduped_rate(f"{TTFT}_sum", "5m", ENGINE)
    below = h.deduped_rate(f'{TTFT}_bucket{{le=~"2.5|2\\\\.5"}}', "5m", ENGINE)
    assert "histogram_fraction(0, 2.5, " in below and "_bucket" not in below and "> 0" in below
    assert h.grouping(["model_name", "le"]) == ["model_name"]
    # a counter whose name ends like a histogram series is a counter
    assert h.deduped_rate("vllm:request_success_total", "5m", ENGINE) == b.dedup(
        b.rate("vllm:request_success_total", "5m"), ENGINE
    )


def test_both_prefers_native_per_identity_and_keeps_classic_buckets_apart():
    read = forms("both").deduped_rate(f"{TTFT}_bucket", "5m", [*ENGINE, "le"])
    assert f"rate({TTFT}[5m])" in read and f"rate({TTFT}_bucket[5m])" in read
    assert f"or on ({', '.join(ENGINE)})" in read
    assert forms("both").grouping(["model_name", "le"]) == ["model_name", "le"]
    assert forms("both").stored(f"{TTFT}_count") == [TTFT, f"{TTFT}_count"]


# -- the output as a whole ----------------------------------------------------------------------------
def test_native_output_reads_no_classic_histogram_series(built):
    _, model, files = built["native"]
    found = _all_queries(model, files)
    assert len(found) > 300
    classic = [(w, n) for w, e in found for n in _names(e) & CLASSIC]
    assert classic == []
    assert any(HISTOGRAMS & _names(e) for _, e in found)


def test_both_output_reads_each_form(built):
    _, model, files = built["both"]
    names = set().union(*(_names(e) for _, e in _all_queries(model, files)))
    assert {TTFT, f"{TTFT}_bucket", f"{TTFT}_count"} <= names


def test_classic_output_is_the_committed_one(repo, default_build):
    """histograms: classic is the default and generates what is committed, byte for byte."""
    assert load(repo / "specs").config.histograms == "classic"
    _, files = default_build
    assert all((repo / p).read_text() == t for p, t in files.items() if p.startswith(("rules/", "promtool/")))


def test_a_wrong_form_is_an_error_at_its_line(specs_with, line_of):
    specs = specs_with({"config.yaml": [("histograms: classic", "histograms: nhcb")]})
    with pytest.raises(SpecErrors) as info:
        load(specs)
    [msg] = [str(e) for e in info.value.errors]
    line = line_of(specs / "config.yaml", "histograms: nhcb")
    assert f"config.yaml:{line}:" in msg and "histograms" in msg and "native" in msg


# -- promtool inputs --------------------------------------------------------------------------------
def test_expand_follows_promtools_notation():
    assert expand("0+60x3 _x2 stale 1e+3 5x1 4-1x2") == [
        0,
        60,
        120,
        180,
        None,
        None,
        "stale",
        1000,
        5,
        5,
        4,
        3,
        2,
    ]


def test_classic_series_fold_into_one_native_histogram():
    labels = 'pod="p"'
    series = [
        {"series": f'{TTFT}_bucket{{{labels}, le="0.5"}}', "values": "0+3x2"},
        {"series": f'{TTFT}_bucket{{{labels}, le="+Inf"}}', "values": "0+10x2"},
        {"series": f"{TTFT}_count{{{labels}}}", "values": "0+10x2"},
        {"series": f"{TTFT}_sum{{{labels}}}", "values": "0+2x2"},
        {"series": 'up{job="vllm"}', "values": "1x2"},
    ]
    [native, up] = native_inputs(series, forms("native"))
    assert native == {
        "series": f"{TTFT}{{{labels}}}",
        "values": "{{schema:-53 sum:0 count:0 custom_values:[0.5] buckets:[0 0]}}"
        "+{{schema:-53 sum:2 count:10 custom_values:[0.5] buckets:[3 7]}}x2",
    }
    assert up == series[-1]
    assert native_inputs(series, forms("classic")) == series
    assert len(native_inputs(series, forms("both"))) == len(series) + 1  # both forms stored


def test_a_bucket_falling_by_float_noise_is_no_counter_reset():
    """valid - good of two float counters may fall by an ulp: Prometheus would see a reset."""
    good, valid = [0.0, 0.1, 0.2], [0.0, 0.1 + 0.2, 0.4]
    assert valid[2] - good[2] < valid[1] - good[1]  # 0.20000000000000004, then 0.2
    series = [
        {"series": f'{TTFT}_bucket{{le="2.5"}}', "values": " ".join(map(repr, good))},
        {"series": f'{TTFT}_bucket{{le="+Inf"}}', "values": " ".join(map(repr, valid))},
    ]
    [native] = native_inputs(series, forms("native"))
    above = [float(m) for m in re.findall(r"buckets:\[\S+ (\S+)\]", native["values"])]
    assert above == sorted(above)


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize("form", ["native", "both"])
def test_generated_promtool_tests_pass_on_native_inputs(built, tmp_path, form):
    """Every generated promtool test (scenarios, boundaries, records, SLO proofs) with its histogram
    inputs written as native histograms with custom buckets, under real promtool 3.5."""
    specs, _, files = built[form]
    writer.write(tmp_path, files)
    assert "{{schema:-53" in (tmp_path / "promtool/slo.test.yaml").read_text()
    lines = []
    assert verify.run(tmp_path, [], echo=lines.append, specs=specs, cache=False, jobs=2), "\n".join(lines)


@pytest.mark.integration
@pytest.mark.tools("promtool")
@pytest.mark.parametrize("form", ["classic", "native", "both"])
def test_an_idle_stretch_leaves_a_latency_slis_error_ratio_alone(built, default_build, tmp_path, form):
    """An engine idle for half an hour, then serving with 10% of its first tokens past the threshold:
    the TTFT SLI's 1h error ratio is 10% in every form. A native histogram that observed nothing
    has 0 good events, as the classic bucket's rate has; were they absent, the window would average
    good events over the busy half only and valid ones over the hour (an error ratio of -80% here,
    and a burn hidden wherever a model idles)."""
    model, files = default_build if form == "classic" else built[form][1:]
    labels = 'namespace="llm", pod="idle-then-busy-0", model_name="slo-test/idle-then-busy", engine="0"'
    series = [
        {"series": f'{TTFT}_bucket{{{labels}, le="2.5"}}', "values": "0x30 54+54x29"},
        {"series": f'{TTFT}_bucket{{{labels}, le="+Inf"}}', "values": "0x30 60+60x29"},
        {"series": f"{TTFT}_count{{{labels}}}", "values": "0x30 60+60x29"},
    ]
    for path in ("rules/vllm.rules.yaml", "rules/slo.rules.yaml"):
        (tmp_path / Path(path).name).write_text(files[path])
    error = 'slo:sli_error:ratio_rate1h{slo="vllm-ttft", model_name="slo-test/idle-then-busy"}'
    labels_out = 'model_name="slo-test/idle-then-busy", namespace="llm", slo="vllm-ttft"'
    test = {
        "rule_files": ["vllm.rules.yaml", "slo.rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": native_inputs(series, model.builder.histograms),
                "promql_expr_test": [
                    {
                        "expr": f"group without () ({error} > 0.0999 < 0.1001)",
                        "eval_time": "60m",
                        "exp_samples": [{"labels": f"{{{labels_out}}}", "value": 1}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "idle.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    res = subprocess.run(
        [str(tools.find("promtool")), "test", "rules", "idle.test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
