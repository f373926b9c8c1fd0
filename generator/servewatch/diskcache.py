"""servewatch's own cache on disk: results that are expensive to make and fully decided by their
inputs, kept under a key of everything they are made from. Safe to delete at any time: a missing,
unreadable or foreign entry is made again, and an entry never changes what is made.

    $SERVEWATCH_CACHE_HOME, else $XDG_CACHE_HOME/servewatch, else ~/.cache/servewatch
      verdicts/<key>      promtool runs that passed (verdicts.py)
      slo-designs/<key>   what each SLO's proof shows, per SLO design (plan/slo_proofs.py)
      slo-plans/<key>     the SLO tests as designed (plan/slo_proofs.py)
      slo-proofs/<key>    the SLO test files as written (render/slo_tests.py)
      rule-tests/<key>    the tests derived from the rules, as designed (plan/rule_tests.py)
      scenario-tests/<key>  the spec's scenarios as tests, as designed (plan/scenario_tests.py)
      spec-schema/<key>   the specs' JSON Schema as written (render/spec_schema.py)

Every key starts with the code and catalog (code_fingerprint). Past that, each kind is keyed by
what it reads as it reads it, never by where that came from, so a spec changed in memory after
loading (the Python API, the tests) is never given an entry made for its files:
  verdicts      the bytes promtool reads from disk: what is tested is the files, not a spec
  slo-designs   the validated SLO and the model facts its proof reads (slo_proofs._proof)
  slo-plans     the model: the validated spec, without where its files are, the dashboard panel
                each alert's dashboard_url opens and the catalog as read (plan/kept.made_from)
  slo-proofs    the same key as slo-plans
  rule-tests    the same key as slo-plans: the model, which is all they read
  scenario-tests  the same key as slo-plans; a scenario that cannot adapt by its place in the spec
  spec-schema   pydantic's version only: the schema is made from the code, not the specs

Each kind keeps at most KIND_BYTES: past it, the entries read or written longest ago go first, so a
CI cache or a fuzz run that makes thousands of spec sets does not grow without end.
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


KIND_BYTES = 256 * 2**20


def get(kind: str, key: str) -> str | None:
    path = folder(kind) / key
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        os.utime(path)  # read now: the last to be evicted
    except OSError:
        pass
    return text


def put(kind: str, key: str, text: str) -> None:
    """Keep `text` under `key`, atomically; a cache that cannot be written only costs time later."""
    path = folder(kind) / key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
        _evict(path.parent, KIND_BYTES)
    except OSError:
        pass


def _evict(kind_folder: Path, budget: int) -> None:
    """Delete the entries used longest ago until the folder holds at most `budget` bytes."""
    entries = []
    for entry in os.scandir(kind_folder):
        try:
            stat = entry.stat()
        except OSError:
            continue  # another process evicted it
        entries.append((stat.st_mtime_ns, stat.st_size, entry.path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= budget:
            break
        try:
            os.unlink(path)
        except OSError:
            pass
        total -= size


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
