"""Install tools from Debian's ``sid`` suite into the cache, leaving the system's apt untouched.

Debian bookworm ships Prometheus 2.42; sid has the 3.5 LTS line, Alertmanager, VictoriaMetrics and
kustomize, and their statically linked binaries run on bookworm. So: an apt configuration of our own
(state, lists and sources under <cache>/apt) that points at the machine's own Debian mirror with the
suite ``sid``, ``apt-get download`` of the packages, ``dpkg -x`` of each into a scratch folder, and the
tools moved into <cache>/<package>/bin. A package folder is swapped in whole, by renames, only once its
versions are checked, so a failed or killed install leaves the previous one in place.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from . import cache, relocate, versions
from .apt_sources import debian_mirror
from .errors import ToolError
from .table import Tool, get, package_tools


def _sh(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        p = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolError(f"{what} failed: {e}") from None
    if p.returncode:
        tail = " | ".join((p.stderr.strip() or p.stdout.strip()).splitlines()[-3:])
        raise ToolError(f"{what} failed (exit {p.returncode}): {tail}")
    return p.stdout


def tool_version(tool: Tool, path: Path) -> versions.Version | None:
    """A cached tool's version: what it reports, else the version of the package it came from."""
    return versions.reported(tool, path) or cache.package_version(path.parent.parent)


def package_ok(package: str, folder: Path) -> bool:
    """Whether a package folder holds every tool of the package, each at an accepted version."""
    for tool in package_tools(package):
        path = folder / "bin" / tool.name
        if tool.reads_from and not (folder / relocate.data_name(tool)).is_dir():
            return False
        try:
            found = tool_version(tool, path) if path.is_file() else None
        except ToolError:
            return False
        if found is None or not tool.requires.allows(found.numbers):
            return False
    return True


class PrivateApt:
    """apt-get with its own state, lists and sources in one folder: Debian sid from the machine's mirror."""

    def __init__(self, root: Path):
        apt_get = shutil.which("apt-get")
        if not apt_get or not shutil.which("dpkg"):
            raise ToolError(
                "apt-get/dpkg not found; installing tools from Debian needs a Debian system "
                "(or point $PROMTOOL, $PROMETHEUS, ... at binaries of your own)."
            )
        self.mirror, keyring = debian_mirror()
        if not Path(keyring).is_file():
            raise ToolError(
                f"Debian archive keyring {keyring} is missing; install the debian-archive-keyring package."
            )
        arch = _sh(["dpkg", "--print-architecture"], "dpkg --print-architecture").strip()
        for sub in (
            "state/lists/partial",
            "cache/archives/partial",
            "etc/sources.list.d",
            "etc/preferences.d",
        ):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "etc/sources.list.d/sid.sources").write_text(
            f"Types: deb\nURIs: {self.mirror}\nSuites: sid\nComponents: main\nSigned-By: {keyring}\n"
        )
        options = [
            f"Dir::State={root}/state",
            f"Dir::Cache={root}/cache",
            "Dir::Etc::SourceList=/dev/null",
            f"Dir::Etc::SourceParts={root}/etc/sources.list.d",
            "Dir::Etc::Preferences=/dev/null",
            f"Dir::Etc::PreferencesParts={root}/etc/preferences.d",
            "Debug::NoLocking=1",
            "APT::Sandbox::User=root",  # _apt cannot read our private dirs
            f"APT::Architecture={arch}",
            f"APT::Architectures={arch}",
            "Acquire::Languages=none",
        ]
        self.command = [apt_get, "-q"] + [x for o in options for x in ("-o", o)]

    def download(self, packages: list[str], into: Path) -> list[Path]:
        _sh(self.command + ["update"], "apt-get update (Debian sid from the configured mirror)")
        _sh(self.command + ["download", *packages], f"apt-get download {' '.join(packages)}", cwd=into)
        return sorted(into.glob("*.deb"))


def _unpack(deb: Path, scratch: Path, mirror: str) -> tuple[str, Path]:
    """Unpack one .deb; returns (package, folder with bin/ and the manifest), versions checked."""
    package = _sh(["dpkg-deb", "-f", str(deb), "Package"], f"dpkg-deb -f {deb.name}").strip()
    deb_version = _sh(["dpkg-deb", "-f", str(deb), "Version"], f"dpkg-deb -f {deb.name}").strip()
    root = scratch / f"root-{package}"
    _sh(["dpkg", "-x", str(deb), str(root)], f"dpkg -x {deb.name}")
    staged = scratch / package
    (staged / "bin").mkdir(parents=True)
    relocated = {}
    for tool in package_tools(package):
        for inside, there in [(tool.deb_path, staged / "bin" / tool.name)] + (
            [(tool.reads_from, staged / relocate.data_name(tool))] if tool.reads_from else []
        ):
            try:
                (root / inside).rename(there)
            except OSError:
                raise ToolError(f"{deb.name} has no {inside}; Debian moved {tool.name}'s files.") from None
        if tool.reads_from:
            relocate.rewrite(tool, staged / "bin" / tool.name)
            relocated[tool.name] = f"/{tool.reads_from} -> ./{relocate.data_name(tool)}"
    cache.write_manifest(
        staged,
        {
            "package": package,
            "version": deb_version,
            "deb": deb.name,
            "mirror": mirror,
            "relocated": relocated,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )
    if not package_ok(package, staged):
        wanted = ", ".join(str(t) for t in package_tools(package))
        raise ToolError(
            f"Debian sid now ships {package} {deb_version}, but servewatch needs {wanted}; "
            "point the tools' environment variables at binaries of the right version instead."
        )
    return package, staged


def install(names: list[str], force: bool = False) -> dict[str, Path]:
    """Install the named tools' packages into the cache (only those not already good there, unless force)."""
    tools = [get(n) for n in names]
    packages = list(dict.fromkeys(t.package for t in tools))
    root = cache.cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / ".lock", "w")
    except OSError as e:
        raise ToolError(f"cannot use cache dir {root}: {e.strerror}.") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers must not install twice
        todo = [p for p in packages if force or not package_ok(p, cache.package_dir(p))]
        if todo:
            _install_packages(todo, root)
    return {t.name: cache.cached_binary(t) for t in tools}


def _install_packages(packages: list[str], root: Path) -> None:
    apt = PrivateApt(root / "apt")
    for stale in root.glob(".install-*"):  # left behind by a killed run
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
    try:
        (scratch / "dl").mkdir()
        staged = dict(_unpack(deb, scratch, apt.mirror) for deb in apt.download(packages, scratch / "dl"))
        missing = [p for p in packages if p not in staged]
        if missing:
            raise ToolError(f"apt-get download brought no .deb for {', '.join(missing)}")
        for package in packages:
            target = cache.package_dir(package)
            if target.exists():
                target.rename(scratch / f"old-{package}")
            staged[package].rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
