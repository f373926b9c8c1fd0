"""The main job: specs -> load -> validate -> plan -> render, as {relative path: text}."""

from __future__ import annotations

from pathlib import Path

from .model import Model
from .plan.slo_proofs import slo_test_plan
from .render import (
    alertmanager,
    churn_tests,
    dashboards,
    ecosystem,
    rule_tests,
    rules,
    slo_tests,
    spec_schema,
    unit_tests,
)
from .render import runbooks as runbook_pages
from .spec.loader import load
from .validation import Validated, validate

# The renderers of the model: each a pure function model -> {relative path: text}. A new output format
# is one more module under render/ listed here (docs/architecture.md); the writer and the manifest
# take its files as they take every other. Two outputs are not the model's: render/ecosystem/ views
# the files these write (kustomize, Helm, jsonnet-bundler), and render/spec_schema.py the specs' schema.
RENDERERS = (
    rules.render,
    unit_tests.render,
    rule_tests.render,  # the tests derived from the rules themselves, beside the scenarios'
    churn_tests.render,
    slo_tests.render,
    runbook_pages.render,
    alertmanager.render,
    dashboards.render,
)


def build(specs: Path, out: Path | None = None) -> tuple[Model, dict[str, str]]:
    """The model and every output, paths relative to `out` (default: the folder that holds the specs,
    the layout `servewatch init` makes)."""
    specs = Path(specs)
    validated = validate(load(specs))
    plan(validated)
    files = render(validated)
    return validated.model, _merge([files, spec_schema.render(specs, specs.parent if out is None else out)])


def plan(validated: Validated) -> None:
    """Design, before anything is rendered, what the validation stage did not need to check: the SLO
    proofs (kept on the model and on disk for the renderer). A spec the design cannot follow fails
    here with a spec error; the dashboards and the scenario and rule tests were designed by the
    validation stage, which checks them."""
    slo_test_plan(validated.model)


def render(validated: Validated) -> dict[str, str]:
    """Every output; each renderer formats its part of what the validation stage built."""
    model = validated.model
    # the dashboards were built by the validation stage, which keeps them on the model: their
    # renderer only delivers them
    files = _merge([renderer(model) for renderer in RENDERERS])
    # the deployment tools' views of the files above (kustomize, Helm, jsonnet-bundler)
    return _merge([files, ecosystem.render(files)])


def _merge(parts: list[dict[str, str]]) -> dict[str, str]:
    files: dict[str, str] = {}
    for part in parts:
        for path, text in part.items():
            if path in files:
                raise RuntimeError(f"two renderers produce {path}")
            files[path] = text
    return files
