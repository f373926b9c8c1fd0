"""kustomization.yaml files over the generated Kubernetes manifests.

kustomize reads a file only from its kustomization's folder or below, so each folder of manifests
gets its own kustomization, and an overlay of the user's combines them:

  rules/kubernetes/kustomization.yaml                        the PrometheusRules
  dashboards/kubernetes/kustomization.yaml                   the dashboards in both forms
  dashboards/kubernetes/sidecar/kustomization.yaml           component: keep the sidecar ConfigMaps
  dashboards/kubernetes/grafana-operator/kustomization.yaml  component: keep the GrafanaDashboards

A cluster runs the Grafana sidecar or the Grafana Operator, rarely both, and a GrafanaDashboard
without the Operator's CRD fails the whole apply; so each component deletes the other form. It
selects by the labels every generated object of that form carries, so the user's own ConfigMaps in
the same overlay are left alone.
"""

from __future__ import annotations

from .generated import DASHBOARDS_K8S, GENERATED, RULES_K8S, Generated, relative
from ..yamlout import dump

FILE = "kustomization.yaml"
SIDECAR = f"{DASHBOARDS_K8S}/sidecar"
OPERATOR = f"{DASHBOARDS_K8S}/grafana-operator"


def _kustomization(folder: str, paths: list[str], note: str) -> str:
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative(p, folder) for p in paths],
    }
    return f"# {GENERATED}\n# {note}\n" + dump(body)


def _shared_labels(generated: Generated, paths: list[str]) -> dict[str, str]:
    """The labels every one of these manifests carries."""
    labels = [generated.data(p)["metadata"].get("labels") or {} for p in paths]
    return {k: v for k, v in sorted(labels[0].items()) if all(other.get(k) == v for other in labels[1:])}


def _deleting(generated: Generated, paths: list[str], note: str) -> str:
    """A component that deletes every generated object of the kind these files hold."""
    first = generated.data(paths[0])
    selector = ",".join(f"{k}={v}" for k, v in _shared_labels(generated, paths).items())
    stub = {
        "$patch": "delete",
        "apiVersion": first["apiVersion"],
        "kind": first["kind"],
        "metadata": {"name": "any"},  # the target below picks the objects; the name is not used
    }
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "patches": [{"target": {"kind": first["kind"], "labelSelector": selector}, "patch": dump(stub)}],
    }
    return f"# {GENERATED}\n# {note}\n" + dump(body)


def render(generated: Generated) -> dict[str, str]:
    out: dict[str, str] = {}
    if generated.prometheus_rules:
        out[f"{RULES_K8S}/{FILE}"] = _kustomization(
            RULES_K8S, generated.prometheus_rules, "The PrometheusRules for prometheus-operator."
        )
    configmaps, operator = generated.configmaps, generated.grafana_dashboards
    if configmaps or operator:
        out[f"{DASHBOARDS_K8S}/{FILE}"] = _kustomization(
            DASHBOARDS_K8S,
            configmaps + operator,
            "Both dashboard forms: add the component sidecar/ or grafana-operator/ to keep one.",
        )
    if configmaps and operator:
        out[f"{SIDECAR}/{FILE}"] = _deleting(
            generated,
            operator,
            "Keeps the ConfigMaps for the Grafana sidecar: deletes the GrafanaDashboards.",
        )
        out[f"{OPERATOR}/{FILE}"] = _deleting(
            generated,
            configmaps,
            "Keeps the GrafanaDashboards for the Grafana Operator: deletes the ConfigMaps.",
        )
    return out
