"""Versions: what a binary reports about itself, and what a Debian package version means upstream."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ToolError
from .table import Tool

# "promtool, version 3.5.3+ds1 (branch: ...)", "victoria-metrics-20250101-...-tags-v1.145.0-0-g...", "v5.8.1";
# not the "1.24" of "go1.24.4" (a letter before the digits)
VERSION_RE = re.compile(r"(?<![\w.])v?(?P<raw>(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)[^\s,()]*)")


@dataclass(frozen=True)
class Version:
    raw: str  # as printed, e.g. "3.5.3+ds1"
    numbers: tuple[int, int, int]

    def __str__(self) -> str:
        return self.raw


def parse(text: str) -> Version | None:
    """The first version in the first non-empty line of a tool's version output, or None."""
    lines = [line for line in text.splitlines() if line.strip()]
    m = VERSION_RE.search(lines[0]) if lines else None
    if not m:
        return None
    return Version(m["raw"], (int(m["major"]), int(m["minor"]), int(m["patch"])))


def from_debian(package_version: str) -> Version | None:
    """The upstream part of a Debian version: "1:1.145.0+ds1-2" -> 1.145.0+ds1."""
    upstream = package_version.split(":", 1)[-1].rsplit("-", 1)[0]
    return parse(upstream)


_memo: dict[tuple, Version | None] = {}


def reported(tool: Tool, path: Path) -> Version | None:
    """What `path <version_args>` says, or None when the binary has no way to tell (or says nothing)."""
    if not tool.version_args:
        return None
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        if key in _memo:  # run() asks often; the binary rarely changes
            return _memo[key]
        out = subprocess.run(
            [str(path), *tool.version_args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolError(f"cannot run `{path} {' '.join(tool.version_args)}`: {e}") from None
    _memo[key] = parse(out.stdout) or parse(out.stderr)
    return _memo[key]
