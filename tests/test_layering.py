"""servewatch's packages form layers, and a module imports only from its own layer or one below.

Read with `ast`, nothing imported: every `import`/`from ... import` in generator/servewatch, also the
ones inside functions, is resolved to the top-level package or module it reaches (`promql`, `model`,
`lint`, ...) and checked against LAYERS, the table of docs/architecture.md ("Rooms").

The same reading checks that no module under render/ raises a spec error (SpecError, SpecErrors):
renderers format, and what a spec cannot do is refused by validation or the plan, before rendering.

It also checks that no two classes in generator/servewatch share a name: each class is
named after which thing it is (lint's LintFinding, detect's DetectFinding, the spec's Dashboard,
Grafana's ClassicDashboard), so a name in a traceback, an import or a grep means one class.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "generator" / "servewatch"

# Bottom to top. A unit is a subpackage or a top-level module of servewatch.
LAYERS: list[tuple[str, set[str]]] = [
    # facts and PromQL: no spec, no model; diskcache is a stdlib-only cache folder
    ("core", {"catalog", "errors", "promql", "templates", "diskcache", "yamlio"}),
    # the spec and what is built from it
    (
        "model",
        {
            "spec",
            "model",
            "signals",
            "alert_context",
            "absence",
            "scenarios",
            "slo",
            "grafana",
            "runbooks",
        },
    ),
    # what is designed from the model before anything is formatted (SLO engines, tests adapted to
    # tuning and selectors, the dashboards' panels); validation sits here, not under model: it checks
    # the plans (the dashboards' links, the tests' selectors) before anything is rendered
    ("plan", {"plan", "validation"}),
    # the files: renderers format the model and its plan, they never decide or reject
    ("render", {"render", "generate", "writer"}),
    # the commands and what talks to the outside (binaries, a live Prometheus)
    (
        "commands",
        {
            "lint",
            "investigate",
            "detect",
            "calibrate",
            "backtest",
            "promapi",
            "tools",
            "verdicts",
            "verify",
            "promtool_runs",
            "promtool_cost",
            "rule_slices",
            "init",
            "demo",
            "upgrades",
            "cli",
            "__main__",
            "__init__",
        },
    ),
]
LAYER = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}

# (importing file relative to PACKAGE, imported unit): imports that break the table today and are not
# fixed yet, each with why. Empty: keep it so, and remove an entry once its import is gone.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, the import as written, the servewatch unit it reaches) for each import of servewatch."""
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    package = list(rel[:-1])  # the package the module is in, under servewatch
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "servewatch" and len(parts) > 1:
                    out.append((node.lineno, f"import {alias.name}", parts[1]))
        elif isinstance(node, ast.ImportFrom):
            names = ", ".join(a.name for a in node.names)
            text = f"from {'.' * node.level}{node.module or ''} import {names}"
            if node.level:
                up = node.level - 1
                assert up <= len(package), f"{path}:{node.lineno}: {text} leaves the package"
                base = package[: len(package) - up]
                module = node.module.split(".") if node.module else []
            elif node.module and node.module.split(".")[0] == "servewatch":
                base, module = [], node.module.split(".")[1:]
            else:
                continue
            target = base + module
            if target:
                out.append((node.lineno, text, target[0]))
            else:  # from servewatch's root: `from .. import catalog, templates`
                out += [(node.lineno, text, a.name) for a in node.names]
    return out


def _violations() -> list[tuple[str, int, str, str, str]]:
    found = []
    for path in _modules():
        unit = _unit(path)
        for line, text, target in _imports(path):
            if target == unit:
                continue
            if LAYER[target] > LAYER[unit]:
                rel = path.relative_to(PACKAGE).as_posix()
                found.append((rel, line, text, unit, target))
    return found


def test_every_unit_has_a_layer():
    units = {_unit(p) for p in _modules()} | {t for p in _modules() for _, _, t in _imports(p)}
    missing = sorted(units - LAYER.keys())
    assert not missing, f"put these servewatch modules/packages in a layer of LAYERS: {missing}"


def test_no_module_imports_a_higher_layer():
    names = [name for name, _ in LAYERS]
    bad = [
        f"servewatch/{rel}:{line}: {text}  ({unit} is in {names[LAYER[unit]]!r}, "
        f"{target} in the higher {names[LAYER[target]]!r})"
        for rel, line, text, unit, target in _violations()
        if (rel, target) not in KNOWN_EXCEPTIONS
    ]
    assert not bad, "a lower layer imports a higher one:\n" + "\n".join(bad)


