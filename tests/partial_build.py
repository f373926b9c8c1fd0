"""The rules, dashboards and runbooks `servewatch generate` writes, for tests that read nothing else.

The specs are loaded and validated as generate does (every check it makes before planning), and only
these outputs are rendered. What is left out is the SLO proof (plan/slo_proofs.py): designing it
simulates weeks of traffic and is cached by the specs' content, so every spec variant a test makes
would design it afresh (seconds each) for files the test never reads. The promtool files are left
out with it, unless asked for. test_generate.py proves these files are generate's, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from servewatch.model import Model
from servewatch.render import dashboards, ecosystem, rules, runbooks, unit_tests
from servewatch.spec.loader import load
from servewatch.validation import validate


def build(specs: Path, unit_test_files: bool = False) -> tuple[Model, dict[str, str]]:
    """(model, {path: text}) of rules/, dashboards/ and runbooks/ (with the deployment tools' views
    over them), and promtool/'s scenario tests when `unit_test_files`."""
    validated = validate(load(specs))
    model = validated.model
    files = {**rules.render(model), **dashboards.render(model)}
    files |= ecosystem.render(files)
    files |= runbooks.render(model)
    if unit_test_files:
        files |= unit_tests.render(model)
    return model, files
