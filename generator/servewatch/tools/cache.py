"""The git-ignored cache the installer fills: one folder per Debian package.

    <cache>/<package>/bin/<tool>        the binaries, named as servewatch calls them
    <cache>/<package>/INSTALLED.json    the package's Debian version, the .deb and when
    <cache>/apt/                        the private apt state (lists of Debian sid), reused by each install

<cache> is $SERVEWATCH_CACHE if set, else .cache/tools in the servewatch checkout around the current
directory (or the one this package was installed from).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from . import versions
from .table import Tool

MANIFEST = "INSTALLED.json"


def repo_root() -> Path:
    for d in (Path.cwd(), *Path.cwd().parents):
        try:
            with open(d / "pyproject.toml", "rb") as f:
                if tomllib.load(f).get("project", {}).get("name") == "servewatch":
                    return d
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return Path(__file__).resolve().parents[3]  # generator/servewatch/tools/cache.py


def cache_dir() -> Path:
    env = os.environ.get("SERVEWATCH_CACHE")
    return Path(env) if env else repo_root() / ".cache" / "tools"


def package_dir(package: str) -> Path:
    return cache_dir() / package


def cached_binary(tool: Tool) -> Path:
    return package_dir(tool.package) / "bin" / tool.name


def write_manifest(folder: Path, record: dict) -> None:
    (folder / MANIFEST).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def package_version(folder: Path) -> versions.Version | None:
    """The upstream version of the Debian package a cache folder was unpacked from."""
    try:
        record = json.loads((folder / MANIFEST).read_text())
        return versions.from_debian(record["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
