import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
