"""`servewatch demo` as a user meets it: started, its printed commands run against it, stopped with
Ctrl-C. The incidents fire what tests/test_alerts_on_incidents.py says they fire, in their own
cluster; the healthy copy fires nothing."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from servewatch.promapi import Client

from conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.tools("prometheus", "alertmanager")]

START_S = 180  # generating, starting two servers: slow on a loaded 2-core machine
FIRE_S = 150


def _read_until(proc: subprocess.Popen, marker: str, errors: Path) -> str:
    seen = []
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"demo ended before it was up: {''.join(seen)}{errors.read_text()}")
        seen.append(line)
        if marker in line:
            return "".join(seen)
    pytest.fail(f"demo not up after {START_S} s: {''.join(seen)}")


# `python -m servewatch` with Ctrl-C as a terminal delivers it. A process started in the background
# by a non-interactive shell (`cmd &`, as CI scripts and nohup do) ignores SIGINT, its children
# inherit that, and Python then installs no KeyboardInterrupt handler: the demo would never see the
# test's Ctrl-C. The child restores it before servewatch starts.
AS_A_TERMINAL_STARTS_IT = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('servewatch', run_name='__main__', alter_sys=True)"
)


def _stderr(work: Path) -> Path:
    return work.parent / "stderr.txt"


@contextlib.contextmanager
def _started(work: Path, *args: str):
    """`servewatch demo ARGS --workdir WORK`, up: (the process, what it printed until then)."""
    # stderr to a file, not a pipe: a pipe nobody reads while the demo runs fills up and blocks it
    errors = open(_stderr(work), "w")  # noqa: SIM115 (closed on exit)
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, "demo", *args, "--workdir", str(work)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    try:
        yield proc, _read_until(proc, "Ctrl-C stops it.", _stderr(work))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        errors.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo") / "work"
    with _started(work, "--incident", "kv_saturation", "--incident", "healthy") as (proc, printed):
        yield proc, printed, work


def _url(printed: str, what: str) -> str:
    return re.search(rf"^servewatch demo: {what} +(http://127\.0\.0\.1:\d+)$", printed, re.M).group(1)


def _firing(url: str) -> list[dict]:
    with Client(url) as client:
        return [a for a in client.get("/api/v1/alerts")["alerts"] if a["state"] == "firing"]


def test_the_demo_serves_the_fleet_fires_the_incident_and_its_commands_work(demo, servewatch):
    proc, printed, work = demo
    prom, am = _url(printed, "Prometheus 3.5"), _url(printed, "Alertmanager")
    # Each cluster is a scrape job of its own, and Prometheus offsets each target's scrapes within the
    # interval: the clusters' first samples land up to an interval apart (later if a loaded machine
    # times a first scrape out). So wait for every cluster, not for the first series of any.
    want = {"kv-saturation", "healthy"}
    with Client(prom) as client:
        deadline = time.monotonic() + FIRE_S
        while True:
            clusters = {
                r["metric"]["cluster"] for r in client.query("count by (cluster) (vllm:num_requests_running)")
            }
            if clusters >= want or time.monotonic() > deadline:
                break
            time.sleep(1)
    assert clusters == want
    deadline = time.monotonic() + FIRE_S
    while not any(a["labels"]["alertname"] == "VLLMKVCacheUsageHigh" for a in _firing(prom)):
        assert time.monotonic() < deadline, f"VLLMKVCacheUsageHigh not firing after {FIRE_S} s"
        time.sleep(2)
    fired = _firing(prom)
    assert {a["labels"]["cluster"] for a in fired} == {"kv-saturation"}, "the healthy copy fires nothing"
    # Prometheus sends it to the demo's Alertmanager
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(f"{am}/api/v2/alerts", timeout=5) as r:
            names = {a["labels"]["alertname"] for a in json.load(r)}
        if "VLLMKVCacheUsageHigh" in names or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert "VLLMKVCacheUsageHigh" in names
    # the printed investigate command, as printed
    line = next(x for x in printed.splitlines() if x.strip().endswith("VLLMKVCacheUsageHigh"))
    args = line.split()[1:]
    res = servewatch(*args)
    assert res.returncode == 0, res.stderr
    assert "== VLLMKVCacheUsageHigh: UNHEALTHY" in res.stdout
    # the generated dashboards it points Grafana at are there
    assert sorted(p.name for p in (work / "dashboards" / "import").glob("*.json"))


def test_ctrl_c_stops_it_cleanly(demo):
    proc, printed, work = demo
    prom = _url(printed, "Prometheus 3.5")
    proc.send_signal(signal.SIGINT)
    # a clean stop, not a fast one: stopping its servers took over 60 s once on a loaded 2-core machine
    assert proc.wait(timeout=180) == 0
    said = _stderr(work).read_text()
    assert said.rstrip().endswith("servewatch demo: stopped") and "Traceback" not in said, said[-3000:]
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"{prom}/-/ready", timeout=5)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--incident", "no_such_thing"], "unknown incident 'no_such_thing'; known: "),
        (["--speed", "500"], "--speed 500: want 1 (real time) to 60"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(args, says, servewatch):
    res = servewatch("demo", *args)
    assert res.returncode == 2 and says in res.stderr, res.stderr


def test_a_workdir_with_files_in_it_is_refused(tmp_path, servewatch):
    (tmp_path / "mine.txt").write_text("keep me\n")
    res = servewatch("demo", "--workdir", tmp_path)
    assert res.returncode == 2 and "is not empty" in res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_killed_hard_it_leaves_no_server_running(tmp_path):
    """SIGKILL (a CI job's timeout, the OOM killer) runs none of the demo's clean-up; its servers
    must not live on, holding ports and memory."""
    with _started(tmp_path / "work", "--incident", "healthy") as (proc, printed):
        servers = [_url(printed, "Prometheus 3.5"), _url(printed, "Alertmanager")]
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while any(_answers(url) for url in servers):
            assert time.monotonic() < deadline, f"still serving 30 s after the demo was killed: {servers}"
            time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5):
            return True
    except (urllib.error.URLError, ConnectionError):
        return False
