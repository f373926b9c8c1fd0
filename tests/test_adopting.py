"""docs/adopting.md's worked example is real: its specs (docs/adopting/specs/, over the installed
defaults) pass check, generate and promtool; the page shows them as they are; and its table of
dcgm-exporter versions names only settings the catalog knows, every one of them."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from servewatch import catalog, generate, verify
from servewatch.spec.loader import load

from conftest import REPO

EXAMPLE = REPO / "docs" / "adopting" / "specs"
PAGE = REPO / "docs" / "adopting.md"


@pytest.fixture(scope="module")
def built():
    return generate.build(EXAMPLE)


def test_the_page_shows_each_example_file_as_it_is():
    page = PAGE.read_text()
    files = sorted(EXAMPLE.glob("*.yaml"))
    assert len(files) == 3
    for f in files:
        assert f"`specs/{f.name}`:\n\n```yaml\n{f.read_text()}```" in page, f.name


def test_the_example_tunes_what_it_says_over_the_defaults(built, default_model):
    model, files = built
    spec = load(EXAMPLE)
    assert spec.config.cluster_label == "k8s_cluster" and spec.config.dcgm.hostname_label == "hostname"
    assert len(model.alerts()) == len(default_model.alerts()), "every default alert, none lost"
    rules = {
        r["alert"]: r
        for g in yaml.safe_load(files["rules/gpu.rules.yaml"])["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    fb = rules["GPUFramebufferUsageHigh"]
    assert fb["for"] == "10m" and re.search(r"> 0\.97\b", fb["expr"]) and "k8s_cluster" in fb["expr"]
    for path, text in files.items():
        if re.fullmatch(r"dashboards/[^/]+\.json", path):
            names = {v["name"] for v in json.loads(text)["templating"]["list"]}
            assert "cluster" in names, path


@pytest.mark.integration
@pytest.mark.tools("promtool")
def test_the_example_passes_promtool(built, tmp_path):
    _, files = built
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    said: list[str] = []
    assert verify.run(tmp_path, echo=said.append, specs=EXAMPLE), "\n".join(said)


def _table(page: str) -> list[dict[str, str]]:
    """The rows of the page's dcgm-exporter table, by column."""
    block = page.split("### dcgm-exporter versions at a glance", 1)[1]
    lines = [x for x in block.splitlines() if x.startswith("|")]
    head = [c.strip().strip("`") for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(head, (c.strip().strip("`") for c in row.strip("|").split("|")), strict=True))
        for row in lines[2:]
    ]


def test_the_exporter_table_uses_the_catalogs_settings_and_all_of_them():
    dcgm = catalog.load().dcgm
    rows = _table(PAGE.read_text())
    assert len(rows) >= 3
    assert {r["fb_units"] for r in rows} == set(dcgm.profiles)
    assert {r["hostname_label"] for r in rows} == set(dcgm.host_labels)
