"""Backfilled TSDB blocks kept in a folder and handed to every server built from the same inputs.

A LocalPrometheus with ``reuse=<folder>`` keys its backfill by the bytes it is made from (the
OpenMetrics text, each rule file's name and text, the range, the interval and the binaries that
build it): the first server with a key builds the blocks and keeps them under the key, each later
one, in this process or another (pytest-xdist's workers share the folder), links them into its own
data dir. A lock per key makes a second builder wait for the first, not build the same blocks again.

Only the blocks are kept: the backfill stages' servers load no rules and scrape nothing, so their
write-ahead log holds no sample. The blocks are hard links (a copy where the folder is on another
file system): the TSDB never writes into a block's files, it writes new blocks and deletes old ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from pathlib import Path
from typing import Iterable, Iterator

__all__ = ["Kept", "key_of"]


def key_of(parts: Iterable[bytes]) -> str:
    """A digest of `parts`, each length-prefixed so that no two lists of parts share it."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:32]


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def _copy_blocks(src: Path, dst: Path) -> None:
    """Every block under `src` (a folder with a meta.json) into `dst`, linked file by file."""
    dst.mkdir(parents=True, exist_ok=True)
    for meta in sorted(src.glob("*/meta.json")):
        shutil.copytree(meta.parent, dst / meta.parent.name, copy_function=_link)


class Kept:
    """The blocks kept under `folder` for `key`."""

    def __init__(self, folder: Path, key: str):
        self.folder = folder
        self.path = folder / key

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
            yield

    def exists(self) -> bool:
        return self.path.is_dir()

    def store(self, data_dir: Path) -> None:
        """Keep the blocks of `data_dir` (whole or not at all: moved into place once complete)."""
        partial = self.path.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        _copy_blocks(data_dir, partial)
        partial.rename(self.path)

    def copy_to(self, data_dir: Path) -> None:
        _copy_blocks(self.path, data_dir)
