"""Gateway and frontend sources (config.client_side, docs/disaggregated.md "The client's side"): the
catalog's client sources and their renames, the config, the rules, tests and panels they add, and a
real Prometheus 3.5 reading them."""

from __future__ import annotations

from servewatch import catalog


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
