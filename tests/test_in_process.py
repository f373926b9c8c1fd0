"""The tests' in-process `servewatch` (tests/in_process.py) reports what a process of its own would,
and the installed command still runs end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import in_process
from conftest import REPO, run_servewatch


def _run(main, *args, cwd=REPO):
    return in_process.run(main, "prog", list(args), cwd, hang_s=600)


def test_an_exception_in_main_is_exit_status_1_with_its_traceback():
    def main(argv):
        print("started")
        raise ValueError("a bug")

    res = _run(main)
    assert res.returncode == 1 and res.stdout == "started\n"
    assert res.stderr.startswith("Traceback (most recent call last):")
    assert res.stderr.endswith("ValueError: a bug\n")


def test_exit_statuses_are_those_of_sys_exit():
    assert _run(lambda argv: None).returncode == 0
    assert _run(lambda argv: 3).returncode == 3
    res = _run(lambda argv: sys.exit("no way"))
    assert (res.returncode, res.stderr) == (1, "no way\n")


def test_what_a_command_changes_in_the_process_is_put_back(tmp_path):
    before = (os.getcwd(), sys.argv, signal.getsignal(signal.SIGTERM))
    seen = {}

    def main(argv):
        seen.update(cwd=os.getcwd(), argv=list(sys.argv))
        os.chdir("/")
        os.environ["SERVEWATCH_IN_PROCESS_TEST"] = "set"
        signal.signal(signal.SIGTERM, lambda *_: None)
        return 0

    assert _run(main, "a", "b", cwd=tmp_path).returncode == 0
    assert seen == {"cwd": str(tmp_path.resolve()), "argv": ["prog", "a", "b"]}
    assert (os.getcwd(), sys.argv, signal.getsignal(signal.SIGTERM)) == before
    assert "SERVEWATCH_IN_PROCESS_TEST" not in os.environ


def test_argparse_errors_and_version_are_reported_as_by_a_process():
    res = run_servewatch("generate", "--no-such-option")
    assert res.returncode == 2 and "unrecognized arguments: --no-such-option" in res.stderr
    res = run_servewatch("--version")
    assert res.returncode == 0 and res.stdout.startswith("servewatch ")


def test_the_installed_command_runs_and_says_what_the_in_process_one_says(repo):
    """The console script pip installed ([project.scripts]), in a process of its own."""
    command = Path(sys.executable).with_name("servewatch")
    assert command.is_file(), f"{command}: not installed (`make setup` installs it)"
    args = ["check", "--specs", str(repo / "specs")]
    installed = subprocess.run([command, *args], cwd=repo, capture_output=True, text=True, timeout=600)
    here = run_servewatch(*args)
    assert installed.returncode == here.returncode == 0, installed.stderr
    assert (installed.stdout, installed.stderr) == (here.stdout, here.stderr)
