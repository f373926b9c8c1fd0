"""Tests for servewatch.promtool against the real promtool/prometheus 3.5.x binaries.

The first test to need them installs into the default cache (a few seconds, once);
later runs reuse it.
"""

import argparse
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from servewatch import promtool as pt

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "generator" / "servewatch" / "promtool.py"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("PROMTOOL", "PROMETHEUS"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def installed() -> dict[str, Path]:
    saved = {v: os.environ.pop(v, None) for v in ("PROMTOOL", "PROMETHEUS")}
    try:
        return pt.install()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def fake_tool(dirpath: Path, name: str, ver: str = "2.42.0") -> Path:
    """A stand-in for a wrong (e.g. bookworm's) binary: only answers --version."""
    p = dirpath / name
    p.write_text(f"#!/bin/sh\necho '{name}, version {ver} (branch: debian/sid, revision: {ver}+ds-1)'\n")
    p.chmod(0o755)
    return p


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="servewatch")
    pt.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    return args.func(args)


# ------------------------------------------------------------------ version


@pytest.mark.parametrize("tool", pt.TOOLS)
def test_version_of_real_binaries(installed, tool):
    raw, ver = pt.version(installed[tool])
    assert ver[:2] == (3, 5)
    assert raw.startswith(f"3.5.{ver[2]}")


def test_version_parses_debian_style_string(tmp_path):
    assert pt.version(fake_tool(tmp_path, "promtool", "3.5.3+ds1")) == ("3.5.3+ds1", (3, 5, 3))


def test_version_of_garbage_is_tool_error(tmp_path):
    p = tmp_path / "promtool"
    p.write_text("#!/bin/sh\necho hello\n")
    p.chmod(0o755)
    with pytest.raises(pt.ToolError, match="no recognisable version"):
        pt.version(p)


# ------------------------------------------------------------------ install


def test_install_layout(installed):
    cache = pt.cache_dir()
    assert installed == {t: cache / "bin" / t for t in pt.TOOLS}
    assert (cache / "bin" / "INSTALLED.json").is_file()
    assert not list(cache.glob(".install-*")), "temp dirs must not be left behind"


def test_install_is_idempotent(installed):
    before = {p: p.stat().st_mtime_ns for p in (pt.cache_dir() / "bin").iterdir()}
    assert pt.install() == installed
    assert {p: p.stat().st_mtime_ns for p in (pt.cache_dir() / "bin").iterdir()} == before


