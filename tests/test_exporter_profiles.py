"""Exporter profiles: every dcgm-exporter fact comes from catalog/dcgm.yaml, and what a profile changes
changes everywhere (rules, dashboards, runbooks, promtool tests)."""

from __future__ import annotations

import json

import pytest
import yaml

from servewatch import catalog, generate


def generate_with(specs, **dcgm) -> dict[str, str]:
    """The generated files with `config.dcgm` changed in a private copy of the specs."""
    path = specs / "config.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["dcgm"] = {**doc["config"]["dcgm"], **dcgm}
    path.write_text(yaml.safe_dump(doc))
    return generate.build(specs)[1]


def panel(files: dict[str, str], board: str, title: str) -> dict:
    panels = json.loads(files[f"dashboards/{board}.json"])["panels"]
    return next(p for p in panels if p["title"] == title and p["type"] != "row")


@pytest.mark.parametrize(("profile", "unit"), [("mib", "MBs"), ("bytes", "Bps")])
def test_nvlink_throughput_is_read_as_the_rate_it_already_is(specs_copy, profile, unit):
    """DCGM's NVLink field is a throughput (MB/s up to exporter 4.8, bytes/s in 4.9), though the
    exporter's CSV types it counter: rate() over it would chart the change of a speed."""
    files = generate_with(specs_copy, fb_units=profile)
    nvlink = panel(files, "gpu-fleet", "NVLink throughput")
    [target] = nvlink["targets"]
    name = catalog.load().dcgm.profile(profile).metric("nvlink_throughput")
    assert name in target["expr"] and "rate(" not in target["expr"]
    assert nvlink["fieldConfig"]["defaults"]["unit"] == unit
