"""The spec JSON Schema: what an editor checks as people type must agree with what the loader says.

The schema carries the structure (keys, types, allowed values, required fields). It must never flag
what the loader accepts, and must flag the structural mistakes the loader refuses: a misspelt key, a
wrong type, an unknown value. Checks the loader makes beyond structure are listed at the end.
"""

import functools
import json
import random

import jsonschema
import pytest
import yaml
from test_dashboards import walk_json  # (path, value) of every value in a document

from servewatch import diskcache, yamlio
from servewatch.errors import SpecErrors
from servewatch.render import spec_schema
from servewatch.spec.loader import load

SCHEMA = json.loads(spec_schema.text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def schema_errors(data) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(data)]


def loader_errors(tmp_path, name: str, data) -> list[str]:
    """The loader's verdict on one spec file alone (structure and values; no cross-file checks)."""
    folder = tmp_path / "one"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    (folder / name).write_text(yaml.dump(data, Dumper=dumper, sort_keys=False))
    try:
        load(folder)
    except SpecErrors as exc:
        return [str(e) for e in exc.errors]
    return []


def spec_documents(repo) -> dict[str, dict]:
    """The default spec files' documents, a fresh copy per call for a test to edit."""
    return json.loads(_spec_documents(repo))


@functools.cache
def _spec_documents(repo) -> str:
    # read once per process, with libyaml: PyYAML's own parser took a third of this module's CPU on
    # the dozen files each test edits one of
    return json.dumps(
        {
            p.relative_to(repo / "specs").as_posix(): yamlio.load(p.read_text())
            for p in sorted((repo / "specs").rglob("*.yaml"))
        }
    )


def test_schema_is_valid_draft_2020_12_and_committed(repo, servewatch):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    res = servewatch("schema")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (repo / "specs" / spec_schema.FILE_NAME).read_text()


def test_the_kept_schema_is_the_one_made_and_is_reused(tmp_path, monkeypatch):
    """The schema is kept on disk (diskcache.py): an empty cache and a kept entry give the same text,
    and the entry is what a later call reads."""
    monkeypatch.setenv("SERVEWATCH_CACHE_HOME", str(tmp_path))
    made = json.dumps(spec_schema.spec_schema(), indent=2, ensure_ascii=False) + "\n"
    assert spec_schema.text() == made  # nothing kept yet: made, then kept
    (entry,) = diskcache.folder(spec_schema.CACHE_KIND).iterdir()
    assert entry.read_text() == made
    entry.write_text("kept")
    assert spec_schema.text() == "kept"  # read back, not made again


def test_every_default_spec_file_validates(repo):
    documents = spec_documents(repo)
    assert {"config.yaml", "signals.yaml", "alerts/gpu.yaml", "runbooks.yaml"} <= set(documents)
    for name, data in documents.items():
        assert schema_errors(data) == [], name


def _edit(repo, name: str, change) -> dict:
    data = spec_documents(repo)[name]
    change(data)
    return data


def _alert(data) -> dict:
    return data["groups"][0]["alerts"][0]


# (file, what a user did, the edit): the loader and the schema must both refuse each one
BOTH_REFUSE = [
    ("alerts/gpu.yaml", "misspelt alert key", lambda d: _alert(d).update(threshhold=0.9)),
    ("alerts/gpu.yaml", "threshold as a word", lambda d: _alert(d).update(threshold="high")),
    ("alerts/gpu.yaml", "severity outside the set", lambda d: _alert(d).update(severity="page")),
    ("alerts/gpu.yaml", "alert without a summary", lambda d: _alert(d).pop("summary")),
    ("alerts/gpu.yaml", "labels as a list", lambda d: _alert(d).update(labels=["team"])),
    ("alerts/gpu.yaml", "enabled as a word", lambda d: _alert(d).update(enabled="maybe")),
    ("config.yaml", "misspelt section", lambda d: d.update(confg=d.pop("config"))),
    ("config.yaml", "misspelt config key", lambda d: d["config"].update(scrape_intervall="30s")),
    ("config.yaml", "scrape interval as a number", lambda d: d["config"].update(scrape_interval=30)),
    ("config.yaml", "selector for an unknown source", lambda d: d["config"]["selectors"].update(nvml="")),
    ("config.yaml", "identity as a string", lambda d: d["config"]["identity"].update(dcgm="UUID")),
    (
        "signals.yaml",
        "unknown signal kind",
        lambda d: d["signals"]["engine_kv_cache_usage"].update(kind="max"),
    ),
    ("signals.yaml", "signal without a level", lambda d: d["signals"]["engine_kv_cache_usage"].pop("level")),
    (
        "overrides.yaml",
        "override of an unknown field",
        lambda d: d.update(overrides={"alerts": {"X": {"treshold": 1}}}),
    ),
    ("dashboards.yaml", "refresh as a number", lambda d: d["dashboards"]["defaults"].update(refresh=30)),
    (
        "runbooks.yaml",
        "unknown step query kind",
        lambda d: d["runbooks"]["GPUFramebufferUsageHigh"]["steps"][0]["query"].update(kind="promql"),
    ),
]