def test_install_without_apt_fails_cleanly(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SERVEWATCH_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no apt-get, no dpkg
    with pytest.raises(pt.ToolError, match="apt-get"):
        pt.install()
    assert not (cache / "bin").exists()


# --------------------------------------------------------------------- find


@pytest.mark.parametrize("tool", pt.TOOLS)
def test_find_uses_cache(installed, tool):
    assert pt.locate(tool) == (installed[tool], "cache")
    assert pt.find(tool) == pt.ensure(tool) == installed[tool]


def test_env_beats_cache(installed, tmp_path, monkeypatch):
    link = tmp_path / "my-promtool"
    link.symlink_to(installed["promtool"])
    monkeypatch.setenv("PROMTOOL", str(link))
    assert pt.locate("promtool") == (link, "env")
    assert pt.find("prometheus") == installed["prometheus"]  # $PROMTOOL only affects promtool


def test_env_wrong_version_is_refused(installed, tmp_path, monkeypatch):
    monkeypatch.setenv("PROMTOOL", str(fake_tool(tmp_path, "promtool")))
    for call in (pt.find, pt.ensure):  # no silent fallback to the (good) cache either
        with pytest.raises(pt.ToolError) as e:
            call("promtool")
        msg = str(e.value)
        assert "2.42.0" in msg and "3.5" in msg and "$PROMTOOL" in msg and str(tmp_path) in msg


def test_env_missing_path_is_refused(installed, tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS", str(tmp_path / "nope"))
    with pytest.raises(pt.ToolError, match=r"\$PROMETHEUS .*not an executable"):
        pt.find("prometheus")


def test_not_found_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEWATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pt.ToolNotFound, match="servewatch promtool install"):
        pt.find("promtool")


def test_wrong_version_on_path_is_refused_not_installed(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SERVEWATCH_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_tool(tmp_path, "promtool")
    with pytest.raises(pt.ToolError, match=r"2\.42\.0.*3\.5\.x.*servewatch promtool install") as e:
        pt.ensure("promtool")
    assert not isinstance(e.value, pt.ToolNotFound)
    assert not cache.exists(), "ensure() must not install over a wrong-version hit"


def test_unknown_tool():
    with pytest.raises(ValueError):
        pt.find("alertmanager")


# ---------------------------------------------------------------------- run


def test_run_real_promtool(installed, tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(
        textwrap.dedent("""\
        groups:
          - name: g
            rules:
              - record: job:up:sum
                expr: sum by (job) (up)
        """)
    )
    r = pt.run("promtool", "check", "rules", rules)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "SUCCESS" in r.stdout + r.stderr
    bad = pt.run("promtool", "check", "rules", tmp_path / "missing.yml")
    assert bad.returncode != 0
    with pytest.raises(subprocess.CalledProcessError):
        pt.run("promtool", "check", "rules", tmp_path / "missing.yml", check=True)


# ------------------------------------------------------------- apt sources


def test_debian_mirror_deb822(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        textwrap.dedent("""\
        Types: deb
        URIs: http://mirror.example/debian-security
        Suites: bookworm-security
        Components: main

        Types: deb-src
        URIs: http://src.example/debian
        Suites: bookworm

        Types: deb
        # a comment
        URIs: http://mirror.example/debian/
        Suites: bookworm bookworm-updates
        Components: main
        Signed-By: /opt/keys/debian.gpg
        """)
    )
    assert pt.debian_mirror(tmp_path) == ("http://mirror.example/debian", "/opt/keys/debian.gpg")


def test_debian_mirror_one_line_format(tmp_path):
    (tmp_path / "sources.list").write_text(
        textwrap.dedent("""\
        # deb http://commented.example/debian bookworm main
        deb http://security.example/debian-security bookworm-security main
        deb http://ppa.example/ubuntu jammy main
        deb [arch=amd64] http://mirror.example/debian bookworm main contrib
        """)
    )
    assert pt.debian_mirror(tmp_path) == ("http://mirror.example/debian", pt._DEFAULT_KEYRING)


def test_debian_mirror_missing(tmp_path):
    with pytest.raises(pt.ToolError, match="no Debian mirror"):
        pt.debian_mirror(tmp_path)


def test_this_machine_has_a_mirror():
    uri, keyring = pt.debian_mirror()
    assert "://" in uri and keyring.startswith("/")


# ---------------------------------------------------------------------- CLI


def test_cli_where(installed, capsys):
    assert cli("promtool", "where") == 0
    out = capsys.readouterr().out.splitlines()
    for tool, line in zip(pt.TOOLS, out, strict=True):
        assert line.split() == [tool, str(installed[tool]), pt.version(installed[tool])[0], "(cache)"]


def test_cli_version(installed, capsys):
    assert cli("promtool", "version") == 0
    out = capsys.readouterr().out
    for tool in pt.TOOLS:
        assert f"{tool} 3.5." in out


def test_cli_install_is_noop_when_cached(installed, capsys):
    assert cli("promtool", "install") == 0
    assert str(installed["promtool"]) in capsys.readouterr().out


def test_cli_error_reporting(installed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROMTOOL", str(fake_tool(tmp_path, "promtool")))
    assert cli("promtool", "where") == 1
    out, err = capsys.readouterr()
    assert err.startswith("servewatch: error: ") and "2.42.0" in err
    assert "prometheus" in out and "(cache)" in out  # the other tool is still reported


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs a system python3")
def test_module_runs_standalone_with_stdlib_only(installed):
    # -I: isolated mode, so neither the venv nor servewatch is importable.
    r = subprocess.run(
        ["/usr/bin/python3", "-I", str(MODULE), "where"], capture_output=True, text=True, cwd=REPO
    )
    assert r.returncode == 0, r.stderr
    assert "(cache)" in r.stdout
    r = subprocess.run(
        [str(REPO / "scripts" / "install-prometheus")], capture_output=True, text=True, cwd=REPO
    )
    assert r.returncode == 0, r.stderr
    assert str(installed["promtool"]) in r.stdout
