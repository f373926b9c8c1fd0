"""Every command's --help says what its exit statuses mean: CI gates are written against them."""

from __future__ import annotations

import argparse
import re

from servewatch import cli


def _leaves(parser: argparse.ArgumentParser, path=()):
    """(command words, parser) for every command a user can run."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


def test_every_command_documents_its_exit_statuses():
    leaves = list(_leaves(cli.parser()))
    assert len(leaves) >= 10
    undocumented = [
        " ".join(words)
        for words, parser in leaves
        if not re.search(r"Exit (status|codes): 0 ", " ".join(parser.format_help().split()))
    ]
    assert not undocumented, f"no exit statuses in --help of: {undocumented}"


def test_a_reader_that_stops_early_gets_no_traceback(repo, tmp_path):
    """`servewatch generate --check --diff | head`: the pipe closes while servewatch still writes."""
    import shutil
    import subprocess
    import sys

    out = tmp_path / "out"
    shutil.copytree(repo / "dashboards", out / "dashboards")
    for board in (out / "dashboards").rglob("*.json"):
        board.write_text(board.read_text().replace('"', "'"))  # megabytes of diff
    proc = subprocess.Popen(
        [sys.executable, "-m", "servewatch", "generate", "--check", "--diff", "--specs", repo / "specs"]
        + ["--out", out],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout.read(100)
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and b"Traceback" not in err, err.decode()
