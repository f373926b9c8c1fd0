"""Wall and CPU time of the user's loops on a checkout: `servewatch generate --check` and
`servewatch test`, each with servewatch's cache empty (a fresh CI runner) and then warm (the next
commit, a pre-commit hook). Runs the servewatch command it is given, so one run can time two
checkouts side by side:

    python -m bench.loops                                       # this checkout
    python -m bench.loops --root ../old --servewatch ../old/.venv/bin/servewatch
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOPS = (["generate", "--check"], ["test"])


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"bench.loops: {' '.join(cmd)} failed:\n{res.stdout}{res.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.loops", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout to time (default: here)")
    ap.add_argument("--servewatch", default=str(Path(sys.executable).parent / "servewatch"))
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        ap.error(f"--root {args.root}: no such folder")
    print("| loop | cache | wall | CPU |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SERVEWATCH_CACHE_HOME=cache)
        for words in LOOPS:
            for state in ("empty", "warm"):
                wall, cpu = timed([args.servewatch, *words], args.root, env)
                print(
                    f"| `servewatch {' '.join(words)}` | {state} | {wall:.1f} s | {cpu:.1f} s |", flush=True
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
