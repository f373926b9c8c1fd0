"""Synthetic scenarios served over HTTP, for real scrapers (Prometheus agents, vmagent).

    with ScrapeServer({"east": incident("kv_saturation")}, first_step=68, seconds_per_step=1) as srv:
        scrape_configs = srv.scrape_configs("east")   # one static target per synthetic target

Each synthetic target (one per ``up`` series of a scenario: a dcgm-exporter, a vLLM pod) is a path
``/<cluster>/<n>/metrics`` that answers with the Prometheus text exposition of that target's series
at the current step. Time is compressed: step ``first_step`` is served at start-up and each
``seconds_per_step`` of wall time advances one step, so a scenario written on a 30 s grid plays out
at one step a second. Counter and histogram values are divided by the same factor (30 s per step /
``seconds_per_step``), so every per-second rate, and so every ratio and quantile, is what the
scenario states; gauges are served as they are. Past the scenario's last step it goes on as it
ended: gauges hold, counters keep their last increase per step.

The target's own labels (``job``, ``instance``, ``namespace``, ``pod``, ...) are not in the text: the
scrape config attaches them, as Kubernetes service discovery would. A step where the scenario's
``up`` is 0 (or missing) answers 503, so the scraper records ``up`` 0 and marks the series stale.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable, Mapping

from .synth.series import Series

__all__ = [
    "Exposition",
    "LoopbackServer",
    "QuietHTTPServer",
    "ScrapeServer",
    "TextHandler",
    "exposition",
    "value_at",
]

COUNTING = ("counter", "histogram")  # kinds whose values only grow: scaled with time


@dataclass(frozen=True)
class _Target:
    labels: dict[str, str]
    up: Series
    series: tuple[Series, ...]


def _split(scenario: Iterable[Series]) -> list[_Target]:
    """One target per ``up`` series; each other series belongs to the target whose labels it carries."""
    series = list(scenario)
    ups = [s for s in series if s.name == "up"]
    targets = []
    for up in ups:
        labels = dict(up.labels)
        mine = tuple(
            s for s in series if s.name != "up" and all(dict(s.labels).get(k) == v for k, v in labels.items())
        )
        targets.append(_Target(labels, up, mine))
    owned = {id(s) for t in targets for s in t.series}
    orphans = [s for s in series if s.name != "up" and id(s) not in owned]
    if orphans:
        raise ValueError(f"{len(orphans)} series belong to no target, e.g. {orphans[0]!r}")
    return targets


def value_at(s: Series, step: int) -> float | None:
    """The series' value at `step`, past its end as it ended (counters: the last increase per step)."""
    values, last = s.values, len(s.values) - 1
    if step <= last:
        return values[step]
    if values[last] is None:
        return None
    if s.kind not in COUNTING or last == 0 or values[last - 1] is None:
        return values[last]
    return values[last] + (step - last) * (values[last] - values[last - 1])


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(series: Iterable[Series], step: int, drop: Iterable[str] = (), scale: float = 1.0) -> str:
    """Prometheus text format 0.0.4 of `series` at `step`: labels in `drop` left out, counter and
    histogram values divided by `scale`, series without a value at that step left out."""
    return Exposition(series, drop).at(step, scale)


class Exposition:
    """The text format of a fixed set of series, laid out once (families, their order, each line's
    name and labels) so that a step only formats values: a replay serves tens of thousands of
    series per scrape. ``at(step, timestamp_ms=...)`` stamps every line, for a scraper that honours
    timestamps."""

    def __init__(self, series: Iterable[Series], drop: Iterable[str] = ()):
        drop = set(drop)
        families: dict[str, list[Series]] = {}
        for s in series:
            families.setdefault(s.family, []).append(s)
        self._families: list[tuple[str, bool, list[tuple[Series, str]]]] = []
        for family in sorted(families):
            group = families[family]
            kind = group[0].kind
            typed = kind if kind in ("gauge", "histogram") else "untyped"
            if kind == "counter" and all(s.name.endswith("_total") for s in group):
                typed, family = "counter", group[0].name  # the 0.0.4 text names a counter with _total
            order = _histogram_order if kind == "histogram" else (lambda s: (s.name, s.labels))
            rows = []
            for s in sorted(group, key=order):
                labels = ",".join(f'{k}="{_escape(val)}"' for k, val in s.labels if k not in drop)
                rows.append((s, f"{s.name}{{{labels}}} " if labels else f"{s.name} "))
            self._families.append((f"# TYPE {family} {typed}\n", kind in COUNTING, rows))

    def at(self, step: int, scale: float = 1.0, timestamp_ms: int | None = None) -> str:
        """The text at `step` (counting values divided by `scale`), each line stamped if given."""
        end = "\n" if timestamp_ms is None else f" {timestamp_ms}\n"
        out = []
        for header, counting, rows in self._families:
            lines = []
            for s, prefix in rows:
                v = value_at(s, step)
                if v is not None:
                    lines.append(prefix + _fmt(v / scale if counting else v) + end)
            if lines:
                out.append(header)
                out.extend(lines)
        return "".join(out)


