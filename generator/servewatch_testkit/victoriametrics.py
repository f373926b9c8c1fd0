"""A real single-node VictoriaMetrics on 127.0.0.1 for integration tests (empty storage of its own)."""

from __future__ import annotations

from .servers import LocalServer


class LocalVictoriaMetrics(LocalServer):
    """``LocalVictoriaMetrics()``: its Prometheus-compatible query API is at ``url`` once started."""

    tool = "victoria-metrics"
    ready_path = "/health"
    log_name = "victoria-metrics.log"

    def args(self, port: int) -> list[str]:
        return [
            f"-storageDataPath={self.workdir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=100y",  # backfilled test data can be old
        ]
