"""Values for the kube-prometheus-stack Helm chart: the PrometheusRules as additionalPrometheusRulesMap.

The chart makes one PrometheusRule per key, named `<release fullname>-<key>`, in the release's
namespace, with the chart's own labels (`release` among them, which its default ruleSelector
matches) followed by `additionalLabels`. A key in both would be written twice and Helm refuses the
manifest, so the manifests' labels that the chart sets itself are left to the chart. The chart writes
`groups` with toYaml and never through `tpl`, so the `{{ $labels.x }}` templates in the annotations
reach Prometheus as they are. The groups are the generated manifests' own.
"""

from __future__ import annotations

from .generated import GENERATED, Generated
from ..yamlout import dump

PATH = "rules/helm/kube-prometheus-stack.values.yaml"
# the labels kube-prometheus-stack puts on every PrometheusRule it makes
CHART_LABELS = frozenset(
    {
        "app",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/part-of",
        "app.kubernetes.io/version",
        "chart",
        "heritage",
        "release",
    }
)

NOTE = """\
# kube-prometheus-stack values: helm upgrade RELEASE prometheus-community/kube-prometheus-stack -f THIS_FILE
# These are the PrometheusRules of rules/kubernetes/ made by the chart: deploy one or the other, not both.
"""


def values(generated: Generated) -> dict:
    rules = {}
    for path in generated.prometheus_rules:
        manifest = generated.data(path)
        entry: dict = {}
        labels = manifest["metadata"].get("labels") or {}
        extra = {k: v for k, v in labels.items() if k not in CHART_LABELS}
        if extra:
            entry["additionalLabels"] = extra
        entry["groups"] = manifest["spec"]["groups"]
        rules[manifest["metadata"]["name"]] = entry
    return {"additionalPrometheusRulesMap": rules}


def render(generated: Generated) -> dict[str, str]:
    if not generated.prometheus_rules:
        return {}
    return {PATH: f"# {GENERATED}\n" + NOTE + dump(values(generated))}
