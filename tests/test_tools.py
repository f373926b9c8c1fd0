"""servewatch.tools: apt sources, version checks and lookup without binaries; the real binaries where marked.

Stand-in scripts only play binaries of the wrong (or no) version; everything that needs a real tool
carries the `tools` marker, and the install from Debian into a fresh cache is an integration test.
"""

import argparse
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from servewatch import tools
from servewatch.tools import apt_sources, cache, relocate, versions
from servewatch.tools import cli as tools_cli
from servewatch.tools.table import Requirement


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for tool in tools.TOOLS.values():
        monkeypatch.delenv(tool.env_var, raising=False)


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """An empty cache and a PATH holding only what a test puts into the returned folder."""
    monkeypatch.setenv("SERVEWATCH_CACHE", str(tmp_path / "cache"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def stand_in(dirpath: Path, name: str, first_line: str) -> Path:
    """A script that plays a binary of the wrong (or no) version: it only prints `first_line`."""
    p = dirpath / name
    p.write_text(f"#!/bin/sh\necho '{first_line}'\n")
    p.chmod(0o755)
    return p


def bookworm_promtool(dirpath: Path, name: str = "promtool") -> Path:
    return stand_in(dirpath, name, f"{name}, version 2.42.0+ds (branch: debian/sid, revision: 2.42.0+ds-5)")


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="servewatch")
    tools_cli.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    return args.func(args)


# ----------------------------------------------------------------- versions


@pytest.mark.parametrize(
    "line, raw, numbers",
    [
        ("promtool, version 3.5.3+ds1 (branch: debian/sid, revision: 3.5.3+ds1-6)", "3.5.3+ds1", (3, 5, 3)),
        ("alertmanager, version 0.33.1 (branch: HEAD, revision: 1a2b)", "0.33.1", (0, 33, 1)),
        ("victoria-metrics-20260101-120000-tags-v1.145.0-0-g1a2b3c", "1.145.0-0-g1a2b3c", (1, 145, 0)),
        ("v5.8.1", "5.8.1", (5, 8, 1)),
        ("  go version go1.24.4 linux/amd64", None, None),  # a Go version is not the tool's
        ("(devel)", None, None),  # Debian's kustomize
        ("", None, None),  # Debian's victoria-metrics -version
    ],
)
def test_version_is_read_from_the_first_line(line, raw, numbers):
    got = versions.parse(line + "\n")
    assert (got.raw, got.numbers) == (raw, numbers) if raw else got is None


def test_a_version_on_a_later_line_is_not_the_tools():
    assert versions.parse("usage: thing [flags]\n  built with lib 1.2.3\n") is None


@pytest.mark.parametrize(
    "debian, numbers",
    [("1.145.0+ds1-2", (1, 145, 0)), ("0.33.1-5", (0, 33, 1)), ("1:5.8.1+ds-1", (5, 8, 1)), ("junk", None)],
)
def test_debian_package_version_gives_the_upstream_one(debian, numbers):
    got = versions.from_debian(debian)
    assert (got.numbers if got else None) == numbers


def test_requirements_bound_both_ends():
    lts = Requirement((3, 5), (3, 6))
    assert str(lts) == "3.5.x"
    assert lts.allows((3, 5, 0)) and lts.allows((3, 5, 99))
    assert not lts.allows((3, 4, 9)) and not lts.allows((3, 6, 0)) and not lts.allows((2, 42, 0))
    am = tools.get("alertmanager").requires
    assert str(am) == ">=0.28, <1.0"
    assert am.allows((0, 28, 0)) and am.allows((0, 33, 1))
    assert not am.allows((0, 27, 9)) and not am.allows((1, 0, 0))


def test_every_tool_has_its_own_variable_and_debian_path():
    assert tools.get("vmalert-tool").env_var == "VMALERT_TOOL"
    assert tools.get("victoria-metrics").env_var == "VICTORIA_METRICS"
    assert len({t.env_var for t in tools.TOOLS.values()}) == len(tools.TOOLS)
    assert all(t.deb_path.startswith("usr/bin/") for t in tools.TOOLS.values())
    with pytest.raises(ValueError, match="unknown tool 'grafana'"):
        tools.get("grafana")


# ------------------------------------------------------------------- lookup


def test_not_found_anywhere_says_how_to_install(nowhere):
    with pytest.raises(tools.ToolNotFound) as e:
        tools.find("promtool")
    msg = str(e.value)
    assert "$PROMTOOL" in msg and str(tools.cache_dir()) in msg and "servewatch tools install promtool" in msg


def test_wrong_version_on_path_is_refused_not_installed(nowhere):
    bookworm_promtool(nowhere)
    with pytest.raises(
        tools.ToolError, match=r"2\.42\.0\+ds.*3\.5\.x.*servewatch tools install promtool"
    ) as e:
        tools.ensure("promtool")
    assert not isinstance(e.value, tools.ToolNotFound)
    assert not tools.cache_dir().exists(), "ensure() must not install over a wrong-version hit"


def test_env_wrong_version_is_refused_without_falling_back(nowhere, monkeypatch, tmp_path):
    stand_in(nowhere, "promtool", "promtool, version 3.5.3 (branch: x)")  # a good one on PATH...
    monkeypatch.setenv("PROMTOOL", str(bookworm_promtool(tmp_path, "old-promtool")))  # ...is not used
    with pytest.raises(tools.ToolError) as e:
        tools.find("promtool")
    msg = str(e.value)
    assert "2.42.0" in msg and "3.5.x" in msg and "$PROMTOOL" in msg and "old-promtool" in msg


def test_env_pointing_nowhere_is_refused(nowhere, monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS", str(tmp_path / "nope"))
    with pytest.raises(tools.ToolError, match=r"\$PROMETHEUS .*not an executable"):
        tools.find("prometheus")


def test_env_and_path_hits_of_the_right_version(nowhere, monkeypatch, tmp_path):
    stand_in(nowhere, "alertmanager", "alertmanager, version 0.28.1 (branch: HEAD)")
    found = tools.locate("alertmanager")
    assert (found.path, found.source, found.shown_version) == (nowhere / "alertmanager", "PATH", "0.28.1")
    mine = stand_in(tmp_path, "my-am", "alertmanager, version 0.33.1 (branch: HEAD)")
    monkeypatch.setenv("ALERTMANAGER", str(mine))
    assert tools.locate("alertmanager").source == "env" and tools.find("alertmanager") == mine


def test_debian_name_of_alertmanager_is_found_on_path(nowhere):
    stand_in(nowhere, "prometheus-alertmanager", "alertmanager, version 0.33.1 (branch: debian/sid)")
    assert tools.find("alertmanager") == nowhere / "prometheus-alertmanager"


def test_garbage_version_output_is_refused(nowhere):
    stand_in(nowhere, "amtool", "hello")
    with pytest.raises(tools.ToolError, match="printed no recognisable version"):
        tools.find("amtool")


def test_a_build_without_version_is_taken_from_env_but_not_from_path(nowhere, monkeypatch, tmp_path):
    stand_in(nowhere, "victoria-metrics", "")  # what Debian's build prints for -version
    with pytest.raises(tools.ToolError, match=r"does not report its version.*\$VICTORIA_METRICS"):
        tools.find("victoria-metrics")
    monkeypatch.setenv("VICTORIA_METRICS", str(nowhere / "victoria-metrics"))
    found = tools.locate("victoria-metrics")
    assert (found.source, found.version, found.shown_version) == ("env", None, "unknown")


def test_a_cached_build_without_version_is_judged_by_its_package(nowhere):
    folder = tools.cache_dir() / "kustomize"
    (folder / "bin").mkdir(parents=True)
    stand_in(folder / "bin", "kustomize", "(devel)")
    with pytest.raises(tools.ToolError, match="does not report its version"):  # no manifest: cannot tell
        tools.find("kustomize")
    cache.write_manifest(folder, {"package": "kustomize", "version": "5.8.1+ds-1"})
    found = tools.locate("kustomize")
    assert (found.source, found.shown_version) == ("cache", "5.8.1+ds")
    cache.write_manifest(folder, {"package": "kustomize", "version": "4.5.7+ds-3"})
    with pytest.raises(
        tools.ToolError, match=r"kustomize 4\.5\.7\+ds, but servewatch needs kustomize >=5\.0"
    ):
        tools.find("kustomize")


def test_a_fixed_system_path_is_rewritten_to_a_same_length_relative_one(tmp_path):
    tool = tools.get("alertmanager")
    binary = tmp_path / "alertmanager"
    binary.write_bytes(b"\0/usr/share/prometheus/alertmanager\0/usr/share/prometheus/alertmanager/ui/\0")
    assert relocate.rewrite(tool, binary) == 2
    new = relocate.relative_literal(tool).decode()
    assert (
        len(new) == len("/usr/share/prometheus/alertmanager") and os.path.normpath(new) == "alertmanager-data"
    )
    assert binary.read_bytes() == f"\0{new}\0{new}/ui/\0".encode()
    with pytest.raises(tools.ToolError, match="does not read /usr/share/prometheus/alertmanager any more"):
        relocate.rewrite(tool, binary)


def test_install_without_apt_fails_cleanly_and_writes_no_tool(nowhere):
    with pytest.raises(tools.ToolError, match="apt-get/dpkg not found"):
        tools.install(["promtool"])
    assert not (tools.cache_dir() / "promtool").exists()


# ------------------------------------------------------------- apt sources


def test_mirror_from_deb822_skips_security_and_sources_stanzas(tmp_path):
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
        Enabled: no
        URIs: http://disabled.example/debian
        Suites: bookworm

        Types: deb
        # a comment
        URIs: http://mirror.example/debian/
        Suites: bookworm bookworm-updates
        Components: main
        Signed-By: /opt/keys/debian.gpg
        """)
    )
    assert apt_sources.debian_mirror(tmp_path) == ("http://mirror.example/debian", "/opt/keys/debian.gpg")


def test_inline_signed_by_key_falls_back_to_the_archive_keyring(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: trixie\n"
        "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGPL\n"
        " -----END PGP PUBLIC KEY BLOCK-----\n"
    )
    assert apt_sources.debian_mirror(tmp_path) == (
        "http://mirror.example/debian",
        apt_sources.DEFAULT_KEYRING,
    )


def test_mirror_from_one_line_sources(tmp_path):
    (tmp_path / "sources.list").write_text(
        textwrap.dedent("""\
        # deb http://commented.example/debian bookworm main
        deb cdrom:[Debian GNU/Linux 12]/ bookworm main
        deb http://security.example/debian-security bookworm-security main
        deb http://ppa.example/ubuntu jammy main
        deb [arch=amd64 signed-by=/etc/keys/d.gpg] http://mirror.example/debian bookworm main contrib
        """)
    )
    assert apt_sources.debian_mirror(tmp_path) == ("http://mirror.example/debian", "/etc/keys/d.gpg")


def test_one_line_sources_come_before_deb822_ones(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "a.sources").write_text(
        "Types: deb\nURIs: http://b.example/d\nSuites: sid\n"
    )
    (tmp_path / "sources.list.d" / "z.list").write_text("deb http://a.example/d sid main\n")
    assert apt_sources.debian_mirror(tmp_path)[0] == "http://a.example/d"


def test_no_debian_mirror_is_a_clear_error(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://ppa.example/ubuntu jammy main\n")
    with pytest.raises(tools.ToolError, match="no Debian mirror is configured"):
        apt_sources.debian_mirror(tmp_path)


def test_this_machine_has_a_mirror():
    uri, keyring = apt_sources.debian_mirror()
    assert "://" in uri and keyring.startswith("/")


# --------------------------------------------------------------------- CLI


def test_cli_reports_each_tool_and_fails_for_a_bad_one(nowhere, capsys):
    stand_in(nowhere, "prometheus", "prometheus, version 3.5.0 (branch: HEAD)")
    bookworm_promtool(nowhere)
    assert cli("promtool", "where") == 1
    out, err = capsys.readouterr()
    assert out.split() == ["prometheus", str(nowhere / "prometheus"), "3.5.0", "(PATH)"]
    assert err.startswith("servewatch: error: ") and "2.42.0" in err and err.count("\n") == 1
    assert cli("tools", "version", "prometheus") == 0
    assert capsys.readouterr().out == "prometheus 3.5.0\n"


def test_cli_refuses_an_unknown_tool(capsys):
    with pytest.raises(SystemExit) as e:
        cli("tools", "where", "grafana")
    assert e.value.code == 2 and "unknown tool 'grafana'" in capsys.readouterr().err


# ----------------------------------------------------- with the real binaries


@pytest.mark.tools("promtool", "prometheus")
@pytest.mark.parametrize("name", tools.PROMETHEUS_PAIR)
def test_real_binaries_report_3_5(name):
    found = tools.locate(name)
    assert found.version.numbers[:2] == (3, 5)
    first = subprocess.run([found.path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert first.startswith(f"{name}, version {found.version}")


@pytest.mark.tools("promtool", "prometheus")
def test_env_beats_cache_and_path(monkeypatch, tmp_path):
    real = tools.find("promtool")
    link = tmp_path / "my-promtool"
    link.symlink_to(real)
    monkeypatch.setenv("PROMTOOL", str(link))
    assert (tools.locate("promtool").path, tools.locate("promtool").source) == (link, "env")
    assert tools.find("prometheus") != link  # $PROMTOOL only affects promtool


@pytest.mark.tools("promtool")
def test_run_real_promtool(tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(
        "groups:\n  - name: g\n    rules:\n      - record: job:up:sum\n        expr: sum by (job) (up)\n"
    )
    r = tools.run("promtool", "check", "rules", rules)
    assert r.returncode == 0 and "SUCCESS" in r.stdout + r.stderr, r.stderr + r.stdout
    assert tools.run("promtool", "check", "rules", tmp_path / "missing.yml").returncode != 0
    with pytest.raises(subprocess.CalledProcessError):
        tools.run("promtool", "check", "rules", tmp_path / "missing.yml", check=True)


@pytest.mark.tools("promtool", "prometheus")
def test_cli_install_is_a_no_op_when_the_cache_is_good(capsys):
    before = {n: tools.find(n).stat().st_mtime_ns for n in tools.PROMETHEUS_PAIR}
    if any(tools.locate(n).source != "cache" for n in tools.PROMETHEUS_PAIR):
        pytest.skip("promtool/prometheus come from $PROMTOOL/$PROMETHEUS or PATH, not the cache")
    assert cli("promtool", "install") == 0
    out = capsys.readouterr().out
    assert {line.split()[0] for line in out.splitlines()} == set(tools.PROMETHEUS_PAIR)
    assert {n: tools.find(n).stat().st_mtime_ns for n in tools.PROMETHEUS_PAIR} == before


# ------------------------------------------- installing from Debian (network)

# How each Debian build shows it runs when it has no version to print.
HELP = {"victoria-metrics": "-help", "vmagent": "-help", "vmalert": "-help", "vmalert-tool": "--help"}
HELP["kustomize"] = "--help"


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    """Every tool in the table installed from Debian sid into an empty cache, in one go."""
    root = tmp_path_factory.mktemp("tools-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEWATCH_CACHE", str(root))
        for tool in tools.TOOLS.values():
            mp.delenv(tool.env_var, raising=False)
        paths = tools.install(list(tools.TOOLS))
        yield root, paths


@pytest.mark.integration
def test_install_layout_and_idempotence(fresh_cache, monkeypatch):
    root, paths = fresh_cache
    monkeypatch.setenv("SERVEWATCH_CACHE", str(root))
    assert paths == {t.name: root / t.package / "bin" / t.name for t in tools.TOOLS.values()}
    assert {p.name for p in root.iterdir()} == {".lock", "apt", *(t.package for t in tools.TOOLS.values())}
    before = {p: p.stat().st_mtime_ns for p in root.glob("*/bin/*")}
    assert tools.install(["promtool", "vmalert-tool"]) == {n: paths[n] for n in ("promtool", "vmalert-tool")}
    assert {p: p.stat().st_mtime_ns for p in root.glob("*/bin/*")} == before


@pytest.mark.integration
@pytest.mark.parametrize("name", list(tools.TOOLS))
def test_installed_tool_runs_at_an_accepted_version(fresh_cache, monkeypatch, name):
    root, paths = fresh_cache
    monkeypatch.setenv("SERVEWATCH_CACHE", str(root))
    tool = tools.get(name)
    found = tools.locate(name)
    assert (found.path, found.source) == (paths[name], "cache")
    assert tool.requires.allows(found.version.numbers)
    package = cache.package_version(root / tool.package)
    if tool.reports_version:
        out = subprocess.run([found.path, *tool.version_args], capture_output=True, text=True, check=True)
        assert versions.parse(out.stdout or out.stderr) == found.version
        assert found.version.numbers == package.numbers  # the binary and its package agree
    else:
        assert found.version == package
        out = subprocess.run([found.path, HELP[name]], capture_output=True, text=True, timeout=60)
        assert name in out.stdout + out.stderr  # it runs, and it is what it claims to be
    if tool.reads_from:  # the files Debian keeps in /usr/share came along, next to the binary
        assert found.data_dir == root / tool.package / f"{name}-data"
        assert (found.data_dir / "default.tmpl").is_file()
    assert os.access(found.path, os.X_OK)
