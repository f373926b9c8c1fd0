"""A fleet's history replayed into a real Prometheus by scraping: one step per scrape, stamped.

``promtool tsdb create-blocks-from openmetrics`` cannot write native histograms (OpenMetrics 1.0
text has none), so data that Prometheus should hold as native histograms with custom buckets
(NHCB) has to come in through a scrape, where ``convert_classic_histograms_to_nhcb`` turns each
classic histogram into one. This server makes a scrape carry history: every series of the fleet
is one target (``honor_labels`` keeps their job, instance, namespace and pod; the synthetic ``up``
series is served as an ordinary series) and every line carries the step's timestamp
(``honor_timestamps``), so step ``i`` lands at ``start + i * step_s`` however fast the scrapes come.

    replay = FleetReplay(series, start=time.time() - 3600)
    with replay:  # serving
        LocalPrometheus(scrape_configs=[replay.scrape_config("2s")], extra_args=[NATIVE_FLAG])

Each scrape that is answered in full moves on one step; a scrape the scraper gave up on (a
timeout) is served again. The replay never serves a step whose timestamp lies in the future:
once it has caught up with the clock it serves the latest step until the next one is due, so the
fleet goes on in real time, as it ended (``scrape_server.value_at``), for as long as it is scraped.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Iterable

from .scrape_server import Exposition, LoopbackServer, TextHandler
from .synth.series import Series

__all__ = ["FleetReplay", "NATIVE_FLAG", "JOB"]

NATIVE_FLAG = "--enable-feature=native-histograms"  # Prometheus 3.5 stores no scraped NHCB without it
JOB = "fleet-replay"  # the scrape job; its own `up` is the one series no fleet target carries


class FleetReplay(LoopbackServer):
    """Serves `series` at ``/metrics`` on 127.0.0.1, one ``step_s`` step per scrape from ``start``
    (a context manager). ``clock`` is the wall clock (tests pass their own)."""

    def __init__(
        self,
        series: Iterable[Series],
        start: float,
        step_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ):
        self.exposition = Exposition(series)
        self.start, self.step_s, self.clock = start, step_s, clock
        self.served = 0  # scrapes answered in full: the next step to serve
        self._lock = threading.Lock()

    # -- time -------------------------------------------------------------------------------------
    def timestamp(self, step: int) -> float:
        return self.start + step * self.step_s

    def due(self, now: float | None = None) -> int:
        """The last step whose timestamp is not in the future."""
        now = self.clock() if now is None else now
        return max(0, math.floor((now - self.start) / self.step_s))

    def next_step(self) -> int:
        """What the next scrape gets: the step after the last one served, unless it is not due yet."""
        return min(self.served, self.due())

    def caught_up(self) -> bool:
        """Whether every due step has been served: from here on the fleet runs in real time."""
        return self.served > self.due()

    def last_timestamp(self) -> float:
        """The timestamp of the last step served in full."""
        if not self.served:
            raise ValueError("no step served yet")
        return self.timestamp(self.served - 1)

    # -- what the scraper needs -------------------------------------------------------------------
    def text(self, step: int) -> str:
        return self.exposition.at(step, timestamp_ms=round(self.timestamp(step) * 1000))

    def scrape_config(self, interval: str, timeout: str | None = None) -> dict:
        """One target; its labels and timestamps kept; classic histograms stored both ways."""
        return {
            "job_name": JOB,
            "scrape_interval": interval,
            "scrape_timeout": timeout or interval,
            "honor_labels": True,
            "honor_timestamps": True,
            "convert_classic_histograms_to_nhcb": True,
            "always_scrape_classic_histograms": True,
            "static_configs": [{"targets": [self.url.removeprefix("http://")]}],
        }

    # -- serving ----------------------------------------------------------------------------------
    def _claim(self, step: int) -> bool:
        """Count `step` as served before its body goes out (whoever reads `served` once the scraper
        has the body sees it); False if it was served already (a repeat while caught up)."""
        with self._lock:
            if step != self.served:
                return False
            self.served += 1
            return True

    def _release(self, step: int) -> None:
        """The body of `step` did not get out: serve it again."""
        with self._lock:
            if self.served == step + 1:
                self.served = step

    def __enter__(self) -> "FleetReplay":
        return self.start_serving()

    def start_serving(self) -> "FleetReplay":
        replay = self

        class Handler(TextHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                step = replay.next_step()
                body = replay.text(step).encode()
                self.send_text_headers(len(body))
                claimed = replay._claim(step)
                try:
                    self.wfile.write(body)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    if claimed:  # the scraper gave up: serve this step again
                        replay._release(step)

        self._listen(Handler, "fleet-replay")
        return self
