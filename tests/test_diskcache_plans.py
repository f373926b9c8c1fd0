"""The generated promtool tests' plans kept in servewatch's cache folder (plan/kept.py, diskcache.py):
every command validates, and validation designs them. A kept plan is the designed one exactly, for
the default specs and a tuned copy; a model that differs in a part the plan reads (a threshold, the
panel an alert's dashboard_url opens, the catalog) is given its own; a damaged or foreign entry is
designed again."""

from __future__ import annotations

import json

import pytest

from servewatch import catalog, diskcache
from servewatch.model import Model
from servewatch.plan import rule_tests, scenario_tests
from servewatch.spec.loader import load
from servewatch.validation import validate

# plan -> (its module, the plan as a model asks for it, the name of its design)
PLANS = {
    "rule tests": (rule_tests, rule_tests.rule_tests, "_rule_tests"),
    "scenario tests": (scenario_tests, scenario_tests.scenario_tests, "_scenario_tests"),
}

# a threshold and a `for` tuned: every plan of the alerts follows them; and a threshold that a
# scenario cannot adapt to (a ratio is at most 1: tests/test_tuning.py), which verify.py reports
TUNED = {
    "overrides.yaml": [
        (
            "overrides: {}",
            "overrides: {alerts: {GPUFramebufferUsageHigh: {threshold: 0.97, for: 10m}, "
            "VLLMKVCacheUsageHigh: {threshold: 1.0}}}",
        )
    ]
}


def _exactly(plan) -> str:
    """The plan with the type of every value (int or float, tuple or list) and the order of keys."""
    return repr(plan)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "cache"))


def _designs(monkeypatch, module, name) -> list:
    """The models `module`'s design is asked for from now on."""
    asked, real = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda model: asked.append(model) or real(model))
    return asked


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("tuned", [False, True], ids=["default specs", "tuned"])
def test_a_kept_plan_is_the_designed_one_exactly(plan, tuned, repo, specs_with, cache, monkeypatch):
    module, planned, design = PLANS[plan]
    specs = specs_with(TUNED) if tuned else repo / "specs"
    designed = planned(validate(load(specs)).model)
    assert len(list(diskcache.folder(module.CACHE_KIND).iterdir())) == 1
    asked = _designs(monkeypatch, module, design)
    model = validate(load(specs)).model
    kept = planned(model)
    assert not asked, "designed again"
    assert _exactly(kept) == _exactly(designed)
    if module is scenario_tests:  # the scenarios that cannot adapt are the model's own
        assert bool(kept[1]) == tuned
        assert all(any(sc is own for own in model.spec.scenarios) for sc, _ in kept[1])


def _other_panels(model):
    """The same model, each alert's panel another."""
    panels = {
        uid: {alert: 1000 + p for alert, p in shown.items()} for uid, shown in model.dashboard_panels.items()
    }
    return model.with_dashboard_panels(panels)


@pytest.fixture
def catalog_copy(tmp_path, monkeypatch):
    """A copy of the catalog whose default DCGM profile names the framebuffer's used MiB otherwise,
    read by every module instead of the packaged one once the test calls it."""
    dst = tmp_path / "catalog"
    dst.mkdir()
    for p in catalog.DIRECTORY.iterdir():
        if p.name.endswith(".yaml"):
            (dst / p.name).write_text(p.read_text())
    dcgm = dst / "dcgm.yaml"
    used = "{name: DCGM_FI_DEV_FB_USED, unit: MiB}"
    assert used in dcgm.read_text(), "test setup: the mib profile's fb_used"
    dcgm.write_text(dcgm.read_text().replace(used, "{name: DCGM_FI_DEV_FB_USED_MIB, unit: MiB}"))

    def read() -> None:
        monkeypatch.setattr(catalog, "DIRECTORY", dst)
        catalog.load.cache_clear()

    yield read
    catalog.load.cache_clear()  # the next load() reads the packaged catalog once monkeypatch restores it


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("part", ["threshold", "panels", "catalog"])
def test_a_model_that_differs_in_a_part_the_plan_reads_gets_its_own(
    plan, part, repo, specs_with, cache, catalog_copy, monkeypatch
):
    module, planned, design = PLANS[plan]
    built = validate(load(repo / "specs")).model
    first = planned(built)
    if part == "threshold":  # the same panels: only the threshold and `for` moved
        other = Model(load(specs_with(TUNED)), built.dashboard_panels)
    elif part == "catalog":  # the same specs and panels, read under another catalog
        catalog_copy()
        other = Model(load(repo / "specs"), built.dashboard_panels)
    else:
        other = _other_panels(built)
    fresh = getattr(module, design)(other)
    assert _exactly(fresh) != _exactly(first), f"the {part} changes the plan"
    asked = _designs(monkeypatch, module, design)
    assert _exactly(planned(other)) == _exactly(fresh)
    assert asked == [other]


@pytest.mark.parametrize("plan", PLANS)
def test_a_damaged_or_foreign_entry_is_designed_again(plan, repo, cache, monkeypatch):
    module, planned, design = PLANS[plan]
    specs = repo / "specs"
    designed = planned(validate(load(specs)).model)
    (entry,) = diskcache.folder(module.CACHE_KIND).iterdir()
    written = json.loads(entry.read_text())
    foreign = {
        "damaged": entry.read_text()[:-100],
        "another kind": json.dumps({**written, "kind": "slo-plans"}),
        "another shape": json.dumps({**written, "plan": {"tests": written["plan"]}}),
    }
    for what, text in foreign.items():
        entry.write_text(text)
        asked = _designs(monkeypatch, module, design)
        model = validate(load(specs)).model
        assert _exactly(planned(model)) == _exactly(designed), what
        assert asked == [model], what
        assert json.loads(entry.read_text()) == written, f"{what}: kept again"