_SUFFIX_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2}


def _histogram_order(s: Series) -> tuple:
    """As a client library writes a histogram: each label set whole (buckets by ascending le, then
    count and sum), which Prometheus' conversion to native histograms (NHCB) reads one set at a time."""
    suffix = next((x for x in _SUFFIX_ORDER if s.name.endswith(x)), "")
    labels = tuple((k, v) for k, v in s.labels if k != "le")
    le = dict(s.labels).get("le")
    return (labels, _SUFFIX_ORDER.get(suffix, 3), float(le) if le is not None else 0.0, s.name)


class QuietHTTPServer(ThreadingHTTPServer):
    """A scraper that gives up (a scrape timeout on a loaded machine) is no error of ours: the default
    prints a traceback per hang-up, which fills the stderr of `servewatch demo` and the user's terminal."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class TextHandler(BaseHTTPRequestHandler):
    """A handler that answers with the Prometheus text format and logs no request (scrapers call
    every second)."""

    def send_text_headers(self, length: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def log_message(self, *args):
        pass


class LoopbackServer:
    """An HTTP server on 127.0.0.1 serving from a daemon thread; ``close`` (or leaving the ``with``
    block) stops it."""

    _httpd: ThreadingHTTPServer | None = None
    url = ""

    def _listen(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self._httpd = QuietHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True).start()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self.url = ""


class ScrapeServer(LoopbackServer):
    """Serves scenarios (one per cluster) as scrape targets on 127.0.0.1 (a context manager)."""

    def __init__(
        self,
        clusters: Mapping[str, Iterable[Series]],
        *,
        first_step: int = 0,
        seconds_per_step: float = 1.0,
        scenario_step: float = 30.0,
    ):
        self.targets = {name: _split(series) for name, series in clusters.items()}
        self.first_step = first_step
        self.seconds_per_step = seconds_per_step
        self.scale = scenario_step / seconds_per_step
        self.t0 = 0.0

    # -- time -------------------------------------------------------------------------------------
    def step(self, now: float | None = None) -> int:
        """The scenario step served at `now` (wall-clock seconds)."""
        now = time.time() if now is None else now
        return self.first_step + max(0, math.floor((now - self.t0) / self.seconds_per_step))

    def restart(self) -> None:
        """Serve `first_step` from now on (once the scrapers' stores are up, say)."""
        self.t0 = time.time()

    def time_of(self, step: int) -> float:
        """When `step` starts being served."""
        return self.t0 + (step - self.first_step) * self.seconds_per_step

    # -- what scrapers need -------------------------------------------------------------------------
    def path(self, cluster: str, n: int) -> str:
        return f"/{cluster}/{n}/metrics"

    def static_configs(self, cluster: str) -> list[dict]:
        """Prometheus/vmagent ``static_configs``: each target at its path, with its own labels."""
        host = self.url.removeprefix("http://")
        return [
            {"targets": [host], "labels": {**t.labels, "__metrics_path__": self.path(cluster, n)}}
            for n, t in enumerate(self.targets[cluster])
        ]

    def scrape_config(self, cluster: str, interval: str) -> dict:
        return {
            "job_name": f"synthetic-{cluster}",
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "static_configs": self.static_configs(cluster),
        }

    # -- serving -----------------------------------------------------------------------------------
    def render(self, cluster: str, n: int, step: int) -> str | None:
        """The text of target `n` at `step`, or None when the target is down there."""
        target = self.targets[cluster][n]
        if not value_at(target.up, step):
            return None
        return exposition(target.series, step, drop=target.labels, scale=self.scale)

    def __enter__(self) -> "ScrapeServer":
        return self.start()

    def start(self) -> "ScrapeServer":
        server = self

        class Handler(TextHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                parts = self.path.strip("/").split("/")
                try:
                    cluster, n = parts[0], int(parts[1])
                    server.targets[cluster][n]
                    assert parts[2:] == ["metrics"]
                except (IndexError, KeyError, ValueError, AssertionError):
                    self.send_error(404)
                    return
                text = server.render(cluster, n, server.step())
                if text is None:
                    self.send_error(503, "target down in the scenario")
                    return
                body = text.encode()
                self.send_text_headers(len(body))
                self.wfile.write(body)

        self._listen(Handler, "scrape-server")
        self.t0 = time.time()
        return self
