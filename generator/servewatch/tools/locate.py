"""Find a tool at an accepted version: $ENV_VAR, then the cache, then PATH; the first hit wins or fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import cache, debian, relocate, versions
from .errors import ToolError, ToolNotFound
from .table import Tool, get


@dataclass(frozen=True)
class Found:
    tool: Tool
    path: Path
    source: str  # "env", "cache" or "PATH"
    version: versions.Version | None  # None: a binary named in $ENV_VAR that cannot tell its version

    @property
    def shown_version(self) -> str:
        return str(self.version) if self.version else "unknown"

    @property
    def data_dir(self) -> Path | None:
        """The folder a relocated cache copy reads from its working directory (see relocate.py), if any."""
        if self.source == "cache" and self.tool.reads_from:
            return self.path.parent.parent / relocate.data_name(self.tool)
        return None


def install_hint(tool: Tool) -> str:
    return f"run `servewatch tools install {tool.name}`"


def _candidates(tool: Tool) -> list[tuple[Path, str, str]]:
    """(path, source, how to fix a wrong version) of every place that has the tool, in lookup order."""
    var = tool.env_var
    value = os.environ.get(var)
    if value:
        hit = shutil.which(value)
        if not hit:
            raise ToolError(
                f"${var} is set to {value!r}, which is not an executable file; point it at a "
                f"{tool} binary, or unset it and {install_hint(tool)}."
            )
        # $VAR is an explicit choice: if it is wrong, say so rather than fall through.
        return [(Path(hit), "env", f"point ${var} at a {tool} binary, or unset it and {install_hint(tool)}")]
    found = []
    cached = cache.cached_binary(tool)
    if cached.is_file():
        found.append((cached, "cache", f"{install_hint(tool)} --force"))
    for name in tool.names_on_path:
        hit = shutil.which(name)
        if hit:
            found.append((Path(hit), "PATH", f"{install_hint(tool)} (or set ${var} to a {tool} binary)"))
    return found


def locate(name: str) -> Found:
    """Where `name` is, where that came from and its version; ToolError when it is unusable."""
    tool = get(name)
    candidates = _candidates(tool)
    if not candidates:
        raise ToolNotFound(
            f"{tool} not found (checked ${tool.env_var}, {cache.cached_binary(tool).parent} and PATH); "
            f"{install_hint(tool)} to fetch it from Debian's archive."
        )
    path, source, fix = candidates[0]  # first hit wins, even when it is the wrong version
    try:
        version = debian.tool_version(tool, path) if source == "cache" else versions.reported(tool, path)
    except ToolError as e:
        raise ToolError(f"{e} (found via {source}); {fix}.") from None
    if version is None:
        if tool.reports_version:
            raise ToolError(
                f"`{path} {' '.join(tool.version_args)}` (from {source}) printed no recognisable "
                f"version; {fix}."
            )
        if source == "env":  # a build that cannot tell its version, chosen explicitly: take it on trust
            return Found(tool, path, source, None)
        raise ToolError(
            f"{path} (from {source}) does not report its version, so it cannot be checked against {tool}; "
            f"{fix}."
        )
    if not tool.requires.allows(version.numbers):
        raise ToolError(
            f"{path} (from {source}) is {tool.name} {version}, but servewatch needs {tool}; {fix}."
        )
    return Found(tool, path, source, version)


def find(name: str) -> Path:
    """Path of `name` at an accepted version, never installing."""
    return locate(name).path


def ensure(name: str) -> Path:
    """find(), installing into the cache first if the tool is missing everywhere."""
    try:
        return find(name)
    except ToolNotFound:
        debian.install([name])
        return find(name)


def run(name: str, *args, check: bool = False, **kw) -> subprocess.CompletedProcess:
    """Run `name args...` (text mode, output captured unless overridden in kw), installing it if missing."""
    kw.setdefault("text", True)
    if not {"stdout", "stderr", "capture_output"} & kw.keys():
        kw["capture_output"] = True
    return subprocess.run([str(ensure(name)), *map(str, args)], check=check, **kw)
