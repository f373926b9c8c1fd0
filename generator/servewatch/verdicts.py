"""Verdicts of promtool runs that passed, kept on disk by everything they were made from.

A run's key is the promtool binary (path, version, size, modification time), its arguments and the
bytes of every file it reads; a run with the same key passes again, so `servewatch test` skips it.
Only passes are kept: a failure is always run again, and shown in full. The folder is safe to delete.

    $SERVEWATCH_VERDICTS, else $XDG_CACHE_HOME/servewatch/verdicts, else ~/.cache/servewatch/verdicts
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from . import tools


def folder() -> Path:
    env = os.environ.get("SERVEWATCH_VERDICTS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "servewatch" / "verdicts"


def key(args: list[str], files: list[Path]) -> str:
    """The key of `promtool <args>` reading `files`."""
    found = tools.locate("promtool")
    stat = found.path.stat()
    h = hashlib.sha256()
    for part in (str(found.path), found.shown_version, str(stat.st_size), str(stat.st_mtime_ns), *args):
        h.update(part.encode() + b"\0")
    for path in files:
        h.update(str(path).encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return h.hexdigest()


def passed(run_key: str) -> bool:
    return (folder() / run_key).is_file()


def remember(run_key: str) -> None:
    """Note a pass; a cache that cannot be written only costs the next run its time."""
    path = folder() / run_key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{run_key}.{os.getpid()}")
        tmp.write_text("passed\n")
        tmp.replace(path)
    except OSError:
        pass