# edits a user may make: both must accept each one
BOTH_ACCEPT = [
    ("alerts/gpu.yaml", "integer threshold", lambda d: _alert(d).update(threshold=1)),
    (
        "alerts/gpu.yaml",
        "extra labels and keep_firing_for",
        lambda d: _alert(d).update(labels={"team": "inference"}, keep_firing_for="5m"),
    ),
    ("config.yaml", "a cluster label", lambda d: d["config"].update(cluster_label="cluster")),
    ("config.yaml", "config left out", lambda d: d.pop("config")),
    (
        "overrides.yaml",
        "an override",
        lambda d: d.update(overrides={"alerts": {"X": {"threshold": 0.9, "for": "10m"}}}),
    ),
    ("overrides.yaml", "several sections in one file", lambda d: d.update(signals={}, scenarios=[])),
]


@pytest.mark.parametrize("name, what, change", BOTH_REFUSE, ids=[c[1] for c in BOTH_REFUSE])
def test_a_structural_mistake_fails_both(repo, tmp_path, name, what, change):
    data = _edit(repo, name, change)
    assert schema_errors(data), f"the schema accepts: {what}"
    assert loader_errors(tmp_path, name.split("/")[-1], data), f"the loader accepts: {what}"


@pytest.mark.parametrize("name, what, change", BOTH_ACCEPT, ids=[c[1] for c in BOTH_ACCEPT])
def test_a_valid_edit_passes_both(repo, tmp_path, name, what, change):
    data = _edit(repo, name, change)
    assert schema_errors(data) == []
    assert loader_errors(tmp_path, name.split("/")[-1], data) == []


# What the loader checks beyond structure (docs/ecosystem.md): the schema lets these through, so an
# editor stays quiet and `servewatch check` names them. Moving one into the schema moves it up.
LOADER_ONLY = [
    ("alerts/gpu.yaml", "for: 5 minutes", lambda d: _alert(d).update({"for": "5 minutes"})),
    ("alerts/gpu.yaml", "alert name not CamelCase", lambda d: _alert(d).update(alert="gpu_full")),
    (
        "alerts/gpu.yaml",
        "summary with a template",
        lambda d: _alert(d).update(summary="GPU {{ $labels.gpu }}."),
    ),
    ("alerts/gpu.yaml", "signal alert without threshold", lambda d: _alert(d).pop("threshold")),
    (
        "signals.yaml",
        "record name off convention",
        lambda d: d["signals"]["engine_kv_cache_usage"].update(record="kv"),
    ),
    ("config.yaml", "rate window under 4 scrapes", lambda d: d["config"].update(rate_window="1m")),
    (
        "config.yaml",
        "exporter profile not in the catalog",
        lambda d: d["config"]["dcgm"].update(fb_units="kib"),
    ),
]


@pytest.mark.parametrize("name, what, change", LOADER_ONLY, ids=[c[1] for c in LOADER_ONLY])
def test_checks_only_the_loader_makes(repo, tmp_path, name, what, change):
    data = _edit(repo, name, change)
    errors = loader_errors(tmp_path, name.split("/")[-1], data)
    assert errors and all(f"/{name.split('/')[-1]}:" in e for e in errors), errors
    assert schema_errors(data) == []


# -- property: random edits of the default specs ------------------------------------------------


def _parent(data, path):
    for part in path[:-1]:
        data = data[part]
    return data


def _wrong_scalar(value):
    """A value of another JSON type than a scalar's own (never a string that reads as a number)."""
    if isinstance(value, bool):
        return "maybe"
    if isinstance(value, (int, float)):
        return "seven"
    if isinstance(value, str):
        return 7
    return "seven"


def _mutate(rng: random.Random, data) -> tuple[str, object]:
    """One random edit, in place: (kind, the path it touched)."""
    nodes = [(p, v) for p, v in walk_json(data) if p]
    path, value = rng.choice(nodes)
    parent, key = _parent(data, path), path[-1]
    kind = rng.choice(["misspell", "container", "scalar", "delete"])
    if kind == "misspell" and isinstance(key, str):
        parent[key[:-1] + key[-1] * 2 + "x"] = parent.pop(key)
    elif kind == "container":
        parent[key] = {"zz_unknown": [1]}
    elif kind == "scalar" and not isinstance(value, (dict, list)):
        parent[key] = _wrong_scalar(value)
    elif kind == "delete":
        parent.pop(key) if isinstance(parent, dict) else parent.pop(key)
    else:
        return "none", path
    return kind, path


def test_random_edits_never_split_the_schema_from_the_loader(repo, tmp_path):
    """Whatever the loader accepts the schema accepts (an editor never flags a valid spec); a misspelt
    key, a container where a scalar goes or a scalar of the wrong type fails both. A deletion may fail
    the loader alone: a field one other field makes necessary is not structure."""
    rng = random.Random(12)
    documents = spec_documents(repo)
    tried = 0
    for _ in range(160):
        name = rng.choice(sorted(documents))
        data = json.loads(json.dumps(documents[name]))
        kind, path = _mutate(rng, data)
        if kind == "none":
            continue
        tried += 1
        by_loader = not loader_errors(tmp_path, name.split("/")[-1], data)
        by_schema = not schema_errors(data)
        where = f"{name} {kind} at {path}"
        if by_loader:
            assert by_schema, f"the schema refuses what the loader accepts: {where}"
        if kind != "delete":
            assert by_loader == by_schema, f"loader {by_loader}, schema {by_schema}: {where}"
    assert tried > 100
