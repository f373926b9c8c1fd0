"""Real servers on 127.0.0.1 for integration tests: a temp dir, a free port, readiness, teardown.

    with LocalAlertmanager() as am:        # servewatch_testkit.alertmanager
        urllib.request.urlopen(am.url + "/-/healthy")

LocalServer is the shared part. A subclass names its binary (a servewatch.tools name), the flags that
start it on a port inside its work dir, the path that answers 200 once it serves, and optionally what
to put into the work dir first (prepare) or a stricter readiness check (is_ready). The binary is found,
never installed: the tests' `tools` marker installs or skips before a server is started.

Whatever happens to the object (an exception, a forgotten close), the process is stopped and the work
dir removed; ``keep=True`` leaves the work dir and its log behind for debugging.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["HttpStub", "LocalServer", "ServerError", "die_with_this_thread", "free_port", "listens"]

PR_SET_PDEATHSIG = 1  # linux/prctl.h
_tied = threading.local()


class ServerError(RuntimeError):
    """A server (or a tool preparing its data) failed; the message carries the tail of its log or output."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the listening TCP socket on ``port`` (Linux's /proc); None where
    that cannot be read. A probed free port can be taken by another server before ours binds it; the
    other server then answers our readiness check while ours exits, and a test would read its data."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    sockets = set()
    for fd in fds:
        try:
            sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ... inode
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                if f"socket:[{fields[9]}]" in sockets:
                    return True
    return False


class HttpStub:
    """An HTTP server inside the test process, on 127.0.0.1 and a free port, answering with `handler`
    (a fake Prometheus, a webhook receiver). ``close()`` stops it."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def die_with_this_thread():
    """Servers this thread starts inside the block get SIGTERM from the kernel when the thread ends,
    also when its process is killed hard (SIGKILL, the OOM killer) and no finalizer runs. For a
    program's main thread (`servewatch demo`): the kernel acts when the *thread* that started a server
    ends, so servers started from a pool's worker threads must not ask for it. Linux only; elsewhere
    nothing changes."""
    before = getattr(_tied, "on", False)
    _tied.on = True
    try:
        yield
    finally:
        _tied.on = before


def _tie_to_this_thread() -> Callable[[], None] | None:
    """A preexec_fn that asks for SIGTERM when the starting thread ends; None where prctl is missing.
    prctl is looked up before the fork: the child only calls it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the tie was made
            os._exit(1)

    return tie


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def _cleanup(state: dict) -> None:
    """Finalizer: the server dies and the work dir goes, whatever happened to the object."""
    _stop(state.get("proc"))
    log = state.get("logfile")
    if log is not None and not log.closed:
        log.close()
    if state.get("tmp") and not state.get("keep"):
        shutil.rmtree(state["tmp"], ignore_errors=True)


class LocalServer:
    """One real server process on 127.0.0.1 on a free port, in a temp dir of its own (a context manager)."""

    tool = ""  # the servewatch.tools name of the binary
    ready_path = "/-/ready"  # answers 200 once the server serves
    log_name = "server.log"

    def __init__(self, *, extra_args: Sequence[str] = (), ready_timeout: float = 60.0, keep: bool = False):
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.url = ""
        self.timings: dict[str, float] = {}
        self._state: dict[str, Any] = {"keep": keep}
        self._finalizer = weakref.finalize(self, _cleanup, self._state)

    # -- what a subclass says ----------------------------------------------------------------
    def args(self, port: int) -> list[str]:
        """The flags that start the server on 127.0.0.1:port with its data in the work dir."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Fill the work dir before the server first starts (config, data)."""

    def binary(self) -> str:
        """The executable to start: the servewatch.tools binary, never installed here."""
        from servewatch import tools  # lazy: only needed when a server is really started

        found = tools.locate(self.tool)
        if found.data_dir and not (self.workdir / found.data_dir.name).exists():
            # a relocated cache copy reads its files from its working directory (servewatch/tools/relocate.py)
            (self.workdir / found.data_dir.name).symlink_to(found.data_dir)
        return str(found.path)

    def is_ready(self) -> bool:
        with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as r:
            return r.status == 200

    # -- where things are ----------------------------------------------------------------------
    @property
    def workdir(self) -> Path:
        return Path(self._state["tmp"])

    @property
    def log_path(self) -> Path:
        return self.workdir / self.log_name

    @property
    def pid(self) -> int | None:
        proc = self._state.get("proc")
        return proc.pid if proc is not None else None

    @property
    def running(self) -> bool:
        proc = self._state.get("proc")
        return proc is not None and proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self):
        if self._state.get("tmp"):
            raise ServerError(f"{type(self).__name__} already started")
        self._state["tmp"] = tempfile.mkdtemp(prefix=f"servewatch-{self.tool}-")
        try:
            self.prepare()
            self.timed("start", self.serve)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the server (terminate, wait, kill) and remove the work dir (unless ``keep``)."""
        self._finalizer()
        self.url = ""

    def timed(self, what: str, fn: Callable[[], None]) -> None:
        t0 = time.monotonic()
        fn()
        self.timings[what] = round(time.monotonic() - t0, 3)

    def serve(self) -> None:
        """Start the process on a free port and wait until it is ready (again after a halt())."""
        binary = self.binary()
        last_error = ""
        for _attempt in range(3):  # the free port can be taken between probing and binding
            port = free_port()
            self._state["logfile"] = logfile = open(self.log_path, "a")
            logfile.write(f"--- starting on 127.0.0.1:{port}\n")
            logfile.flush()
            self._state["proc"] = subprocess.Popen(
                [binary, *self.args(port), *self.extra_args],
                stdout=logfile,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                preexec_fn=_tie_to_this_thread() if getattr(_tied, "on", False) else None,
            )
            self.url = f"http://127.0.0.1:{port}"
            try:
                self._wait_ready(port)
                return
            except ServerError as e:
                last_error = str(e)
                self.halt()
                if "address already in use" not in last_error.lower():
                    break
        raise ServerError(last_error)

    def halt(self) -> None:
        """Stop the process but keep the work dir, to serve() again."""
        _stop(self._state.get("proc"))
        self._state["proc"] = None
        log = self._state.get("logfile")
        if log is not None:
            log.close()
        self.url = ""

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + self.ready_timeout
        proc = self._state["proc"]
        while True:
            if proc.poll() is not None:
                raise ServerError(
                    f"{self.tool} exited with code {proc.returncode} during start-up; "
                    f"log tail ({self.log_path}):\n{log_tail(self.log_path)}"
                )
            try:
                ready = self.is_ready()
            except (urllib.error.URLError, OSError):
                ready = False
            if ready:
                if listens(proc.pid, port) is not False:
                    return
                raise ServerError(f"address already in use: another process answers on port {port}")
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{self.tool} not ready after {self.ready_timeout}s; log tail ({self.log_path}):\n"
                    f"{log_tail(self.log_path)}"
                )
            time.sleep(0.05)
