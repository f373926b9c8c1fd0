"""A real Alertmanager on 127.0.0.1 for integration tests, with a config of the test's choosing."""

from __future__ import annotations

from typing import Sequence

from .servers import LocalServer

# Alertmanager needs a route and a receiver; one that sends nowhere keeps every alert in its API.
SILENT_CONFIG = "route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n"


class LocalAlertmanager(LocalServer):
    """``LocalAlertmanager(config_yaml)``: a single Alertmanager (no cluster gossip) with its own storage."""

    tool = "alertmanager"
    log_name = "alertmanager.log"

    def __init__(self, config: str = SILENT_CONFIG, *, extra_args: Sequence[str] = (), **kw):
        super().__init__(extra_args=extra_args, **kw)
        self.config = config

    def prepare(self) -> None:
        (self.workdir / "alertmanager.yml").write_text(self.config)
        (self.workdir / "data").mkdir()

    def args(self, port: int) -> list[str]:
        return [
            f"--config.file={self.workdir / 'alertmanager.yml'}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # empty: no gossip port, so nothing else to bind
        ]
