"""Locate, verify and install promtool / prometheus 3.5.x.

Debian bookworm only ships Prometheus 2.42, which lacks the 3.x PromQL and
rule-test behaviour our generated tests rely on. Debian's ``sid`` suite has
3.5.x, and its binaries run fine on bookworm, so ``install()`` fetches the two
``.deb`` files from the machine's own Debian mirror with a private, throw-away
apt state (the system's apt configuration is never touched) and unpacks just
the binaries into ``<cache>/bin/``.

Cache dir: ``$SERVEWATCH_CACHE`` if set, else ``<repo>/.cache/prometheus-3.5``
where ``<repo>`` is the nearest parent of the cwd whose pyproject.toml names
servewatch, falling back to the checkout this file lives in.

Stdlib only, so the Makefile can run it before the package is installed:
``python3 generator/servewatch/promtool.py install``.
"""

import os
import sys

# Run as a script, sys.path[0] is this package dir; drop it so sibling modules
# can never shadow the stdlib.
if (
    __name__ == "__main__"
    and sys.path
    and os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__))
):
    del sys.path[0]

import argparse
import fcntl
import json
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

__all__ = [
    "ToolError",
    "ToolNotFound",
    "REQUIRED_MAJOR_MINOR",
    "TOOLS",
    "find",
    "locate",
    "version",
    "install",
    "ensure",
    "run",
    "add_cli",
    "cache_dir",
    "debian_mirror",
]

REQUIRED_MAJOR_MINOR = (3, 5)
TOOLS = ("promtool", "prometheus")
_WANT = "%d.%d.x" % REQUIRED_MAJOR_MINOR
_INSTALL_HINT = "run `servewatch promtool install`"
_DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Suite names (before any "-updates"/"-backports" suffix) that mark a Debian archive.
_DEBIAN_SUITES = {
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "duke",
    "sid",
    "oldoldstable",
    "oldstable",
    "stable",
    "testing",
    "unstable",
    "experimental",
}


class ToolError(Exception):
    """A user-facing problem with promtool/prometheus; str() is the message."""


class ToolNotFound(ToolError):
    """Nothing was found anywhere; the only case in which ensure() installs."""


# ---------------------------------------------------------------- locations


def repo_root() -> Path:
    for d in (Path.cwd(), *Path.cwd().parents):
        try:
            with open(d / "pyproject.toml", "rb") as f:
                if tomllib.load(f).get("project", {}).get("name") == "servewatch":
                    return d
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return Path(__file__).resolve().parents[2]  # generator/servewatch/promtool.py


def cache_dir() -> Path:
    env = os.environ.get("SERVEWATCH_CACHE")
    return Path(env) if env else repo_root() / ".cache" / "prometheus-3.5"


def _check_tool(tool: str) -> None:
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; expected one of {TOOLS}")


# ------------------------------------------------------------------ version

_version_memo: dict[tuple, tuple[str, tuple[int, int, int]]] = {}


