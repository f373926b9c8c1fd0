"""Cost panels price each GPU by its kind: a MIG instance at its profile's price, a whole GPU at its
model's, anything else at price_per_gpu_hour. Proven on a real Prometheus 3.5 with a model that
holds an H200, an H100 and a 3g.40gb slice of another H100."""

from __future__ import annotations

import json
import math

import pytest

from servewatch import generate
from servewatch.errors import SpecErrors
from servewatch_testkit import synth
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth.dcgm import dcgm_gpu, dcgm_target
from servewatch_testkit.synth.scrape import stable_uuid, up
from servewatch_testkit.synth.vllm import vllm_engine, vllm_target
from test_dashboards_integration import _rule_files_read

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

STEPS, STEP = 40, 30.0
NS, POD, MODEL = "llm", "mixed-0", "org/mixed-moe"
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
PRICES = {"default": 2.5, H200: 4.0, H100: 3.0, "3g.40gb": 1.25}
COST_PANEL = "Cost per 1M output tokens (instantaneous)"


def _fleet() -> list:
    target = dcgm_target("node-a")
    out = [up(target, 1, steps=STEPS), up(vllm_target(NS, POD), 1, steps=STEPS)]
    gpus = [
        (0, H200, None, 100000, 40000),
        (1, H100, None, 60000, 20986),
        (2, H100, (1, "3g.40gb"), 30000, 10320),
    ]
    for idx, model, mig, used, free in gpus:
        out += dcgm_gpu(
            "node-a",
            idx,
            stable_uuid("prices", str(idx)),
            used,
            free,
            steps=STEPS,
            step=STEP,
            util=0.8,
            pod=POD,
            namespace=NS,
            gpu_model=model,
            mig_instance=mig,
            targets=[target],
        )
    out += vllm_engine(NS, POD, MODEL, 0, steps=STEPS, step=STEP, requests=20)
    return out


DEFAULT_PRICE = "      price_per_gpu_hour: 2.5 "


def _prices(extra: str = "") -> dict:
    """The default dashboards.yaml with prices per GPU model and MIG profile (and `extra` lines)."""
    lines = (
        f'      gpu_model_prices: {{"{H200}": {PRICES[H200]}, "{H100}": {PRICES[H100]}}}\n'
        f'      mig_profile_prices: {{"3g.40gb": {PRICES["3g.40gb"]}}}\n{extra}'
    )
    return {"dashboards.yaml": [(DEFAULT_PRICE, lines + DEFAULT_PRICE)]}


@pytest.fixture(scope="module")
def priced(specs_with):
    return generate.build(specs_with(_prices()))


def _panel(files, board: str, title: str) -> dict:
    doc = json.loads(files[f"dashboards/{board}.json"])
    return next(q for p in doc["panels"] for q in [p, *p.get("panels", [])] if q.get("title") == title)


def test_each_gpu_is_priced_by_its_profile_or_model_on_a_real_prometheus(priced, default_build, tmp_path):
    model, files = priced
    rule_files = []
    for path, text in sorted(files.items()):
        if path.startswith("rules/") and path.endswith(".rules.yaml") and path.count("/") == 1:
            rule_files.append(tmp_path / path.split("/")[1])
            rule_files[-1].write_text(text)
    series = _fleet()
    start = backfill_start(STEPS, STEP)
    t = start + (STEPS - 1) * STEP
    values = {"datasource": "prometheus", "namespace": ".*", "model": ".*", "pod": ".*", "engine": ".*"}
    expr = _panel(files, "vllm-serving", COST_PANEL)["targets"][0]["expr"]
    for name, v in values.items():
        expr = expr.replace(f"${name}", v)
    default_expr = _panel(default_build[1], "vllm-serving", COST_PANEL)["targets"][0]["expr"]
    for name, v in values.items():
        default_expr = default_expr.replace(f"${name}", v)
    # the rule files whose records the board reads (no SLO records: fewer backfill stages)
    board = json.loads(files["dashboards/vllm-serving.json"])
    rule_files = _rule_files_read(rule_files, [board])
    with LocalPrometheus(synth.to_openmetrics(series, start, STEP), rule_files=rule_files) as prom:
        tokens = prom.query_value(f'sum(rate(vllm:generation_tokens_total{{model_name="{MODEL}"}}[5m]))', t)
        got = prom.query_value(expr, t)
        flat = prom.query_value(default_expr, t)
    assert tokens and tokens > 0
    per_hour = PRICES[H200] + PRICES[H100] + PRICES["3g.40gb"]  # the slice at its profile's price
    assert math.isclose(got, per_hour / 3600 / tokens * 1e6, rel_tol=1e-6), (got, per_hour)
    assert math.isclose(flat, 3 * PRICES["default"] / 3600 / tokens * 1e6, rel_tol=1e-6)


def test_the_panels_say_how_gpus_are_priced(priced):
    _, files = priced
    text = _panel(files, "vllm-serving", COST_PANEL)["description"]
    assert "3g.40gb" in text and H200 in text and "2.5" in text, text


def test_prices_by_kind_without_the_gpus_kinds_are_refused(specs_with):
    specs = specs_with(_prices())
    text = (specs / "dashboards.yaml").read_text().replace("gpus_per_engine: null", "gpus_per_engine: 8")
    (specs / "dashboards.yaml").write_text(text)
    with pytest.raises(SpecErrors) as caught:
        generate.build(specs)
    [err] = caught.value.errors
    assert "dashboards.yaml:" in str(err) and "gpus_per_engine" in str(err)
