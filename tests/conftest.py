import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from servewatch import tools

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption(
        "--install-tools",
        action="store_true",
        help="install the binaries a test's `tools` marker names when they are missing, instead of skipping",
    )


_tool_skips: dict[str, str | None] = {}  # tool -> why tests that need it are skipped (None: it is there)


def _skip_reason(name: str, install: bool) -> str | None:
    if name not in _tool_skips:
        try:
            tools.ensure(name) if install else tools.find(name)
            _tool_skips[name] = None
        except tools.ToolNotFound as e:
            _tool_skips[name] = f"needs {name}: {e}"
        # any other ToolError (a wrong version, a failed install) fails the test: it is not a missing tool
    return _tool_skips[name]


def pytest_runtest_setup(item):
    install = item.config.getoption("--install-tools")
    for marker in item.iter_markers("tools"):
        for name in marker.args:
            reason = _skip_reason(name, install)
            if reason:
                pytest.skip(reason)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def specs_copy(tmp_path) -> Path:
    """A private copy of the default specs that a test may edit."""
    dst = tmp_path / "specs"
    shutil.copytree(REPO / "specs", dst)
    return dst


def run_servewatch(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "servewatch", *map(str, args)],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def servewatch():
    return run_servewatch
