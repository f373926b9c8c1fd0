"""servewatch's own cache on disk: results that are expensive to make and fully decided by their
inputs, kept under a key of everything they are made from. Safe to delete at any time: a missing,
unreadable or foreign entry is made again, and an entry never changes what is made.

    $SERVEWATCH_CACHE_HOME, else $XDG_CACHE_HOME/servewatch, else ~/.cache/servewatch
      verdicts/<key>      promtool runs that passed (verdicts.py)
      slo-plans/<key>     the SLO tests as designed (plan/slo_proofs.py)
      slo-proofs/<key>    the SLO test files as written (render/slo_tests.py)
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def folder(kind: str) -> Path:
    env = os.environ.get("SERVEWATCH_CACHE_HOME")
    base = (
        Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servewatch"
    )
    return base / kind


def get(kind: str, key: str) -> str | None:
    try:
        return (folder(kind) / key).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def put(kind: str, key: str, text: str) -> None:
    """Keep `text` under `key`, atomically; a cache that cannot be written only costs time later."""
    path = folder(kind) / key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:
        pass


@functools.cache
def code_fingerprint() -> str:
    """A hash of this servewatch's code and catalog (every file of the package) and of the Python
    running it: what a result is made with, besides its inputs."""
    h = hashlib.sha256(sys.version.encode())
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and path.suffix in {".py", ".yaml", ".json", ".jsonnet", ".libsonnet"}:
            h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def key(*parts: str) -> str:
    h = hashlib.sha256(code_fingerprint().encode())
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest()
