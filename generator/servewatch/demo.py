"""`servewatch demo`: try detect, investigate and the dashboards without a cluster of your own.

It starts a real Prometheus 3.5 and Alertmanager on 127.0.0.1 that scrape a synthetic MoE fleet
(servewatch_testkit: DeepSeek-V3 on two pods, two data-parallel engines each, eight GPUs), one copy
per incident, each copy its own `cluster`. The incidents play live: healthy for a few steps, then
the incident, which then holds. Time runs `speed` times faster than the clock (30 s steps served
one a second by default), so the rules are generated from your specs with every scrape interval,
rate window, `for` and group interval divided by the same factor (servewatch_testkit.fastforward):
alerts fire within a minute, at the values a real fleet would show. SLOs run over days and are
left out. Everything lives in a work folder that is removed on exit unless you name one. Killed
hard (SIGKILL), it leaves no server running (Linux), only its work folder.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ServewatchError

DEFAULT_INCIDENTS = ("healthy", "kv_saturation", "ttft_queueing", "ep_rank_gpu_full", "wedged_engine")
LEAD_STEPS = 10  # healthy steps served before the incidents begin
CLUSTER_LABEL = "cluster"


def cluster_of(incident: str) -> str:
    return incident.replace("_", "-")


@dataclass
class Demo:
    prometheus_url: str
    alertmanager_url: str | None
    specs: Path  # the compressed specs the rules were generated from
    out: Path  # rules/, dashboards/, runbooks/ generated from them
    incidents: tuple[str, ...]
    incident_in_s: float  # wall-clock seconds until the incidents begin


@contextlib.contextmanager
def running(specs: Path, workdir: Path, incidents: tuple[str, ...], speed: float, alertmanager: bool):
    """The demo's servers, up, as a Demo; stopped (and their temp folders removed) on exit."""
    from servewatch_testkit.alertmanager import LocalAlertmanager
    from servewatch_testkit.fastforward import compressed_specs, duration
    from servewatch_testkit.localprom import LocalPrometheus
    from servewatch_testkit.scrape_server import ScrapeServer
    from servewatch_testkit.servers import die_with_this_thread
    from servewatch_testkit.synth import incident
    from servewatch_testkit.synth.incidents import INCIDENT_STEP, STEP

    from . import generate, writer
    from .spec.loader import load

    fast = compressed_specs(specs, workdir / "specs", speed, cluster_label=CLUSTER_LABEL)
    _, files = generate.build(fast, workdir)
    writer.write(workdir, files)
    rule_files = sorted((workdir / "rules").glob("*.rules.yaml"))
    scrape = duration(STEP / speed)
    interval = load(fast).config.scrape_interval
    fleets = {cluster_of(name): incident(name) for name in incidents}
    with contextlib.ExitStack() as stack:
        stack.enter_context(die_with_this_thread())  # a demo killed hard leaves no server behind
        srv = stack.enter_context(
            ScrapeServer(fleets, first_step=INCIDENT_STEP - LEAD_STEPS, seconds_per_step=STEP / speed)
        )
        am = stack.enter_context(LocalAlertmanager()) if alertmanager else None
        prom = stack.enter_context(
            LocalPrometheus(
                None,
                rule_files=rule_files,
                backfill_rules=False,
                rule_eval_interval=interval,
                scrape_configs=[_labelled(srv.scrape_config(c, scrape), c) for c in fleets],
                alertmanagers=[am.url] if am else [],
            )
        )
        srv.restart()  # the fleet plays from here, however long the start took
        yield Demo(prom.url, am.url if am else None, fast, workdir, incidents, LEAD_STEPS * STEP / speed)


def _labelled(config: dict, cluster: str) -> dict:
    """A scrape config whose targets carry the cluster label, as a multi-cluster setup adds it."""
    for static in config["static_configs"]:
        static["labels"] = {**static["labels"], CLUSTER_LABEL: cluster}
    return {**config, "job_name": f"synthetic-{cluster}"}


