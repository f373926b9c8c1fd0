"""Verdicts of promtool runs that passed, kept on disk by everything they were made from.

A run's key is the promtool binary (path, version, size, modification time), its arguments and the
bytes of every file it reads, each named relative to the first file's folder, as promtool resolves a
test file's rule files; a run with the same key passes again, so `servewatch test` skips it. The
same files under another folder (a CI checkout elsewhere, a copy in a temporary directory) share it.
Only passes are kept: a failure is always run again, and shown in full. The folder is safe to delete.

It lives in servewatch's cache folder (diskcache.py), under verdicts/.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from . import diskcache, tools


KIND = "verdicts"


def key(args: list[str], files: list[Path]) -> str:
    """The key of `promtool <args> <files[0]>` reading `files` (the first is the one it is given; the
    others are named as seen from its folder, so only the layout between them counts)."""
    found = tools.locate("promtool")
    stat = found.path.stat()
    h = hashlib.sha256()
    for part in (str(found.path), found.shown_version, str(stat.st_size), str(stat.st_mtime_ns), *args):
        h.update(part.encode() + b"\0")
    base = Path(files[0]).parent if files else Path()
    for path in files:
        h.update(os.path.relpath(path, base).encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return h.hexdigest()


def passed(run_key: str) -> bool:
    return diskcache.get(KIND, run_key) == PASSED


def remember(run_key: str) -> None:
    diskcache.put(KIND, run_key, PASSED)


PASSED = "passed\n"
