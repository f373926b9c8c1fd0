"""Gateway and frontend sources (config.client_side, docs/disaggregated.md "The client's side"): the
catalog's client sources and their renames, the config, the rules, tests and panels they add, and a
real Prometheus 3.5 reading them."""

from __future__ import annotations

import pytest

from servewatch import catalog, generate
from servewatch.errors import SpecErrors
from servewatch.spec.schema import Config


def test_each_client_source_names_a_catalogued_histogram_per_quantity():
    cat = catalog.load()
    assert set(cat.clients) == {"llm-d-epp", "dynamo-frontend"}
    for source in cat.clients.values():
        assert {f for f, _ in source.fields} == {"ttft", "itl"}
        for _, name in source.fields:
            entry = cat.lookup(name + "_bucket")
            assert entry is not None and entry.type == "histogram" and entry.source == "gateway"
    assert cat.clients["llm-d-epp"].model_label == "model_name"
    assert cat.clients["dynamo-frontend"].model_label is None, "its labels are not documented"


def test_the_endpoint_pickers_older_prefix_points_at_the_new_name():
    cat = catalog.load()
    problem = cat.problem("llm_d_router_epp_request_ttft_seconds_bucket")
    assert problem is not None and "use 'llm_d_epp_request_ttft_seconds' instead" in problem
    assert cat.problem("llm_d_epp_request_ttft_seconds_count") is None
    assert cat.rename_of("llm_d_router_epp_flow_control_pool_saturation").replacement == (
        "llm_d_epp_flow_control_pool_saturation"
    )


CLIENT = "  client_side: null\n"
EPP = "  client_side: {source: llm-d-epp}\n"


def test_client_side_left_out_builds_the_default_output(default_build, specs_with):
    """Without client_side every generated file is byte for byte what null gives (the committed
    outputs: `generate --check` holds them)."""
    _, files = generate.build(specs_with({"config.yaml": [(CLIENT, "")]}))
    assert files == default_build[1]


@pytest.mark.parametrize(
    "written, field, message",
    [
        ("{source: llm-d-ep}", "config.client_side.source", "did you mean 'llm-d-epp'"),
        ("{source: dynamo-frontend}", "config.client_side", "documents no model label"),
        ("{source: llm-d-epp, selector: 'job=='}", "config.client_side.selector", "double-quoted value"),
        ("{source: llm-d-epp, model_label: 'model-name'}", "config.client_side.model_label", "label name"),
        ("{source: llm-d-epp, route: x}", "config.client_side.route", "unknown field"),
    ],
)
def test_a_bad_client_side_is_an_error_at_its_line(specs_with, line_of, written, field, message):
    specs = specs_with({"config.yaml": [(CLIENT, f"  client_side: {written}\n")]})
    with pytest.raises(SpecErrors) as err:
        generate.build(specs)
    line = line_of(specs / "config.yaml", "  client_side: {")
    assert f"config.yaml:{line}: {field}" in str(err.value)
    assert message in str(err.value)


def test_a_client_source_resolves_its_model_label():
    assert Config(client_side={"source": "llm-d-epp"}).client_side.label == "model_name"
    frontend = Config(client_side={"source": "dynamo-frontend", "model_label": "model"}).client_side
    assert (
        frontend.label == "model" and frontend.metric("ttft") == "dynamo_frontend_time_to_first_token_seconds"
    )
