"""The main job: specs -> model -> every output, as {relative path: text}."""

from __future__ import annotations

from pathlib import Path

from .model import Model
from .render import dashboards, unit_tests, rules
from .render import runbooks as runbook_pages
from .spec.loader import load

# Each renderer takes the Model and returns {relative path: text}.
RENDERERS = [rules.render, unit_tests.render, runbook_pages.render, dashboards.render]


def build(specs: Path) -> tuple[Model, dict[str, str]]:
    model = Model(load(specs))
    files: dict[str, str] = {}
    for render in RENDERERS:
        for path, text in render(model).items():
            if path in files:
                raise RuntimeError(f"two renderers produce {path}")
            files[path] = text
    return model, files
