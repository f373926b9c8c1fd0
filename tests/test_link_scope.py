"""Every link into a dashboard keeps the cluster when config names a cluster label: the alert's
dashboard_url, the runbook's dashboard links and the links `servewatch investigate` prints. A link
without it opens the same namespace and model of whichever cluster Grafana picked first."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from servewatch import generate
from servewatch.runbooks import book, links

CLUSTER = "k8s_cluster"


@pytest.fixture(scope="module")
def clustered(specs_with):
    return generate.build(specs_with({"config.yaml": [("cluster_label: null", f"cluster_label: {CLUSTER}")]}))


def test_every_alert_with_a_dashboard_link_sets_the_cluster_from_its_own_label(clustered):
    model, _ = clustered
    assert model.config.cluster_label == CLUSTER
    linked = {
        a.alert: a.annotations["dashboard_url"] for a in model.alerts() if "dashboard_url" in a.annotations
    }
    assert len(linked) >= 15  # GPU, vLLM and SLO alerts
    written = (
        r"var-cluster=\{\{ \$labels." + CLUSTER + r" \}\}",
        r"\{\{ with \$labels." + CLUSTER + r" \}\}&var-cluster=",
    )
    missing = [name for name, url in linked.items() if not any(re.search(w, url) for w in written)]
    assert not missing, f"dashboard_url without var-cluster: {missing}"


def test_runbook_and_investigate_links_carry_the_cluster(clustered):
    model, files = clustered
    pages = [p for p in book.pages(model) if book.dashboards(p)]
    assert pages
    values = {CLUSTER: "eu-1", "namespace": "llm", "model_name": "m", "host": "h", "UUID": "GPU-1"}
    tokens = model.builder.labels.tokens()
    for page in pages:
        for uid, slug, _, vars, _ in book.dashboards(page):
            if not vars:
                continue
            # what investigate prints: the values of the firing alert filled in
            query = parse_qs(
                urlsplit(links.dashboard_url(model.config, uid, slug, vars, values, tokens)).query
            )
            assert query.get("var-cluster") == ["eu-1"], (page.alert.alert, uid, query)
            # what the runbook page shows: the variables with placeholders
            template = links.dashboard_url(model.config, uid, slug, vars, None, tokens)
            assert f"var-cluster=<{CLUSTER}>" in template
            assert template in files[f"runbooks/{page.alert.alert}.md"]


def test_without_a_cluster_label_no_link_names_a_cluster(default_model, default_build):
    _, files = default_build
    assert default_model.config.cluster_label is None
    assert not any(
        "var-cluster" in text for path, text in files.items() if not path.startswith("dashboards/")
    )
