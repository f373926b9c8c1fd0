"""Real scrapers and rule evaluators on 127.0.0.1 for the distributed-setup tests: a Prometheus 3.5 in
agent mode, vmagent and vmalert, each a servewatch_testkit.servers.LocalServer.

    with LocalPrometheusAgent(scrape_configs, "http://central/api/v1/write", {"cluster": "east"}):
        ...   # scrapes, adds cluster="east" to every sample, remote-writes to the central Prometheus

The central stores are servewatch_testkit.localprom.LocalPrometheus (with
``--web.enable-remote-write-receiver``) and servewatch_testkit.victoriametrics.LocalVictoriaMetrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from .servers import LocalServer

__all__ = ["LocalPrometheusAgent", "LocalVMAgent", "LocalVMAlert"]


def _write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=1) + "\n")  # JSON is YAML
    return path


class _Forwarder(LocalServer):
    """A scraper that stores nothing itself: it scrapes `scrape_configs`, adds `labels` to every
    sample and remote-writes them to `remote_write_url`."""

    def __init__(
        self,
        scrape_configs: Sequence[dict],
        remote_write_url: str,
        labels: Mapping[str, str],
        *,
        extra_args: Sequence[str] = (),
        **kw,
    ):
        super().__init__(extra_args=extra_args, **kw)
        self.scrape_configs = list(scrape_configs)
        self.remote_write_url = remote_write_url
        self.labels = dict(labels)


class LocalPrometheusAgent(_Forwarder):
    """``prometheus --agent``: the labels are its ``external_labels``; no local queries, no rules."""

    tool = "prometheus"
    log_name = "prometheus-agent.log"

    def prepare(self) -> None:
        config = {
            "global": {"external_labels": self.labels},
            "scrape_configs": self.scrape_configs,
            "remote_write": [
                {
                    "url": self.remote_write_url,
                    # send within a second, not the default 5 s: the tests run on compressed time
                    "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms"},
                }
            ],
        }
        _write_json(self.workdir / "agent.yml", config)

    def args(self, port: int) -> list[str]:
        return [
            "--agent",
            f"--config.file={self.workdir / 'agent.yml'}",
            f"--storage.agent.path={self.workdir / 'wal'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]


class LocalVMAgent(_Forwarder):
    """vmagent: the labels go on every sample through ``-remoteWrite.label``."""

    tool = "vmagent"
    ready_path = "/health"
    log_name = "vmagent.log"

    def prepare(self) -> None:
        _write_json(self.workdir / "scrape.yml", {"scrape_configs": self.scrape_configs})

    def args(self, port: int) -> list[str]:
        return [
            f"-promscrape.config={self.workdir / 'scrape.yml'}",
            f"-remoteWrite.url={self.remote_write_url}",
            *(f"-remoteWrite.label={k}={v}" for k, v in sorted(self.labels.items())),
            f"-remoteWrite.tmpDataPath={self.workdir / 'queue'}",
            "-remoteWrite.flushInterval=1s",
            f"-httpListenAddr=127.0.0.1:{port}",
        ]


class LocalVMAlert(LocalServer):
    """vmalert evaluating `rule_files` against a VictoriaMetrics at `datasource_url`, writing recorded
    series and alert state back to it. Its alerts are at ``url + "/api/v1/alerts"`` (Prometheus'
    format); notifications go nowhere unless `notifier_url` names an Alertmanager."""

    tool = "vmalert"
    ready_path = "/health"
    log_name = "vmalert.log"

    def __init__(
        self,
        rule_files: Sequence[str | Path],
        datasource_url: str,
        *,
        evaluation_interval: str = "30s",
        notifier_url: str | None = None,
        extra_args: Sequence[str] = (),
        **kw,
    ):
        super().__init__(extra_args=extra_args, **kw)
        self.rule_files = [Path(f).resolve() for f in rule_files]
        self.datasource_url = datasource_url
        self.evaluation_interval = evaluation_interval
        self.notifier_url = notifier_url

    def args(self, port: int) -> list[str]:
        notify = [f"-notifier.url={self.notifier_url}"] if self.notifier_url else ["-notifier.blackhole"]
        return [
            *(f"-rule={f}" for f in self.rule_files),
            f"-datasource.url={self.datasource_url}",
            f"-remoteWrite.url={self.datasource_url}",
            f"-evaluationInterval={self.evaluation_interval}",
            # Prometheus puts no alertgroup label on alerts; without it both give the same label sets
            "-disableAlertgroupLabel",
            *notify,
            f"-httpListenAddr=127.0.0.1:{port}",
        ]
