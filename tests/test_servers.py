"""servewatch_testkit.servers: the shared start / ready / teardown harness, on real Alertmanager and
VictoriaMetrics (the Prometheus one is test_localprom.py)."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from http.server import BaseHTTPRequestHandler

import pytest

from servewatch.promapi import Client
from servewatch_testkit.alertmanager import LocalAlertmanager
from servewatch_testkit import servers
from servewatch_testkit.servers import HttpStub, LocalServer, ServerError, free_port, listens
from servewatch_testkit.victoriametrics import LocalVictoriaMetrics

pytestmark = pytest.mark.integration


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def assert_gone(pid: int, workdir) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not workdir.exists()


@pytest.mark.tools("alertmanager")
def test_alertmanager_starts_healthy_and_is_torn_down():
    with LocalAlertmanager() as am:
        assert am.url.startswith("http://127.0.0.1:") and am.running
        assert get(am.url + "/-/healthy")[0] == 200
        status, body = get(am.url + "/api/v2/status")
        assert status == 200 and json.loads(body)["cluster"]["status"] == "disabled"  # no gossip port
        alert = json.dumps([{"labels": {"alertname": "ServewatchHarness"}}]).encode()
        post = urllib.request.Request(am.url + "/api/v2/alerts", alert, {"Content-Type": "application/json"})
        assert urllib.request.urlopen(post, timeout=10).status == 200
        held = json.loads(get(am.url + "/api/v2/alerts")[1])
        assert [a["labels"]["alertname"] for a in held] == ["ServewatchHarness"]
        pid, workdir = am.pid, am.workdir
    assert_gone(pid, workdir)


@pytest.mark.tools("victoria-metrics")
def test_victoria_metrics_starts_healthy_and_answers_the_query_api():
    with LocalVictoriaMetrics() as vm:
        assert get(vm.url + "/health") == (200, "OK")
        with Client(vm.url) as client:  # the Prometheus HTTP layer speaks to it too
            assert client.query("vector(42)", at=1700000000)[0]["value"] == [1700000000, "42"]
        pid, workdir = vm.pid, vm.workdir
    assert_gone(pid, workdir)


@pytest.mark.tools("alertmanager")
def test_a_server_that_cannot_start_says_why():
    am = LocalAlertmanager("route: [not, a, route]\n")
    with pytest.raises(ServerError, match="(?s)alertmanager exited with code 1 during start-up; log tail.*"):
        am.start()
    assert not am.running and not am.workdir.exists()


class PythonHttp(LocalServer):
    """Python's own file server: a real process serving its work dir, with no tool to install."""

    tool = "python-http"
    ready_path = "/"

    def binary(self) -> str:
        return sys.executable

    def args(self, port: int) -> list[str]:
        return ["-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(self.workdir)]

    def prepare(self) -> None:
        (self.workdir / "whoami").write_text("the server this test started")


class SomebodyElse(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"somebody else")

    def log_message(self, *args):
        pass


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_port_taken_between_probe_and_bind_is_not_mistaken_for_the_server(monkeypatch):
    """Another server grabs the probed port and answers the readiness check while ours fails to bind
    (servers started side by side): the start must go on to a port of its own, never hand the other
    server to the test, which would then read the other server's data."""
    other = HttpStub(SomebodyElse)
    probes = iter([_port(other.url)])
    monkeypatch.setattr(servers, "free_port", lambda: next(probes, None) or free_port())
    try:
        with PythonHttp(ready_timeout=30) as server:
            assert server.url != other.url
            assert get(server.url + "/whoami") == (200, "the server this test started")
    finally:
        other.close()


def test_listens_tells_the_listening_process_from_another_port():
    with PythonHttp(ready_timeout=30) as server:
        port = _port(server.url)
        assert listens(server.pid, port) is True
        assert listens(server.pid, free_port()) is False


# a program that starts a PythonHttp server, says its pid and waits to be killed
STARTS_ONE = """
import sys, time
sys.path.insert(0, {tests!r})
from servewatch_testkit.servers import die_with_this_thread
from test_servers import PythonHttp
tied = {tied}
with die_with_this_thread() if tied else __import__("contextlib").nullcontext():
    server = PythonHttp(ready_timeout=30).start()
print(server.pid, flush=True)
time.sleep(600)
"""


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("tied", [True, False])
def test_a_program_killed_hard_takes_its_tied_servers_with_it(tied):
    """SIGKILL runs no finalizer: only the kernel's tie (die_with_this_thread) stops the server.
    Untied (every test here), the server outlives the program, which shows the tie is what stops it."""
    program = subprocess.Popen(
        [sys.executable, "-c", STARTS_ONE.format(tests=str(Path(__file__).parent), tied=tied)],
        stdout=subprocess.PIPE,
        text=True,
    )
    server = int(program.stdout.readline())
    program.kill()
    program.wait()
    try:
        # tied, it is gone in milliseconds; untied, a second shows it stays (10 s: a loaded machine)
        assert _gone_within(server, 10 if tied else 1) is tied
    finally:
        if not tied:
            os.kill(server, signal.SIGTERM)