def test_known_exceptions_still_exist():
    current = {(rel, target) for rel, _, _, _, target in _violations()}
    stale = sorted(set(KNOWN_EXCEPTIONS) - current)
    assert not stale, f"these imports are gone; remove them from KNOWN_EXCEPTIONS: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ..lint import engine\n", "lint"),
        ("from ..lint.engine import substitute_macros\n", "lint"),
        ("from .. import lint\n", "lint"),
        ("from servewatch.lint import tree\n", "lint"),
        ("import servewatch.lint.tree\n", "lint"),
        ("def f():\n    from ..lint import tree\n", "lint"),
        ("from .tree import walk\n", "promql"),
    ],
)
def test_imports_resolve_to_the_unit_they_reach(tmp_path, monkeypatch, source, expected):
    module = tmp_path / "promql" / "probe.py"
    module.parent.mkdir()
    module.write_text(source)
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path)
    assert [t for _, _, t in _imports(module)] == [expected]


SPEC_ERRORS = {"SpecError", "SpecErrors"}


def _spec_error_raises(root: Path) -> list[str]:
    """Every `raise SpecError(...)`/`raise SpecErrors(...)` (or of the bare class) under `root`, as
    "file:line"."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = exc.attr if isinstance(exc, ast.Attribute) else getattr(exc, "id", None)
            if name in SPEC_ERRORS:
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_no_renderer_raises_a_spec_error():
    raised = _spec_error_raises(PACKAGE / "render")
    assert not raised, (
        "renderers format and never reject; check the spec in validation/ or design it in plan/:\n"
        + "\n".join(f"servewatch/render/{place}" for place in raised)
    )


def test_a_spec_error_raised_by_a_renderer_is_found(tmp_path):
    (tmp_path / "a.py").write_text(
        "from ..errors import SpecError, SpecErrors\nfrom .. import errors\n\n\n"
        "def f(where):\n    raise SpecError('no', where)\n\n\n"
        "def g(problems):\n    raise errors.SpecErrors(problems)\n\n\n"
        "def h():\n    raise ValueError('not a spec error')\n"
    )
    assert _spec_error_raises(tmp_path) == ["a.py:6", "a.py:10"]


def _classes(root: Path) -> dict[str, list[str]]:
    """Every class defined under `root`, at any depth of its module -> where ("file:line")."""
    where: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return where


def _defined_twice(root: Path) -> dict[str, list[str]]:
    return {name: places for name, places in sorted(_classes(root).items()) if len(places) > 1}


def test_every_class_name_is_defined_once():
    twice = _defined_twice(PACKAGE)
    assert not twice, (
        "class names defined more than once in servewatch; name each after which thing it is "
        "(LintFinding, DetectFinding, ...):\n"
        + "\n".join(f"{name}: {', '.join(places)}" for name, places in twice.items())
    )


def test_a_class_name_defined_twice_is_found(tmp_path):
    (tmp_path / "lint").mkdir()
    (tmp_path / "detect").mkdir()
    (tmp_path / "lint" / "findings.py").write_text("import enum\n\n\nclass Finding:\n    pass\n")
    (tmp_path / "detect" / "probes.py").write_text("def probe():\n    class Finding:\n        pass\n")
    (tmp_path / "model.py").write_text("class Model:\n    pass\n")
    assert _defined_twice(tmp_path) == {"Finding": ["detect/probes.py:2", "lint/findings.py:4"]}


def test_every_renderer_of_the_model_is_in_renderers():
    """A render/ module whose `render` takes the model is one of generate.RENDERERS, so the main job,
    the writer's manifest and the drift check see its files; the others take what those write
    (render/ecosystem/) or the specs (render/spec_schema.py)."""
    import importlib
    import inspect

    from servewatch import generate

    of_the_model = set()
    for path in sorted((PACKAGE / "render").glob("*.py")):
        module = importlib.import_module(f"servewatch.render.{path.stem}")
        render = getattr(module, "render", None)
        if callable(render) and list(inspect.signature(render).parameters)[:1] == ["model"]:
            of_the_model.add(render)
    assert of_the_model and of_the_model == set(generate.RENDERERS)
