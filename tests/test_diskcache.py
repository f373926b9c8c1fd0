"""servewatch's disk cache (diskcache.py) stays within its budget per kind: past it, the entries used
longest ago go, an entry read recently stays, and a cache that cannot be written only costs time."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from servewatch import diskcache


def _age(path, seconds_ago: int) -> None:
    then = path.stat().st_mtime - seconds_ago
    os.utime(path, (then, then))


def test_past_the_budget_the_entries_used_longest_ago_go(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(diskcache, "KIND_BYTES", 250)
    kind = diskcache.folder("demo")
    for i, name in enumerate(["old", "older-but-read", "recent"]):
        diskcache.put("demo", name, "x" * 100)
        _age(kind / name, 100 - 10 * i)
    _age(kind / "older-but-read", 200)
    assert diskcache.get("demo", "older-but-read") == "x" * 100  # read now: used last
    diskcache.put("demo", "new", "y" * 100)
    assert sorted(p.name for p in kind.iterdir()) == ["new", "older-but-read"]
    assert diskcache.get("demo", "old") is None


def test_each_kind_has_its_own_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(diskcache, "KIND_BYTES", 150)
    diskcache.put("one", "a", "x" * 100)
    diskcache.put("two", "b", "x" * 100)
    assert diskcache.get("one", "a") and diskcache.get("two", "b")


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(blocked))
    diskcache.put("demo", "k", "v")
    assert diskcache.get("demo", "k") is None


def test_a_spec_changed_in_memory_is_planned_anew(repo, tmp_path, monkeypatch):
    """The SLO plans are kept by the validated spec, not the files it was read from: a spec
    changed after loading builds the same bytes from a warm cache as from an empty one."""
    from servewatch.generate import plan, render
    from servewatch.spec.loader import load
    from servewatch.validation import validate

    def built(spec, cache: Path) -> dict[str, str]:
        monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(cache))
        validated = validate(spec)
        plan(validated)
        return render(validated)

    spec = load(repo / "specs")
    built(spec, tmp_path / "warm")
    name, slo = next(iter(spec.slos.items()))
    changed = dataclasses.replace(
        spec, slos={**spec.slos, name: slo.model_copy(update={"description": "changed in memory"})}
    )
    assert built(changed, tmp_path / "warm") == built(changed, tmp_path / "empty")


def test_a_model_with_other_dashboard_panels_is_not_given_their_slo_plan(repo, tmp_path, monkeypatch):
    """The SLO tests expect each alert's dashboard_url, which opens the panel the dashboards show it
    in (Model.with_dashboard_panels): a model of the same spec without that map (the Python API)
    gets the plan a fresh design gives it, not the one a build kept."""
    from servewatch.generate import plan
    from servewatch.model import Model
    from servewatch.plan.slo_proofs import slo_test_plan
    from servewatch.spec.loader import load
    from servewatch.validation import validate

    spec = load(repo / "specs")
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "fresh"))
    fresh = slo_test_plan(Model(spec))
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path / "warm"))
    built = validate(spec)
    plan(built)
    assert built.model.dashboard_panels, "the build's alerts open a panel"
    assert slo_test_plan(Model(spec)) == fresh != slo_test_plan(built.model)
