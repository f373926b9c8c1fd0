import functools
import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import in_process
from servewatch import catalog, cli, generate, promapi, tools, verify
from servewatch.model import Model
from servewatch.spec.loader import load

REPO = Path(__file__).resolve().parents[1]

# The test process keeps the session's models and builds alive, and each test makes a build's worth
# of short-lived objects: at Python's default threshold the cyclic collector passed over them
# thousands of times a module (test_spec_errors and test_tuning: 2.3 s of their 15.7 s of CPU). The
# threshold servewatch's commands run under, for the whole session.
gc.set_threshold(cli.GC_THRESHOLD, *gc.get_threshold()[1:])


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


# Markers of a module whose tests take long (servers, real binaries, minutes of CPU): pyproject.toml
HEAVY_MARKERS = ("integration", "slow", "tools")


def pytest_collection_modifyitems(items):
    """Modules with a test marked integration, slow or tools first, the in-process rest after, each
    module's tests together and in their order. `make test` gives xdist this order (--dist loadfile
    --no-loadscope-reorder), so the modules handed out last are short ones and both workers finish
    about together; xdist's own order (fewest tests last) handed out minute-long modules of two or
    three tests (test_fuzz_specs, test_alertmanager_e2e) at the end, one worker idle meanwhile."""
    heavy = {item.path for item in items if any(item.get_closest_marker(m) for m in HEAVY_MARKERS)}
    items.sort(key=lambda item: item.path not in heavy)  # stable: collection order otherwise


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


@pytest.fixture(scope="session")
def prometheus_data(tmp_path_factory) -> Path:
    """The folder where LocalPrometheus(reuse=...) keeps backfilled blocks, one per session and shared
    by its xdist workers (each worker's temp dir is a folder of the session's): a module that serves
    the data another has backfilled links its blocks instead of building them again."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "prometheus-data"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def default_build() -> tuple[Model, dict[str, str]]:
    """The default specs built once for the session: (model, {path: text}). Read them, never change them."""
    return generate.build(REPO / "specs")


@pytest.fixture(scope="session")
def default_model(default_build) -> Model:
    return default_build[0]


Edit = str | None | list[tuple[str, str]]


def copy_specs(dst: Path, edits: dict[str, Edit]) -> Path:
    """The default specs copied to dst with edits per file (a path relative to specs/):
    a list of (old, new) replaces each old once, and old must be there; a str is the file's whole text
    (a new file, too); None removes the file."""
    shutil.copytree(REPO / "specs", dst)
    for name, edit in edits.items():
        path = dst / name
        if edit is None:
            path.unlink()
        elif isinstance(edit, str):
            path.write_text(edit)
        else:
            text = path.read_text()
            for old, new in edit:
                assert old in text, f"test setup: {old!r} is not in specs/{name}"
                text = text.replace(old, new, 1)
            path.write_text(text)
    return dst


@functools.cache
def client_ttft(source: str) -> tuple[tuple[str, str], ...]:
    """The specs/slos.yaml edits under which the default TTFT SLO holds beside config.client_side
    {source: `source`}: where the catalog lists the source's TTFT bucket bounds (catalog/gateway.yaml)
    and the default threshold is none of them (a spec error, docs/slo.md), the threshold and the
    description that states it move to the largest bound below it; else none. Add them to every spec
    that configures such a source and keeps the default TTFT SLO at the client."""
    cat = catalog.load()
    bounds = cat.lookup(cat.clients[source].metric("ttft")).buckets or ()
    ttft = cat.engine_twins["ttft"]
    slos = load(REPO / "specs").slos.values()
    slo = next(s for s in slos if s.sli.kind == "latency" and s.sli.histogram == ttft)
    threshold = slo.sli.threshold
    if not bounds or threshold in bounds:
        return ()
    bound = max(b for b in bounds if b < threshold)
    return (
        (f"within {threshold:g} s\n", f"within {bound:g} s\n"),
        (f"threshold: {threshold:g} ", f"threshold: {bound:g} "),
    )


@pytest.fixture
def no_prometheus_env(monkeypatch):
    """No Prometheus URL or credentials of the user's environment reach the command under test."""
    for var in promapi.ENVIRONMENT:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def specs_with(tmp_path_factory) -> Callable[..., Path]:
    """A fresh copy of the default specs, edited, per call: ``specs_with({"config.yaml": [(old, new)]})``.
    Session-scoped, so module fixtures can make copies too."""

    def make(edits: dict[str, Edit] | None = None) -> Path:
        return copy_specs(tmp_path_factory.mktemp("copy") / "specs", edits or {})

    return make


