"""`servewatch init` gives a repository of its own that generates and passes promtool as shipped."""

import pytest


@pytest.mark.tools("promtool")
def test_init_then_generate_and_test(tmp_path, servewatch, repo):
    res = servewatch("init", tmp_path)
    assert res.returncode == 0, res.stderr
    shipped = sorted(p.relative_to(repo / "specs").as_posix() for p in (repo / "specs").rglob("*.yaml"))
    copied = sorted(
        p.relative_to(tmp_path / "specs").as_posix() for p in (tmp_path / "specs").rglob("*.yaml")
    )
    assert copied == shipped
    assert "servewatch-check:" in (tmp_path / "servewatch.mk").read_text()
    assert servewatch("generate", cwd=tmp_path).returncode == 0
    assert (tmp_path / "rules" / "gpu.rules.yaml").read_text() == (
        repo / "rules" / "gpu.rules.yaml"
    ).read_text()
    res = servewatch("test", "--extra", tmp_path / "none", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_init_never_overwrites_without_force(tmp_path, servewatch):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text("overrides: {}\n")
    res = servewatch("init", tmp_path)
    assert res.returncode == 2 and "already exist" in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "specs" / "mine.yaml").exists() and not (tmp_path / "servewatch.mk").exists()
    assert servewatch("init", tmp_path, "--force").returncode == 0
    assert not (tmp_path / "specs" / "mine.yaml").exists() and (tmp_path / "specs" / "config.yaml").exists()
