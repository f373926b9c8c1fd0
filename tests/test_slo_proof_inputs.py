"""The SLO proof (promtool/slo.test.yaml) loads the SLO rules and, instead of the whole files of the
families they read, only the records they read (promtool/slo.inputs.rules.yaml): every other group would
be evaluated at every minute of the proof for nothing. These tests keep that cut honest: the inputs are
the shipped rules themselves, and nothing the SLO rules read is missing from what the proof loads."""

from __future__ import annotations

import posixpath

import promql_parser as pp
import pytest
import yaml

from servewatch import yamlio
from servewatch.promql.tree import selectors

SLO_TEST = "promtool/slo.test.yaml"


def _loaded(files: dict[str, str]) -> dict[str, dict]:
    """The rule files the SLO proof loads, by path, parsed."""
    doc = yamlio.load(files[SLO_TEST])
    paths = [posixpath.normpath(posixpath.join("promtool", p)) for p in doc["rule_files"]]
    return {p: yaml.safe_load(files[p]) for p in paths}


def _rules(doc: dict):
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield group["name"], rule


def _shipped(files: dict[str, str]) -> dict[str, dict]:
    return {p: yaml.safe_load(t) for p, t in files.items() if p.startswith("rules/") and p.count("/") == 1}


@pytest.fixture(scope="module")
def files(default_build):
    return default_build[1]


def test_the_proof_loads_the_slo_rules_and_an_inputs_file_not_the_vllm_family(files):
    assert set(_loaded(files)) == {"rules/slo.rules.yaml", "promtool/slo.inputs.rules.yaml"}


def test_every_input_rule_is_a_shipped_rule_of_the_same_group_and_no_alert(files):
    inputs = yaml.safe_load(files["promtool/slo.inputs.rules.yaml"])
    shipped = {(g, repr(r)) for doc in _shipped(files).values() for g, r in _rules(doc)}
    rules = list(_rules(inputs))
    assert rules, "the default SLOs read vLLM records"
    for group, rule in rules:
        assert "alert" not in rule, f"{group}: {rule['alert']} is proven in its own family's tests"
        assert (group, repr(rule)) in shipped, f"{group}: {rule['record']} differs from rules/"


def test_nothing_the_loaded_rules_read_is_a_record_the_proof_does_not_load(files):
    produced = {r["record"] for doc in _shipped(files).values() for _, r in _rules(doc) if "record" in r}
    loaded = _loaded(files)
    loaded_records = {r["record"] for doc in loaded.values() for _, r in _rules(doc) if "record" in r}
    read = {
        sel.name
        for doc in loaded.values()
        for _, rule in _rules(doc)
        for sel in selectors(pp.parse(rule["expr"]))
        if sel.name
    }
    missing = (read & produced) - loaded_records
    assert not missing, f"the SLO proof reads records it does not load: {sorted(missing)}"
    # and the cut is real: vLLM records the SLO rules do not read stay out
    assert "engine:vllm_kv_cache_usage:max" in produced - loaded_records
