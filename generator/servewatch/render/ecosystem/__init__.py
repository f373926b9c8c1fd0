"""The generated files as the deployment tools people already use expect them (docs/ecosystem.md).

Each module here reads the files the other renderers made, never the model's rules again, so what a
tool deploys is exactly what was generated, proven and committed:

  mixin.py      mixin.libsonnet over rules/ and dashboards/ (kube-prometheus, jsonnet-bundler)
  kustomize.py  kustomization.yaml over the Kubernetes manifests, and a component per dashboard form
  helm.py       kube-prometheus-stack values (additionalPrometheusRulesMap) from the PrometheusRules
"""

from __future__ import annotations

from . import helm, kustomize, mixin
from .generated import Generated


def render(files: dict[str, str]) -> dict[str, str]:
    generated = Generated(files)
    out: dict[str, str] = {}
    for part in (mixin.render(generated), kustomize.render(generated), helm.render(generated)):
        out.update(part)
    return out
