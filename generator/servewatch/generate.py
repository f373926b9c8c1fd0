"""The main job: specs -> load -> validate -> render, as {relative path: text}."""

from __future__ import annotations

from pathlib import Path

from .model import Model
from .render import dashboards, rules, unit_tests
from .render import runbooks as runbook_pages
from .spec.loader import load
from .validation import Validated, validate


def build(specs: Path) -> tuple[Model, dict[str, str]]:
    validated = validate(load(specs))
    return validated.model, render(validated)


def render(validated: Validated) -> dict[str, str]:
    """Every output; each renderer formats its part of what the validation stage built."""
    model = validated.model
    parts = (
        rules.render(model),
        unit_tests.render(model),
        runbook_pages.render(model),
        dashboards.render(model, validated.dashboards),
    )
    files: dict[str, str] = {}
    for part in parts:
        for path, text in part.items():
            if path in files:
                raise RuntimeError(f"two renderers produce {path}")
            files[path] = text
    return files
