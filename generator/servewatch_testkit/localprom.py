"""A real Prometheus 3.5 on 127.0.0.1, pre-filled with backfilled data, for integration tests.

    with LocalPrometheus(text, rule_files=["rules/vllm.yaml"]) as prom:
        prom.query('max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED)', time=t)

How it is built:
  1. ``promtool tsdb create-blocks-from openmetrics`` turns the OpenMetrics text into TSDB blocks
     inside a fresh data directory;
  2. with ``rule_files`` (and ``backfill_rules``), Prometheus is started once without rules so that
     ``promtool tsdb create-blocks-from rules --url <it>`` can evaluate the recording rules over the
     data's time range; it is stopped, the rule blocks are moved into the data directory;
  3. Prometheus is started (again) with ``rule_files`` in its config and no scrape targets, on a
     free port; ``/-/ready`` and a query over the backfilled range must answer before it is handed out.

Time: blocks are loaded whatever their age, but ``--storage.tsdb.retention.time`` defaults to 15d
(counted back from the newest data), so it is set to 100y; data must lie in the past (``now`` is
where the live rule evaluation appends), and queries see a sample for 5 minutes after it
(``--query.lookback-delta``) because backfilled series carry no staleness markers. Use
``backfill_start`` to put a scenario a little in the past, aligned to the hour.

Backfilled recording rules behave like live ones: a group is evaluated every interval at a fixed
phase (Prometheus derives an offset in ``[0, interval)`` from the group's name and file), so the
recorded samples sit that offset after the data's grid points, from the first sample to one
interval past the last. Compare a recorded sample with its expression at the sample's own
timestamp, or query recorded series one interval after a grid point. A rule that reads another
recording rule of the same run sees nothing (a promtool limitation).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time as _time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = ["LocalPrometheus", "PrometheusError", "QueryError", "backfill_start"]

TimeLike = float | int | datetime


class PrometheusError(RuntimeError):
    """Prometheus or promtool failed; the message carries the tail of their output."""


class QueryError(PrometheusError):
    """The HTTP API rejected a query (bad PromQL, many-to-many matching, ...)."""

    def __init__(self, message: str, error_type: str = "", status: int = 0):
        super().__init__(message)
        self.error_type = error_type
        self.status = status


def backfill_start(steps: int, step: float, now: float | None = None, gap_s: float = 3600.0) -> float:
    """A ``start`` whose last sample lies ``gap_s`` before the current hour: past, and stable for an hour.

    For 240 steps of 30 s this is "now rounded down to the hour minus about 3 h".
    """
    now = _time.time() if now is None else now
    hour = math.floor(now / 3600) * 3600
    return hour - gap_s - (steps - 1) * step


def _tool(name: str) -> str:
    from servewatch import tools  # lazy: only needed when a server is really started

    return str(tools.find(name))


def _ts(t: TimeLike) -> str:
    if isinstance(t, datetime):
        t = t.timestamp()
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def _seconds(duration: str) -> float:
    """Seconds of a Prometheus duration such as ``30s``, ``1m30s`` or ``2h``."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * units[u] for n, u in parts)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 30) -> str:
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
    """Finalizer: whatever happens to the object, the server dies and the temp dir goes."""
    _stop(state.get("proc"))
    log = state.get("logfile")
    if log is not None and not log.closed:
        log.close()
    if state.get("tmp") and not state.get("keep"):
        shutil.rmtree(state["tmp"], ignore_errors=True)


