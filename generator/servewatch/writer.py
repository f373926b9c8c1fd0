"""Write generated files deterministically and atomically, or compare them (--check).

Everything is rendered in memory first; only then are files replaced one by one with
write-to-temp + rename, so a failed render never leaves half an output behind.
"""
from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

# Folders that hold only generated files: stale files in them are removed on generate.
OWNED = ("rules", "dashboards", "runbooks", "promtool")


def _existing(root: Path) -> set[str]:
    out = set()
    for folder in OWNED:
        base = root / folder
        if base.is_dir():
            out.update(p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file())
    return out


def stale(root: Path, files: dict[str, str]) -> list[str]:
    return sorted(_existing(root) - set(files))


def write(root: Path, files: dict[str, str]) -> tuple[list[str], list[str]]:
    """Write changed files and delete stale ones; returns (written, removed)."""
    written = []
    for rel, text in sorted(files.items()):
        path = root / rel
        data = text.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(rel)
    removed = stale(root, files)
    for rel in removed:
        (root / rel).unlink()
    return written, removed


def check(root: Path, files: dict[str, str]) -> list[str]:
    """Unified diffs (and notes on missing/stale files) between disk and what would be generated."""
    problems = []
    for rel, text in sorted(files.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"missing: {rel}")
            continue
        current = path.read_text(encoding="utf-8")
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True),
                fromfile=f"{rel} (committed)", tofile=f"{rel} (generated)",
            )
            problems.append("".join(diff))
    problems.extend(f"stale (no longer generated): {rel}" for rel in stale(root, files))
    return problems