def version(path) -> tuple[str, tuple[int, int, int]]:
    """Return (raw, (major, minor, patch)) from the first line of `<path> --version`."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        if key in _version_memo:  # run() calls this often; the binary rarely changes
            return _version_memo[key]
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolError(f"cannot run `{path} --version`: {e}") from None
    first = (out.stdout.strip() or out.stderr.strip()).splitlines()[:1]
    m = re.search(r"version\s+(v?(\d+)\.(\d+)\.(\d+)\S*)", first[0] if first else "")
    if not m:
        got = first[0] if first else "nothing"
        raise ToolError(f"`{path} --version` printed no recognisable version (got {got!r})")
    result = (m.group(1), (int(m.group(2)), int(m.group(3)), int(m.group(4))))
    _version_memo[key] = result
    return result


# ------------------------------------------------------------------- lookup


def locate(tool: str) -> tuple[Path, str]:
    """Like find(), but also says where the binary came from: "env", "cache" or "PATH"."""
    _check_tool(tool)
    var = tool.upper()
    candidates: list[tuple[Path, str, str]] = []  # (path, source, how to fix a wrong version)
    if os.environ.get(var):
        value = os.environ[var]
        hit = shutil.which(value)
        if not hit:
            raise ToolError(
                f"${var} is set to {value!r}, which is not an executable file; point it at a "
                f"{tool} {_WANT} binary, or unset it and {_INSTALL_HINT}."
            )
        # $VAR is an explicit choice: if it is wrong, say so rather than fall through.
        fix = f"point ${var} at a {tool} {_WANT} binary, or unset it and {_INSTALL_HINT}"
        candidates.append((Path(hit), "env", fix))
    else:
        cached = cache_dir() / "bin" / tool
        if cached.is_file():
            candidates.append((cached, "cache", f"{_INSTALL_HINT} --force"))
        hit = shutil.which(tool)
        if hit:
            candidates.append(
                (Path(hit), "PATH", f"{_INSTALL_HINT} (or set ${var} to a {tool} {_WANT} binary)")
            )
    if not candidates:
        raise ToolNotFound(
            f"{tool} {_WANT} not found (checked ${var}, {cache_dir() / 'bin'} and PATH); "
            f"{_INSTALL_HINT} to fetch it from Debian's archive."
        )
    path, source, fix = candidates[0]  # first hit wins, even when it is the wrong version
    try:
        raw, ver = version(path)
    except ToolError as e:
        raise ToolError(f"{e} (found via {source}); {fix}.") from None
    if ver[:2] != REQUIRED_MAJOR_MINOR:
        raise ToolError(
            f"{path} (from {source}) is {tool} {raw}, but servewatch needs {tool} {_WANT}; {fix}."
        )
    return path, source


def find(tool: str) -> Path:
    """Path of a verified 3.5.x `tool`: $PROMTOOL/$PROMETHEUS, then the cache, then PATH."""
    return locate(tool)[0]


def ensure(tool: str) -> Path:
    """find(), installing into the cache first if the tool is missing everywhere."""
    try:
        return find(tool)
    except ToolNotFound:
        install()
        return find(tool)


def run(tool: str, *args, check: bool = False, **kw) -> subprocess.CompletedProcess:
    """Run `tool args...` (text mode, output captured unless overridden in kw)."""
    kw.setdefault("text", True)
    if not {"stdout", "stderr", "capture_output"} & kw.keys():
        kw["capture_output"] = True
    return subprocess.run([str(ensure(tool)), *map(str, args)], check=check, **kw)


# ------------------------------------------------------------------ install


def _deb822_stanzas(text: str):
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif line[0] in " \t" and key:  # continuation line
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()


def _is_debian_main(uri: str, suite: str) -> bool:
    return (
        not uri.startswith("cdrom:")
        and "security" not in uri
        and not suite.endswith(("-security", "/updates"))
        and suite.split("-")[0].split("/")[0] in _DEBIAN_SUITES
    )


def debian_mirror(apt_etc: Path = Path("/etc/apt")) -> tuple[str, str]:
    """(mirror URI, Signed-By keyring) of the first non-security Debian source apt uses."""
    found: list[tuple[str, str | None]] = []
    try:  # same order as apt: sources.list, then sources.list.d/*.list and *.sources
        lines = (apt_etc / "sources.list").read_text().splitlines()
    except OSError:
        lines = []
    for part in sorted((apt_etc / "sources.list.d").glob("*.list")):
        lines += part.read_text().splitlines()
    for line in lines:
        m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s*)?(\S+)\s+(\S+)", line.split("#")[0])
        if m and _is_debian_main(m.group(2), m.group(3)):
            opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
            found.append((m.group(2), opts.get("signed-by")))
    for part in sorted((apt_etc / "sources.list.d").glob("*.sources")):
        for st in _deb822_stanzas(part.read_text()):
            if "deb" not in st.get("types", "").split() or st.get("enabled", "yes").lower() == "no":
                continue
            uris = st.get("uris", "").split()
            if uris and any(_is_debian_main(uris[0], s) for s in st.get("suites", "").split()):
                found.append((uris[0], st.get("signed-by")))
    if not found:
        raise ToolError(
            f"no Debian mirror is configured in {apt_etc}/sources.list(.d); cannot fetch Prometheus {_WANT}."
        )
    uri, keyring = found[0]
    # Signed-By may also hold an inline key block or a fingerprint; only a file path is reusable.
    if not keyring or not keyring.strip().startswith("/"):
        keyring = _DEFAULT_KEYRING
    return uri.rstrip("/"), keyring.strip()


def _cached_ok(bindir: Path) -> bool:
    try:
        return all(version(bindir / t)[1][:2] == REQUIRED_MAJOR_MINOR for t in TOOLS)
    except ToolError:
        return False


def _sh(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolError(f"{what} failed: {e}") from None
    if p.returncode:
        tail = " | ".join((p.stderr.strip() or p.stdout.strip()).splitlines()[-3:])
        raise ToolError(f"{what} failed (exit {p.returncode}): {tail}")
    return p.stdout


def install(force: bool = False) -> dict[str, Path]:
    """Fetch promtool + prometheus 3.5.x from Debian sid into <cache>/bin (no-op if already there)."""
    cache = cache_dir()
    bindir = cache / "bin"
    paths = {t: bindir / t for t in TOOLS}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = open(cache / ".lock", "w")
    except OSError as e:
        raise ToolError(f"cannot use cache dir {cache}: {e.strerror}.") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers must not install twice
        if not force and _cached_ok(bindir):
            return paths
        apt_get = shutil.which("apt-get")
        if not apt_get or not shutil.which("dpkg"):
            raise ToolError(
                f"apt-get/dpkg not found; installing Prometheus {_WANT} needs a Debian system "
                "(or set $PROMTOOL and $PROMETHEUS)."
            )
        mirror, keyring = debian_mirror()
        if not Path(keyring).is_file():
            raise ToolError(
                f"Debian archive keyring {keyring} is missing; install the debian-archive-keyring package."
            )
        arch = _sh(["dpkg", "--print-architecture"], "dpkg --print-architecture").strip()
        for stale in cache.glob(".install-*"):  # left behind by a killed run
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".install-", dir=cache))
        try:
            d = tmp / "apt"
            for sub in (
                "state/lists/partial",
                "cache/archives/partial",
                "etc/sources.list.d",
                "etc/preferences.d",
            ):
                (d / sub).mkdir(parents=True)
            (d / "etc/sources.list.d/sid.sources").write_text(
                f"Types: deb\nURIs: {mirror}\nSuites: sid\nComponents: main\nSigned-By: {keyring}\n"
            )
            opts = [
                f"Dir::State={d}/state",
                f"Dir::Cache={d}/cache",
                "Dir::Etc::SourceList=/dev/null",
                f"Dir::Etc::SourceParts={d}/etc/sources.list.d",
                "Dir::Etc::Preferences=/dev/null",
                f"Dir::Etc::PreferencesParts={d}/etc/preferences.d",
                "Debug::NoLocking=1",
                "APT::Sandbox::User=root",  # _apt cannot read our private dirs
                f"APT::Architecture={arch}",
                f"APT::Architectures={arch}",
                "Acquire::Languages=none",
            ]
            apt = [apt_get, "-q"] + [x for o in opts for x in ("-o", o)]
            _sh(apt + ["update"], f"apt-get update (Debian sid from {mirror})")
            (tmp / "dl").mkdir()
            _sh(apt + ["download", *TOOLS], "apt-get download promtool prometheus", cwd=tmp / "dl")
            debs = sorted((tmp / "dl").glob("*.deb"))
            for deb in debs:
                _sh(["dpkg", "-x", str(deb), str(tmp / "root")], f"dpkg -x {deb.name}")
            (tmp / "bin").mkdir()
            for t in TOOLS:
                (tmp / "root/usr/bin" / t).rename(tmp / "bin" / t)
            got = {t: version(tmp / "bin" / t)[0] for t in TOOLS}
            if not _cached_ok(tmp / "bin"):
                raise ToolError(
                    f"Debian sid now ships {got}, not {_WANT}; set "
                    "$PROMTOOL and $PROMETHEUS to 3.5.x binaries instead."
                )
            (tmp / "bin/INSTALLED.json").write_text(
                json.dumps(
                    {
                        "versions": got,
                        "debs": [p.name for p in debs],
                        "mirror": mirror,
                        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                    indent=2,
                )
                + "\n"
            )
            # Swap the finished bin/ in with renames, so readers never see a partial one.
            if bindir.exists():
                bindir.rename(tmp / "old-bin")
            (tmp / "bin").rename(bindir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return paths


# ---------------------------------------------------------------------- CLI


def _fail(e: ToolError) -> int:
    print(f"servewatch: error: {e}", file=sys.stderr)
    return 1


def _cmd_where(args) -> int:
    rc = 0
    for t in TOOLS:
        try:
            path, source = locate(t)
            print(f"{t:<11} {path}  {version(path)[0]}  ({source})")
        except ToolError as e:
            rc = _fail(e)
    return rc


def _cmd_version(args) -> int:
    rc = 0
    for t in TOOLS:
        try:
            print(f"{t} {version(find(t))[0]}")
        except ToolError as e:
            rc = _fail(e)
    return rc


def _cmd_install(args) -> int:
    try:
        paths = install(force=args.force)
    except ToolError as e:
        return _fail(e)
    for t, p in paths.items():
        print(f"{t:<11} {p}  {version(p)[0]}")
    return 0


def _add_commands(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="promtool_command", metavar="{where,version,install}", required=True)
    sub.add_parser("where", help="show which promtool/prometheus would be used, and why").set_defaults(
        func=_cmd_where
    )
    sub.add_parser("version", help="print the promtool/prometheus versions").set_defaults(func=_cmd_version)
    p = sub.add_parser("install", help=f"fetch promtool/prometheus {_WANT} from Debian into the cache")
    p.add_argument("--force", action="store_true", help="reinstall even if the cache is already good")
    p.set_defaults(func=_cmd_install)


def add_cli(subparsers) -> None:
    """Register `servewatch promtool {where,version,install}` on an argparse subparsers object."""
    _add_commands(
        subparsers.add_parser(
            "promtool",
            help=f"locate or install promtool/prometheus {_WANT}",
            description=f"Locate or install promtool/prometheus {_WANT}. Lookup order: "
            f"$PROMTOOL/$PROMETHEUS, the cache ({cache_dir()}), PATH.",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servewatch promtool", description=__doc__.splitlines()[0])
    _add_commands(parser)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
