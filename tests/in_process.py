"""Run a command line's `main(argv)` inside the test process, as if it were a process of its own.

A subprocess pays Python's start, the imports and the first model build on every call; the tests that
only read a command's exit status and output need none of that. What a process would not carry from
one run to the next is put back after each call: the working directory, sys.argv, the environment and
the signal handlers. The process-wide caches of servewatch are keyed by everything their values are
made from (tests/conftest.py's run_servewatch names them), so a second call builds what a fresh
process would.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable

Main = Callable[[list[str]], int | None]


def run(main: Main, prog: str, args: list[str], cwd: Path, hang_s: float) -> subprocess.CompletedProcess:
    """`prog args` as subprocess.run(..., cwd=cwd, capture_output=True, text=True) would report it:
    the exit status, stdout and stderr. An exception main lets out is what Python does with it: exit
    status 1 and the traceback on stderr, where the tests' "no Traceback" assertions see it."""
    out, err = io.StringIO(), io.StringIO()
    with (
        _as_a_process(prog, args, cwd, hang_s),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = _status(main(args), err)
        except SystemExit as e:  # argparse's errors and --version, or a sys.exit() in a command
            code = _status(e.code, err)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(
        [prog, *args], code, _universal(out.getvalue()), _universal(err.getvalue())
    )


def _status(code: object, err: io.StringIO) -> int:
    """The exit status Python gives sys.exit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


def _universal(text: str) -> str:
    """Newlines as a text-mode pipe reads them."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _as_a_process(prog: str, args: list[str], cwd: Path, hang_s: float):
    saved_cwd, saved_argv, saved_env = os.getcwd(), sys.argv, dict(os.environ)
    saved_handlers = {s: signal.getsignal(s) for s in signal.valid_signals()}
    # A guard against a hung run, as the subprocess' timeout was: dump every thread's stack and end
    # the process (pytest-xdist then names the test that was running).
    faulthandler.dump_traceback_later(hang_s, exit=True, file=sys.__stderr__)
    os.chdir(cwd)
    sys.argv = [prog, *args]
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        if os.environ != saved_env:
            os.environ.clear()
            os.environ.update(saved_env)
        for sig, handler in saved_handlers.items():
            if handler is not None and signal.getsignal(sig) != handler:
                signal.signal(sig, handler)
