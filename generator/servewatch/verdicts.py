"""Verdicts of promtool runs that passed, kept on disk by everything they were made from.

A run's key is the promtool binary (path, version, size, modification time), its arguments and the
bytes of every file it reads; a run with the same key passes again, so `servewatch test` skips it.
Only passes are kept: a failure is always run again, and shown in full. The folder is safe to delete.

It lives in servewatch's cache folder (diskcache.py), under verdicts/.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import diskcache, tools


KIND = "verdicts"


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
    return diskcache.get(KIND, run_key) == PASSED


def remember(run_key: str) -> None:
    diskcache.put(KIND, run_key, PASSED)


PASSED = "passed\n"
