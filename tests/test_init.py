"""`servewatch init` gives a repository of its own that generates and passes promtool as shipped."""

import json

import jsonschema
import pytest
import yaml


def _outputs(root) -> dict[str, str]:
    """What generate wrote under root, the specs folder aside."""
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for top in ("rules", "dashboards", "runbooks", "promtool", "alertmanager")
        for p in (root / top).rglob("*")
        if p.is_file()
    }


@pytest.mark.tools("promtool")
def test_init_then_generate_and_test(tmp_path, servewatch, repo):
    res = servewatch("init", tmp_path)
    assert res.returncode == 0, res.stderr
    # only what a team tunes; the rest is the installed defaults'
    held = sorted(p.relative_to(tmp_path / "specs").as_posix() for p in (tmp_path / "specs").rglob("*.yaml"))
    assert held == ["config.yaml", "overrides.yaml"]
    assert "servewatch-check:" in (tmp_path / "servewatch.mk").read_text()
    assert servewatch("generate", cwd=tmp_path).returncode == 0
    assert _outputs(tmp_path) == _outputs(repo), "the minimal repo generates what the defaults generate"
    res = servewatch("test", "--extra", tmp_path / "none", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_init_full_copies_every_default_spec(tmp_path, servewatch, repo):
    assert servewatch("init", "--full", tmp_path).returncode == 0
    shipped = sorted(p.relative_to(repo / "specs").as_posix() for p in (repo / "specs").rglob("*.yaml"))
    copied = sorted(
        p.relative_to(tmp_path / "specs").as_posix() for p in (tmp_path / "specs").rglob("*.yaml")
    )
    assert copied == shipped
    assert servewatch("generate", cwd=tmp_path).returncode == 0
    assert _outputs(tmp_path) == _outputs(repo)


def test_init_never_overwrites_without_force(tmp_path, servewatch):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text("overrides: {}\n")
    res = servewatch("init", tmp_path)
    assert res.returncode == 2 and "already exist" in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "specs" / "mine.yaml").exists() and not (tmp_path / "servewatch.mk").exists()
    assert servewatch("init", tmp_path, "--force").returncode == 0
    assert not (tmp_path / "specs" / "mine.yaml").exists() and (tmp_path / "specs" / "config.yaml").exists()


def test_init_points_every_yaml_spec_at_the_schema_beside_it(tmp_path, servewatch):
    """An editor with the YAML language server validates each spec the user opens: the first line names
    the schema by a path relative to the file, and the schema there is the one this servewatch makes."""
    assert servewatch("init", "--full", tmp_path).returncode == 0
    specs = tmp_path / "specs"
    schema = specs / "servewatch.schema.json"
    assert schema.read_text() == servewatch("schema").stdout
    validator = jsonschema.Draft202012Validator(json.loads(schema.read_text()))
    files = sorted(specs.rglob("*.yaml"))
    assert any(f.parent != specs for f in files)  # subfolders need ../
    for f in files:
        first, rest = f.read_text().split("\n", 1)
        assert first.startswith("# yaml-language-server: $schema="), f
        assert (f.parent / first.split("=", 1)[1]).resolve() == schema.resolve(), f
        assert list(validator.iter_errors(yaml.safe_load(rest))) == [], f
    # generating in the new repository keeps that schema, and the drift check covers it
    assert servewatch("generate", cwd=tmp_path).returncode == 0
    schema.write_text(
        schema.read_text().replace('"additionalProperties": false', '"additionalProperties": true')
    )
    res = servewatch("generate", "--check", cwd=tmp_path)
    assert res.returncode == 1 and "specs/servewatch.schema.json" in res.stdout
