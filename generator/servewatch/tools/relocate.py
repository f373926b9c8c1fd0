"""Make a Debian build that reads its files from a fixed system folder read them from a folder of ours.

Debian's alertmanager loads its default notification templates (and serves its UI) from
/usr/share/prometheus/alertmanager, a path no flag changes for the templates; the cache cannot put
files there. So the installer keeps that folder as ``<package>/<tool>-data`` and rewrites the path in
the cached binary to ``<tool>-data`` relative to the working directory, padded to the same length
("./////...alertmanager-data", which the OS and Go's filepath read as "alertmanager-data"). A process
started from the cache then finds its files when its working directory holds that folder (or a link
to it), which is what servewatch_testkit.servers.LocalServer arranges.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ToolError
from .table import Tool


def data_name(tool: Tool) -> str:
    return f"{tool.name}-data"


def relative_literal(tool: Tool) -> bytes:
    """The same-length relative stand-in for the tool's absolute data path."""
    old = "/" + tool.reads_from.strip("/")
    name = data_name(tool)
    padding = len(old) - len(name) - 2
    if padding < 0:
        raise ToolError(f"cannot relocate {tool.name}: {name!r} is longer than {old!r}")
    return ("./" + "/" * padding + name).encode()


def rewrite(tool: Tool, binary: Path) -> int:
    """Point the binary's absolute data path at ./<tool>-data; returns how many places were rewritten."""
    old = ("/" + tool.reads_from.strip("/")).encode()
    data = binary.read_bytes()
    count = data.count(old)
    if not count:
        raise ToolError(
            f"{binary.name} does not read {old.decode()} any more; the table entry for {tool.name} is stale."
        )
    binary.write_bytes(data.replace(old, relative_literal(tool)))
    return count