class LocalPrometheus:
    """A throw-away Prometheus 3.5 serving backfilled data on 127.0.0.1 (use as a context manager).

    ``openmetrics``: OpenMetrics text (``servewatch_testkit.synth.to_openmetrics``) or None for an empty TSDB.
    ``rule_files``: rule files loaded by the server; their recording rules are also backfilled over
    ``[rules_start, rules_end]`` (default: the data's first and last sample) every
    ``rule_eval_interval`` when ``backfill_rules`` is true. ``retention`` keeps old blocks alive.
    ``keep=True`` leaves the temp dir (data, config, prometheus.log) behind for debugging.
    """

    def __init__(
        self,
        openmetrics: str | None = None,
        *,
        rule_files: Sequence[str | os.PathLike] = (),
        backfill_rules: bool = True,
        rules_start: TimeLike | None = None,
        rules_end: TimeLike | None = None,
        rule_eval_interval: str = "30s",
        retention: str = "100y",
        lookback_delta: str | None = None,
        extra_args: Sequence[str] = (),
        ready_timeout: float = 60.0,
        keep: bool = False,
    ):
        self.openmetrics = openmetrics
        self.rule_files = [Path(f).resolve() for f in rule_files]
        for f in self.rule_files:
            if not f.is_file():
                raise FileNotFoundError(f"rule file {f} not found")
        self.backfill_rules = backfill_rules
        self.rules_start, self.rules_end = rules_start, rules_end
        self.rule_eval_interval = rule_eval_interval
        self.retention = retention
        self.lookback_delta = lookback_delta
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.url = ""
        self.timings: dict[str, float] = {}
        self._state: dict[str, Any] = {"keep": keep}
        self._finalizer = weakref.finalize(self, _cleanup, self._state)

    # ------------------------------------------------------------------ paths

    @property
    def workdir(self) -> Path:
        return Path(self._state["tmp"])

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    @property
    def pid(self) -> int | None:
        proc = self._state.get("proc")
        return proc.pid if proc is not None else None

    @property
    def running(self) -> bool:
        proc = self._state.get("proc")
        return proc is not None and proc.poll() is None

    def blocks(self) -> list[dict]:
        """``meta.json`` of every block in the data dir, sorted by (minTime, ulid)."""
        metas = [json.loads(p.read_text()) for p in self.data_dir.glob("*/meta.json")]
        return sorted(metas, key=lambda m: (m["minTime"], m["ulid"]))

    # -------------------------------------------------------------- lifecycle

    def __enter__(self) -> "LocalPrometheus":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "LocalPrometheus":
        if self._state.get("tmp"):
            raise PrometheusError("LocalPrometheus already started")
        self._state["tmp"] = tempfile.mkdtemp(prefix="servewatch-prom-")
        try:
            self.data_dir.mkdir()
            if self.openmetrics is not None:
                self._timed("backfill_openmetrics", self._backfill_openmetrics)
            if self.rule_files and self.backfill_rules and self.blocks():
                self._timed("backfill_rules", self._backfill_rules)
            self._timed("start", lambda: self._serve(self.rule_files))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the server (terminate, wait, kill) and remove the temp dir (unless ``keep``)."""
        self._finalizer()
        self.url = ""

    def _timed(self, what: str, fn) -> None:
        t0 = _time.monotonic()
        fn()
        self.timings[what] = round(_time.monotonic() - t0, 3)

    def _promtool(self, *args: str, what: str) -> str:
        p = subprocess.run([_tool("promtool"), *args], capture_output=True, text=True, cwd=self.workdir)
        if p.returncode:
            tail = "\n".join((p.stderr.strip() + "\n" + p.stdout.strip()).strip().splitlines()[-20:])
            raise PrometheusError(f"{what} failed (exit {p.returncode}):\n{tail}")
        return p.stdout

    def _backfill_openmetrics(self) -> None:
        src = self.workdir / "input.om"
        src.write_text(self.openmetrics)
        self._promtool(
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(src),
            str(self.data_dir),
            what="promtool tsdb create-blocks-from openmetrics",
        )
        src.unlink()  # can be tens of MB; the blocks hold the data now

    def _data_range(self) -> tuple[float, float]:
        metas = self.blocks()
        # maxTime in meta.json is exclusive (last sample + 1 ms)
        return min(m["minTime"] for m in metas) / 1000, (max(m["maxTime"] for m in metas) - 1) / 1000

    def _backfill_rules(self) -> None:
        lo, hi = self._data_range()
        start = _ts(self.rules_start if self.rules_start is not None else lo)
        # one interval past the last sample, so the last grid point also gets its evaluation
        end = _ts(self.rules_end if self.rules_end is not None else hi + _seconds(self.rule_eval_interval))
        out = self.workdir / "rule-blocks"
        self._serve([])  # evaluate against the raw data only
        try:
            self._promtool(
                "tsdb",
                "create-blocks-from",
                "rules",
                "--quiet",
                f"--url={self.url}",
                f"--start={start}",
                f"--end={end}",
                f"--output-dir={out}",
                f"--eval-interval={self.rule_eval_interval}",
                *map(str, self.rule_files),
                what="promtool tsdb create-blocks-from rules",
            )
        finally:
            self._halt()
        for block in sorted(out.glob("*/meta.json")):
            block.parent.rename(self.data_dir / block.parent.name)

    def _halt(self) -> None:
        _stop(self._state.get("proc"))
        self._state["proc"] = None
        log = self._state.get("logfile")
        if log is not None:
            log.close()
        self.url = ""

    def _write_config(self, rule_files: Iterable[Path]) -> Path:
        cfg = {
            "global": {"scrape_interval": "1m", "evaluation_interval": self.rule_eval_interval},
            "rule_files": [str(f) for f in rule_files],
            "scrape_configs": [],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(cfg, indent=2) + "\n")  # JSON is YAML
        return path

    def _serve(self, rule_files: Sequence[Path]) -> None:
        config = self._write_config(rule_files)
        prometheus = _tool("prometheus")
        last_error = ""
        for _attempt in range(3):  # the free port can be taken between probing and binding
            port = _free_port()
            self._state["logfile"] = logfile = open(self.log_path, "a")
            logfile.write(f"--- starting on 127.0.0.1:{port}\n")
            logfile.flush()
            args = [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.tsdb.retention.time={self.retention}",
            ]
            if self.lookback_delta:
                args.append(f"--query.lookback-delta={self.lookback_delta}")
            args += self.extra_args
            self._state["proc"] = subprocess.Popen(
                args, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir
            )
            self.url = f"http://127.0.0.1:{port}"
            try:
                self._wait_ready()
                return
            except PrometheusError as e:
                last_error = str(e)
                self._halt()
                if "address already in use" not in last_error:
                    break
        raise PrometheusError(last_error)

    def _wait_ready(self) -> None:
        deadline = _time.monotonic() + self.ready_timeout
        proc = self._state["proc"]
        probe = None
        if self.blocks():
            lo, hi = self._data_range()
            probe = {"query": 'count({__name__=~".+"})', "time": _ts(hi)}
        while True:
            if proc.poll() is not None:
                raise PrometheusError(
                    f"prometheus exited with code {proc.returncode} during start-up; "
                    f"log tail ({self.log_path}):\n{_tail(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    ready = r.status == 200
                if ready and probe:  # blocks are loaded before ready; make sure they answer
                    ready = bool(self._api("/api/v1/query", probe)["result"])
                if ready:
                    return
            except (urllib.error.URLError, ConnectionError, OSError, QueryError):
                pass
            if _time.monotonic() > deadline:
                raise PrometheusError(
                    f"prometheus not ready after {self.ready_timeout}s; log tail ({self.log_path}):\n"
                    f"{_tail(self.log_path)}"
                )
            _time.sleep(0.05)

    # -------------------------------------------------------------------- API

    def _api(self, path: str, params: dict | list | None = None, post: bool = True) -> Any:
        if not self.url:
            raise PrometheusError("LocalPrometheus is not running")
        body = urllib.parse.urlencode(params or {}, doseq=True)
        if post:
            req = urllib.request.Request(
                self.url + path,
                data=body.encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        else:
            req = urllib.request.Request(self.url + path + ("?" + body if body else ""))
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                payload = json.load(r)
        except urllib.error.HTTPError as e:
            try:
                payload = json.load(e)
            except ValueError:
                raise QueryError(f"HTTP {e.code} from {path}", status=e.code) from None
            raise QueryError(
                f"{payload.get('errorType', 'error')}: {payload.get('error', '')}",
                payload.get("errorType", ""),
                e.code,
            ) from None
        if payload.get("status") != "success":
            raise QueryError(
                f"{payload.get('errorType', 'error')}: {payload.get('error', '')}",
                payload.get("errorType", ""),
            )
        return payload["data"]

    def api(self, path: str, **params: Any) -> Any:
        """GET any ``/api/v1/...`` endpoint; returns its ``data``."""
        return self._api(path, params, post=False)

    def query(self, expr: str, time: TimeLike | None = None) -> list:
        """Instant query; returns ``data.result``.

        A vector is ``[{metric, value: [t, "v"]}]``; a scalar is ``[t, "v"]``.
        """
        params = {"query": expr}
        if time is not None:
            params["time"] = _ts(time)
        return self._api("/api/v1/query", params)["result"]

    def query_range(self, expr: str, start: TimeLike, end: TimeLike, step: float | str = 30) -> list:
        """Range query; returns ``data.result`` (matrix: ``[{metric, values: [[t, "v"], ...]}]``)."""
        return self._api(
            "/api/v1/query_range", {"query": expr, "start": _ts(start), "end": _ts(end), "step": str(step)}
        )["result"]

    def query_value(self, expr: str, time: TimeLike | None = None) -> float | None:
        """The single value of an instant query (None for an empty vector; raises if several series)."""
        res = self.query(expr, time)
        if res and not isinstance(res[0], dict):  # scalar / string: [t, "v"]
            return float(res[1])
        if not res:
            return None
        if len(res) > 1:
            raise QueryError(f"{len(res)} series returned by {expr!r}; expected one")
        return float(res[0]["value"][1])

    def query_map(
        self, expr: str, time: TimeLike | None = None, by: Sequence[str] = ()
    ) -> dict[tuple, float]:
        """Instant query as ``{tuple(label values of by): value}``.

        With ``by`` empty the key holds all labels, sorted.
        """
        out = {}
        for r in self.query(expr, time):
            m = r["metric"]
            key = tuple(m.get(k) for k in by) if by else tuple(sorted(m.items()))
            if key in out:
                raise QueryError(f"labels {by} do not identify the series of {expr!r}: {key} repeats")
            out[key] = float(r["value"][1])
        return out

    def series(
        self, match: str | Sequence[str], start: TimeLike | None = None, end: TimeLike | None = None
    ) -> list[dict]:
        """``/api/v1/series`` label sets matching the selector(s)."""
        params: dict[str, Any] = {"match[]": [match] if isinstance(match, str) else list(match)}
        if start is not None:
            params["start"] = _ts(start)
        if end is not None:
            params["end"] = _ts(end)
        return self._api("/api/v1/series", params)

    def rules(self) -> list[dict]:
        """Loaded rule groups (``/api/v1/rules``)."""
        return self._api("/api/v1/rules", post=False)["groups"]