def _line_of(path: Path, text: str) -> int:
    content = path.read_text()
    assert text in content, f"test setup: {text!r} is not in {path}"
    return content[: content.index(text)].count("\n") + 1


@pytest.fixture
def line_of() -> Callable[[Path, str], int]:
    """``line_of(path, text)``: the line of the file on which `text` first starts."""
    return _line_of


# A guard against a hung run, not a speed limit: `servewatch test` runs every promtool test, which
# took over 300 s on a shared machine under load.
SERVEWATCH_HANG_S = 1200
# Set to run every run_servewatch() call as a subprocess again (to compare the two, bench/README.md).
FORCE_SUBPROCESS = os.environ.get("SERVEWATCH_TESTS_SUBPROCESS") == "1"


def run_servewatch(*args, cwd=None) -> subprocess.CompletedProcess:
    """`servewatch args` in cwd (default: the repository): its exit status, stdout and stderr.

    It runs in this process (tests/in_process.py): what it tests is the command, not Python starting.
    The caches that outlive a call are keyed by what they are made from (the SLO proofs by the SLO and
    the config, the catalog and the packaged defaults by nothing that changes, tool versions by the
    binary's path, size and mtime); the working directory, sys.argv, the environment and signal
    handlers are put back. Use run_servewatch_process where the process is the subject."""
    if FORCE_SUBPROCESS:
        return run_servewatch_process(*args, cwd=cwd)
    return in_process.run(
        cli.main, "servewatch", [str(a) for a in args], Path(cwd or REPO), SERVEWATCH_HANG_S
    )


def run_servewatch_process(*args, cwd=None) -> subprocess.CompletedProcess:
    """`python -m servewatch args` as a process of its own: for the entry point, exit statuses set by
    signals, a closed pipe, and commands run side by side."""
    return subprocess.run(
        [sys.executable, "-m", "servewatch", *map(str, args)],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=SERVEWATCH_HANG_S,
    )


@pytest.fixture
def servewatch():
    return run_servewatch


def _vllm_boundaries(folder: Path, rules: str, tests: str) -> subprocess.CompletedProcess:
    for sub in ("rules", "promtool"):
        (folder / sub).mkdir(exist_ok=True)
    (folder / "rules" / "vllm.rules.yaml").write_text(rules)
    path = folder / "promtool" / "vllm.boundaries.test.yaml"
    path.write_text(tests)
    return _prove(path)


def _prove(*paths: Path) -> subprocess.CompletedProcess:
    """promtool's verdict on the test files `paths` as `servewatch test` reaches it (each test on the
    rules it observes, a failure confirmed on the whole file), shaped like `promtool test rules`'s."""
    failed = [r for r in verify.prove(list(paths)) if not r.passed]
    return subprocess.CompletedProcess(
        list(paths), 1 if failed else 0, "\n".join(r.output for r in failed), ""
    )


@pytest.fixture
def prove() -> Callable[..., subprocess.CompletedProcess]:
    """``prove(*test_files)``: promtool's verdict on generated test files, as `servewatch test` runs
    them (returncode, stdout)."""
    return _prove


@pytest.fixture
def vllm_boundaries() -> Callable[[Path, str, str], subprocess.CompletedProcess]:
    """``vllm_boundaries(folder, rules, tests)``: promtool's verdict on the vLLM boundary tests `tests`
    run against the vLLM rule file `rules`, both written under `folder` in the repo's layout."""
    return _vllm_boundaries
