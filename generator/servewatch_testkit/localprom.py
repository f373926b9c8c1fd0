"""A real Prometheus 3.5 on 127.0.0.1, pre-filled with backfilled data, for integration tests.

    with LocalPrometheus(text, rule_files=["rules/vllm.yaml"]) as prom:
        prom.query('max by (UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED)', time=t)

How it is built:
  1. ``promtool tsdb create-blocks-from openmetrics`` turns the OpenMetrics text into TSDB blocks
     inside a fresh data directory;
  2. with ``rule_files`` (and ``backfill_rules``), Prometheus is started without rules so that
     ``promtool tsdb create-blocks-from rules --url <it>`` can evaluate the recording rules over the
     data's time range; it is stopped, the rule blocks are moved into the data directory. Records
     that read other records are backfilled in later stages (rule_stages.py), one restart each;
  3. Prometheus is started (again) with ``rule_files`` in its config and no scrape targets, on a
     free port; ``/-/ready`` and a query over the backfilled range must answer before it is handed out.

The process, port and work dir are servewatch_testkit.servers.LocalServer's; every HTTP call goes
through servewatch.promapi, so a rejected query raises its QueryRejected (with the API's errorType).

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
recording rule sees that rule's sample of the same evaluation, as on a live server.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time as _time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Sequence


from servewatch import yamlio
from servewatch.promapi import Client, PromApiError, TimeLike, timestamp
from servewatch.spec.schema import seconds

from . import kept_data, rule_stages
from .servers import LocalServer, ServerError

__all__ = ["LocalPrometheus", "backfill_start"]


def backfill_start(steps: int, step: float, now: float | None = None, gap_s: float = 3600.0) -> float:
    """A ``start`` whose last sample lies ``gap_s`` before the current hour: past, and stable for an hour.

    For 240 steps of 30 s this is "now rounded down to the hour minus about 3 h".
    """
    now = _time.time() if now is None else now
    hour = math.floor(now / 3600) * 3600
    return hour - gap_s - (steps - 1) * step


BLOCK_S = 7200  # promtool writes a rule's history in 2 h blocks aligned to the Unix epoch


def block_windows(start: float, end: float) -> list[tuple[float, float]]:
    """[start, end] cut where promtool's rule importer cuts it into blocks: before each 2 h boundary
    (its block's last whole second) and from the boundary on. Run over the whole range, promtool
    3.5 writes nothing at all for a rule whose group has no evaluation in the first block (a short
    one when the range starts just before a boundary: it leaves its loop over the blocks there);
    run per block, such a group misses only that block, in which it has no evaluation anyway.
    promtool refuses a range of no length: a piece that would be one instant (a range ending on
    a boundary) is left out, with the one evaluation a group could have exactly there."""
    windows = []
    lo = start
    while (edge := (math.floor(lo / BLOCK_S) + 1) * BLOCK_S) <= end:
        if edge - 1 > lo:
            windows.append((lo, edge - 1))
        lo = edge
    if end > lo or not windows:  # a range of no length at all is promtool's to refuse
        windows.append((lo, end))
    return windows


class LocalPrometheus(LocalServer):
    """A throw-away Prometheus 3.5 serving backfilled data on 127.0.0.1 (use as a context manager).

    ``openmetrics``: OpenMetrics text (``servewatch_testkit.synth.to_openmetrics``), the path of an
    OpenMetrics file (left in place; for data too large to hold as a string), or None for an empty TSDB.
    A list or tuple of those is backfilled source by source (scenarios laid out on disjoint spans,
    servewatch_testkit.spans, may share label sets, which one OpenMetrics text cannot hold).
    ``rule_files``: rule files loaded by the server; their recording rules are also backfilled over
    ``[rules_start, rules_end]`` (default: the data's first and last sample) every
    ``rule_eval_interval`` when ``backfill_rules`` is true. ``retention`` keeps old blocks alive.
    ``scrape_configs``: Prometheus scrape configs (e.g. ScrapeServer.scrape_config) for live data;
    ``alertmanagers``: Alertmanager URLs the server sends its alerts to.
    ``keep=True`` leaves the temp dir (data, config, prometheus.log) behind for debugging.
    ``reuse``: a folder shared by the servers of a test session (conftest's ``prometheus_data``):
    the backfilled blocks are built once per set of inputs and linked into every server with the
    same inputs (servewatch_testkit.kept_data).
    """

    tool = "prometheus"
    log_name = "prometheus.log"

    def __init__(
        self,
        openmetrics: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        *,
        rule_files: Sequence[str | os.PathLike] = (),
        backfill_rules: bool = True,
        rules_start: TimeLike | None = None,
        rules_end: TimeLike | None = None,
        rule_eval_interval: str = "30s",
        retention: str = "100y",
        lookback_delta: str | None = None,
        scrape_configs: Sequence[dict] = (),
        alertmanagers: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        ready_timeout: float = 60.0,
        keep: bool = False,
        reuse: str | os.PathLike | None = None,
    ):
        super().__init__(extra_args=extra_args, ready_timeout=ready_timeout, keep=keep)
        self.openmetrics = openmetrics
        self.reuse = None if reuse is None else Path(reuse)
        if self.reuse is not None and scrape_configs:
            # the backfill stages' servers would scrape too: samples that kept blocks do not hold
            raise ValueError("reuse= keeps backfilled data only: a server that scrapes cannot share it")
        self.scrape_configs = list(scrape_configs)
        self.alertmanagers = [a.removeprefix("http://") for a in alertmanagers]
        self.rule_files = [Path(f).resolve() for f in rule_files]
        for f in self.rule_files:
            if not f.is_file():
                raise FileNotFoundError(f"rule file {f} not found")
        self.backfill_rules = backfill_rules
        self.rules_start, self.rules_end = rules_start, rules_end
        self.rule_eval_interval = rule_eval_interval
        self.retention = retention
        self.lookback_delta = lookback_delta
        self._loaded_rules: list[Path] = self.rule_files  # what the next serve() loads
        self._client: Client | None = None
        self._live_backfills = 0

    # ------------------------------------------------------------------ paths

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def blocks(self) -> list[dict]:
        """``meta.json`` of every block in the data dir, sorted by (minTime, ulid)."""
        metas = [json.loads(p.read_text()) for p in self.data_dir.glob("*/meta.json")]
        return sorted(metas, key=lambda m: (m["minTime"], m["ulid"]))

    # ----------------------------------------------------- the server's start

    def prepare(self) -> None:
        if self.reuse is None:
            self._backfill()
            return
        kept = kept_data.Kept(self.reuse, kept_data.key_of(self._inputs()))
        with kept.lock():
            if kept.exists():
                self.timed("reused", lambda: kept.copy_to(self.data_dir))
            else:
                self._backfill()
                kept.store(self.data_dir)

    def _backfill(self) -> None:
        self.data_dir.mkdir()
        if self.openmetrics is not None:
            self.timed("backfill_openmetrics", self._backfill_openmetrics)
        if self.rule_files and self.backfill_rules and self.blocks():
            self.timed("backfill_rules", self._backfill_rules)

    def _inputs(self) -> Iterable[bytes]:
        """Everything the backfilled blocks are made from: the binaries, the rules' range and
        interval, how their backfill runs (per block since promtool lost groups over the whole
        range), the OpenMetrics sources and each rule file's name (a group's phase comes from its
        file's path) and text."""
        from servewatch import tools

        binaries = [tools.find(name) for name in ("promtool", "prometheus")]
        rules_range = [None if t is None else timestamp(t) for t in (self.rules_start, self.rules_end)]
        yield json.dumps(
            [[str(b), b.stat().st_size, b.stat().st_mtime_ns] for b in binaries]
            + [rules_range, self.rule_eval_interval, self.backfill_rules, "rule backfill per block"]
        ).encode()
        sources = self.openmetrics if isinstance(self.openmetrics, (list, tuple)) else [self.openmetrics]
        for source in sources:
            if source is None:
                yield b""
            else:
                yield source.encode() if isinstance(source, str) else Path(source).read_bytes()
        for f in self.rule_files:
            yield f.name.encode()
            yield f.read_bytes()

    def args(self, port: int) -> list[str]:
        config = self._write_config(self._loaded_rules)
        args = [
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.retention.time={self.retention}",
            "--web.enable-lifecycle",  # reload() asks /-/reload, which answers once the config is applied
        ]
        if self.lookback_delta:
            args.append(f"--query.lookback-delta={self.lookback_delta}")
        return args

    def is_ready(self) -> bool:
        if not super().is_ready():
            return False
        if not self.blocks():
            return True
        try:  # blocks are loaded before ready; make sure they answer
            return bool(self.client.query('count({__name__=~".+"})', self._data_range()[1]))
        except PromApiError:
            return False

    def halt(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().halt()

    def close(self) -> None:
        self.halt()
        super().close()

    def _promtool(self, *args: str, what: str) -> str:
        from servewatch import tools

        p = subprocess.run([tools.find("promtool"), *args], capture_output=True, text=True, cwd=self.workdir)
        if p.returncode:
            tail = "\n".join((p.stderr.strip() + "\n" + p.stdout.strip()).strip().splitlines()[-20:])
            raise ServerError(f"{what} failed (exit {p.returncode}):\n{tail}")
        return p.stdout

    def _backfill_openmetrics(self) -> None:
        sources = self.openmetrics if isinstance(self.openmetrics, (list, tuple)) else [self.openmetrics]
        for source in sources:
            self._backfill_one(source)

    def _backfill_one(self, source: str | os.PathLike) -> None:
        given = isinstance(source, os.PathLike)
        src = Path(source) if given else self.workdir / "input.om"
        if not given:
            src.write_text(source)
        self._promtool(
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(src),
            str(self.data_dir),
            what="promtool tsdb create-blocks-from openmetrics",
        )
        if not given:
            src.unlink()  # can be tens of MB; the blocks hold the data now

    def _data_range(self) -> tuple[float, float]:
        metas = self.blocks()
        # maxTime in meta.json is exclusive (last sample + 1 ms)
        return min(m["minTime"] for m in metas) / 1000, (max(m["maxTime"] for m in metas) - 1) / 1000

    def _backfill_rules(self) -> None:
        lo, hi = self._data_range()
        start = timestamp(self.rules_start if self.rules_start is not None else lo)
        # one interval past the last sample, so the last grid point also gets its evaluation
        end = timestamp(
            self.rules_end if self.rules_end is not None else hi + seconds(self.rule_eval_interval)
        )
        self._loaded_rules = []  # evaluate against the stored data only
        for n, used in self._stages(self.rule_files, "rule-stage"):
            self._backfill_stage(self.workdir / f"rule-blocks-{n}", start, end, used)
        self._loaded_rules = self.rule_files

    def _stages(self, rule_files: Sequence[Path], folder: str) -> Iterable[tuple[int, list[Path]]]:
        """Each backfill stage's rule files (rule_stages.py), written under ``folder`` of the work dir,
        as (stage number, the files that hold rules). Each stage's files keep one path per rule file,
        relative to the work dir (promtool's cwd): every stage, and every run, evaluates a group at
        the same phase."""
        bodies = [yamlio.load(f.read_text()) or {} for f in rule_files]
        staged = [Path(folder) / f"{i}-{f.name}" for i, f in enumerate(rule_files)]
        (self.workdir / folder).mkdir()
        for n, files in enumerate(rule_stages.stages(bodies)):
            used = [path for path, body in zip(staged, files, strict=True) if body["groups"]]
            for path, body in zip(staged, files, strict=True):
                (self.workdir / path).write_text(json.dumps(body, indent=1) + "\n")  # JSON is YAML
            if used:
                yield n, used

    def backfill_live(self, rule_files: Sequence[str | os.PathLike], start: TimeLike, end: TimeLike) -> None:
        """Backfill the recording rules of `rule_files` over ``[start, end]`` into the running server,
        stage by stage, without stopping it: each stage's blocks are moved into the data dir and
        the next stage waits until the TSDB has loaded them (it looks for new blocks every minute).
        Records that hold native histograms come out empty: promtool's importer writes floats only."""
        files = [Path(f).resolve() for f in rule_files]
        self._live_backfills += 1
        folder = f"live-stage-{self._live_backfills}"
        for n, used in self._stages(files, folder):
            out = self.workdir / f"{folder}-blocks-{n}"
            self._rules_to_blocks(out, timestamp(start), timestamp(end), used)
            loaded = self._own_metric("prometheus_tsdb_blocks_loaded")
            self._wait_loaded(loaded + self._move_blocks(out), out)

    def backfill_restarting(
        self, rule_files: Sequence[str | os.PathLike], start: TimeLike, end: TimeLike
    ) -> None:
        """`backfill_live`'s backfill for a server whose data is all in blocks: each stage's blocks
        are loaded by a restart, not waited for (the TSDB looks for new blocks once a minute). A
        server with data in its head would replay it from the WAL at every restart."""
        files = [Path(f).resolve() for f in rule_files]
        self._live_backfills += 1
        folder = f"restart-stage-{self._live_backfills}"
        loaded, self._loaded_rules = self._loaded_rules, []  # the stages read the stored data only
        self.halt()
        try:
            for n, used in self._stages(files, folder):
                out = self.workdir / f"{folder}-blocks-{n}"
                self._backfill_stage(out, timestamp(start), timestamp(end), used)
        finally:
            self._loaded_rules = loaded
            self.serve()

    def _wait_loaded(self, blocks: float, what: Path) -> None:
        """Until the TSDB holds `blocks` blocks, or a whole reload has run since the call (a merge of
        overlapping blocks right after loading them can lower the count): a reload that was under
        way when the blocks were moved in may have listed the folder before them."""
        reloads = self._own_metric("prometheus_tsdb_reloads_total")
        deadline = _time.monotonic() + 300
        while (
            self._own_metric("prometheus_tsdb_blocks_loaded") < blocks
            and self._own_metric("prometheus_tsdb_reloads_total") < reloads + 2
        ):
            if _time.monotonic() > deadline:
                raise ServerError(f"the TSDB did not load the backfilled blocks of {what} within 300 s")
            _time.sleep(1)

    def _own_metric(self, name: str) -> float:
        """A sample of the server's own /metrics (an unlabelled counter or gauge)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise ServerError(f"{name} not in Prometheus' own metrics")

    def _rules_to_blocks(self, out: Path, start: str, end: str, rule_files: Sequence[Path]) -> None:
        """promtool's rule backfill of `rule_files` over [start, end], queried from this server,
        into blocks under `out`: one run per 2 h block the range touches (`block_windows`)."""
        for lo, hi in block_windows(float(start), float(end)):
            self._promtool(
                "tsdb",
                "create-blocks-from",
                "rules",
                "--quiet",
                f"--url={self.url}",
                f"--start={timestamp(lo)}",
                f"--end={timestamp(hi)}",
                f"--output-dir={out}",
                f"--eval-interval={self.rule_eval_interval}",
                *map(str, rule_files),
                what="promtool tsdb create-blocks-from rules",
            )

    def _move_blocks(self, out: Path) -> int:
        """Move the blocks a backfill wrote under `out` into the data dir; how many there were."""
        blocks = sorted(out.glob("*/meta.json"))
        for block in blocks:
            block.parent.rename(self.data_dir / block.parent.name)
        return len(blocks)

    def _backfill_stage(self, out: Path, start: str, end: str, rule_files: list[Path]) -> None:
        self.serve()
        try:
            self._rules_to_blocks(out, start, end, rule_files)
        finally:
            self.halt()
        self._move_blocks(out)

    def reload(
        self,
        rule_files: Sequence[str | os.PathLike] | None = None,
        scrape_configs: Sequence[dict] | None = None,
    ) -> None:
        """Apply other rule files and/or scrape configs to the running server, as an operator's config
        change would (no restart: the head and its scrapes go on); returns once they are in force."""
        if rule_files is not None:
            self._loaded_rules = [Path(f).resolve() for f in rule_files]
        if scrape_configs is not None:
            self.scrape_configs = list(scrape_configs)
        self._write_config(self._loaded_rules)
        request = urllib.request.Request(self.url + "/-/reload", method="POST")
        try:
            urllib.request.urlopen(request, timeout=120).close()
        except urllib.error.HTTPError as e:
            raise ServerError(f"Prometheus refused the new config: {e.read().decode().strip()}") from None

    def _write_config(self, rule_files: Iterable[Path]) -> Path:
        cfg = {
            "global": {"scrape_interval": "1m", "evaluation_interval": self.rule_eval_interval},
            "rule_files": [str(f) for f in rule_files],
            "scrape_configs": self.scrape_configs,
        }
        if self.alertmanagers:
            cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": self.alertmanagers}]}]}
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(cfg, indent=2) + "\n")  # JSON is YAML
        return path

    # -------------------------------------------------------------------- API

    @property
    def client(self) -> Client:
        """servewatch.promapi's client for this server (while it runs)."""
        if not self.url:
            raise ServerError("LocalPrometheus is not running")
        if self._client is None or self._client.url != self.url:
            self._client = Client(self.url, timeout=60)
        return self._client

    def api(self, path: str, **params: Any) -> Any:
        """GET any ``/api/v1/...`` endpoint; returns its ``data``."""
        return self.client.get(path, params)

    def query(self, expr: str, time: TimeLike | None = None) -> list:
        """Instant query; returns ``data.result``.

        A vector is ``[{metric, value: [t, "v"]}]``; a scalar is ``[t, "v"]``.
        """
        return self.client.query(expr, time)

    def query_range(self, expr: str, start: TimeLike, end: TimeLike, step: float | str = 30) -> list:
        """Range query; returns ``data.result`` (matrix: ``[{metric, values: [[t, "v"], ...]}]``)."""
        return self.client.query_range(expr, start, end, step)

    def query_value(self, expr: str, time: TimeLike | None = None) -> float | None:
        """The single value of an instant query (None for an empty vector; raises if several series)."""
        res = self.query(expr, time)
        if res and not isinstance(res[0], dict):  # scalar / string: [t, "v"]
            return float(res[1])
        if not res:
            return None
        if len(res) > 1:
            raise ValueError(f"{len(res)} series returned by {expr!r}; expected one")
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
                raise ValueError(f"labels {by} do not identify the series of {expr!r}: {key} repeats")
            out[key] = float(r["value"][1])
        return out

    def series(
        self, match: str | Sequence[str], start: TimeLike | None = None, end: TimeLike | None = None
    ) -> list[dict]:
        """``/api/v1/series`` label sets matching the selector(s)."""
        return self.client.series(match, start, end)

    def rules(self) -> list[dict]:
        """Loaded rule groups (``/api/v1/rules``)."""
        return self.client.rules()
