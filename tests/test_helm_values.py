"""The kube-prometheus-stack values: the chart must make the same rule groups as the PrometheusRules.

helm is not packaged by Debian nor on PyPI, and the chart is not reachable from here, so the values
are checked against what the chart does with them (docs/ecosystem.md): one PrometheusRule per key
with `groups` as given, the chart's own labels first, then `additionalLabels`.
"""

import yaml

from servewatch import generate

VALUES = "rules/helm/kube-prometheus-stack.values.yaml"


def manifests(files) -> dict[str, dict]:
    found = [yaml.safe_load(t) for p, t in files.items() if p.endswith(".prometheusrule.yaml")]
    return {m["metadata"]["name"]: m for m in found}


def test_each_prometheus_rule_is_one_key_with_its_groups(default_build):
    _, files = default_build
    values = yaml.safe_load(files[VALUES])["additionalPrometheusRulesMap"]
    made = manifests(files)
    assert len(made) >= 2 and set(values) == set(made)
    for name, entry in values.items():
        assert entry["groups"] == made[name]["spec"]["groups"], name
    # the annotations' templates reach Prometheus untouched: the chart never runs them through tpl
    assert "{{ $labels.UUID }}" in files[VALUES]


def test_labels_the_chart_sets_itself_are_left_to_it(specs_with):
    """The chart labels every PrometheusRule with `release` (what its ruleSelector matches), `app` and
    the app.kubernetes.io set; the same key again in additionalLabels is a duplicate key Helm refuses."""
    labels = "rule_labels:\n    role: alert-rules\n    release: kube-prometheus-stack\n"
    mine = "rule_labels: {release: prod, app: x, app.kubernetes.io/part-of: y, team: inference}\n"
    _, files = generate.build(specs_with({"config.yaml": [(labels, mine)]}))
    for name, entry in yaml.safe_load(files[VALUES])["additionalPrometheusRulesMap"].items():
        assert entry["additionalLabels"] == {"team": "inference"}, name
        assert manifests(files)[name]["metadata"]["labels"]["release"] == "prod"


def test_a_new_family_is_a_new_key(specs_with):
    group = "  - name: dcgm-exporter\n    family: "
    _, files = generate.build(specs_with({"alerts/gpu.yaml": [(group + "gpu", group + "exporter")]}))
    values = yaml.safe_load(files[VALUES])["additionalPrometheusRulesMap"]
    assert "servewatch-exporter" in values
    assert (
        values["servewatch-exporter"]["groups"] == manifests(files)["servewatch-exporter"]["spec"]["groups"]
    )