def instructions(demo: Demo, commands: set[str]) -> str:
    """The URLs and what to try, as printed once the demo is up."""
    url, specs, boards = demo.prometheus_url, demo.specs, demo.out / "dashboards" / "import"
    lines = [
        f"servewatch demo: Prometheus 3.5  {url}",
        *([f"servewatch demo: Alertmanager     {demo.alertmanager_url}"] if demo.alertmanager_url else []),
        f"servewatch demo: the incidents ({', '.join(demo.incidents)}) begin in {demo.incident_in_s:.0f} s, "
        f"each in its own {CLUSTER_LABEL} ({', '.join(map(cluster_of, demo.incidents))}); "
        "alerts fire within about a minute",
        f"servewatch demo: rules, dashboards and runbooks generated from {specs} into {demo.out}",
        "",
        "Try, in another terminal:",
        f"  servewatch detect --prometheus {url} --specs {specs}",
        f"  servewatch investigate --prometheus {url} --specs {specs}        # every firing alert",
        f"  servewatch investigate --prometheus {url} --specs {specs} VLLMKVCacheUsageHigh",
        f"  curl -s {url}/api/v1/alerts                                       # what Prometheus fires",
        f"  Grafana: add a Prometheus data source at {url}, then import {boards}/*.json",
    ]
    if "backtest" in commands:
        lines.append(f"  servewatch backtest --prometheus {url} --specs {specs} --range 15m")
    return "\n".join(lines + ["", "Ctrl-C stops it."])


def add_cli(sub):
    p = sub.add_parser(
        "demo",
        help="a local Prometheus and Alertmanager with a synthetic fleet's incidents, to try servewatch on",
        description=__doc__.split("\n\n")[0] + " " + " ".join(__doc__.split("\n\n")[1].split()),
        epilog="Exit status: 0 stopped (Ctrl-C, or after --seconds); 1 Prometheus or Alertmanager could not "
        "start or is not installed (`servewatch tools install`); 2 the specs are invalid or the command "
        "was misused.",
    )
    p.add_argument("--specs", default="specs", help="specs to generate the rules from (default: specs)")
    p.add_argument(
        "--incident",
        action="append",
        metavar="NAME",
        help=f"incident to play, repeatable (default: {', '.join(DEFAULT_INCIDENTS)})",
    )
    p.add_argument(
        "--speed", type=float, default=30.0, help="how much faster than the clock time runs (default: 30)"
    )
    p.add_argument(
        "--workdir", help="keep the generated specs, rules and dashboards here (default: a temp dir)"
    )
    p.add_argument("--no-alertmanager", action="store_true", help="start Prometheus only")
    p.add_argument("--seconds", type=float, help="stop after this many seconds instead of waiting for Ctrl-C")
    p.set_defaults(func=cmd_demo)
    return p


def _incidents(names: list[str] | None) -> tuple[str, ...]:
    from servewatch_testkit.synth.incidents import INCIDENTS

    chosen = tuple(dict.fromkeys(names or DEFAULT_INCIDENTS))
    unknown = [n for n in chosen if n not in INCIDENTS]
    if unknown:
        raise ServewatchError(f"unknown incident {unknown[0]!r}; known: {', '.join(sorted(INCIDENTS))}")
    return chosen


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def cmd_demo(args) -> int:
    from servewatch_testkit.servers import ServerError

    if not 1 <= args.speed <= 60:
        raise ServewatchError(f"--speed {args.speed:g}: want 1 (real time) to 60")
    incidents = _incidents(args.incident)
    commands = set(args.commands)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as Ctrl-C does
    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir = Path(args.workdir)
            if workdir.exists() and any(workdir.iterdir()):
                raise ServewatchError(f"--workdir {workdir} is not empty; name a new or empty folder")
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="servewatch-demo-")))
        try:
            demo = stack.enter_context(
                running(Path(args.specs), workdir, incidents, args.speed, not args.no_alertmanager)
            )
            print(instructions(demo, commands), flush=True)
            deadline = None if args.seconds is None else time.monotonic() + args.seconds
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        except ServerError as exc:
            print(f"servewatch: error: the demo could not start: {exc}", file=sys.stderr)
            return 1
        finally:
            print("servewatch demo: stopping", file=sys.stderr, flush=True)
    print("servewatch demo: stopped", file=sys.stderr)
    return 0
