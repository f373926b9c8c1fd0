"""`servewatch calibrate`: the command line. Parses, reads the sources, proposes, prints, writes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ServewatchError
from ..promapi import PromApiError
from ..investigate.cli import ENV_URL, connect, parse_time
from ..spec.schema import seconds
from . import bench, overrides, report
from .history import History, split
from .measures import ERRORS, HISTOGRAMS, Measure, for_histogram, signal_alerts
from .propose import Proposer, Result, check_steps, combine, mismatched_loads, sweep
from .targets import CalibrateError, from_slos, parse

DESCRIPTION = """Read a load test (vllm bench serve result files, one per load step, and/or the run's
Prometheus history), find the highest load step that met every target (the sustainable load) and
propose a threshold and a `for` for every alert, each with its evidence and the rule it followed,
as a diff of specs/overrides.yaml (--write applies it, keeping your comments).

Exit codes: 0 proposals printed (some may say why the data cannot give a number); 1 Prometheus
could not be asked (unreachable, refused, timed out, rejected a query); 2 the data cannot support an
answer (no step met the targets, a step with too few requests, a target it does not measure, a file
that is not a bench result) or the specs are invalid or the command was misused; nothing is written then."""


def add_cli(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="propose thresholds and `for` from a load test (bench results, Prometheus history)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bench", nargs="+", default=[], metavar="FILE", help="vllm bench serve --save-result files"
    )
    p.add_argument(
        "--prometheus", metavar="URL", help=f"Prometheus holding the run (or ${ENV_URL} with --range)"
    )
    p.add_argument("--range", metavar="START..END", help="the run's time range (RFC 3339 or Unix seconds)")
    p.add_argument("--step-every", metavar="DURATION", help="the range in steps of this length (e.g. 10m)")
    p.add_argument("--steps", metavar="T,T,...", help="explicit step boundaries inside the range")
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="MEASURE=LIMIT",
        help="e.g. ttft_p95=1.5s, itl_p95=80ms, errors=1%%; repeatable (default: the SLOs' objectives)",
    )
    p.add_argument("--specs", default="specs", help="specs folder (default: specs)")
    p.add_argument(
        "--min-requests",
        type=int,
        default=100,
        metavar="N",
        help="fewest finished requests a step needs (default: 100)",
    )
    p.add_argument(
        "--gpus", type=float, metavar="N", help="GPUs that served the run: report cost per 1M good tokens"
    )
    p.add_argument(
        "--price-per-gpu-hour",
        type=float,
        metavar="PRICE",
        help="default: dashboards.defaults.cost.price_per_gpu_hour of the specs",
    )
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per-request timeout")
    p.add_argument("--ca-file", metavar="PEM", help="CA bundle for the Prometheus TLS certificate")
    p.add_argument(
        "--insecure-skip-verify", action="store_true", help="do not verify TLS (test servers only)"
    )
    p.add_argument("--write", action="store_true", help="apply the proposals to specs/overrides.yaml")
    p.set_defaults(func=cmd_calibrate)


def _measures(model, targets) -> list[Measure]:
    """What each step must report: the targets, the SLOs' percentiles and what each alert watches."""
    wanted = {t.measure.key: t.measure for t in targets}
    for t in from_slos(model.slos.slos, "specs")[0]:
        wanted.setdefault(t.measure.key, t.measure)
    for a in signal_alerts(model):
        signal = model.signal(a.spec.signal)
        if signal.kind == "quantile":
            m = for_histogram(signal.metric, a.spec.quantile)
            if m is not None:
                wanted.setdefault(m.key, m)
    return list(wanted.values())


def _conditions(goodput) -> list[bench.Condition] | None:
    """Per-request limits of a good token: each goodput latency SLO's threshold (a request a bench
    file can time: first token or end to end); None when one is on another histogram."""
    out = []
    for slo in goodput:
        histogram = getattr(slo.sli, "histogram", None)
        if histogram is None:
            continue  # availability: the request succeeded, which every good token needs anyway
        metric = next((k for k, v in HISTOGRAMS.items() if v == histogram), None)
        if metric not in ("ttft", "e2el"):
            return None
        out.append(bench.Condition(metric, float(slo.sli.threshold)))
    return out


def _range(args) -> tuple[float, float, float | None, list[float]]:
    start, sep, end = (args.range or "").partition("..")
    if not sep:
        raise CalibrateError("--prometheus needs --range START..END (the load test's time range)")
    try:
        a, z = parse_time(start), parse_time(end)
        edges = [parse_time(t) for t in args.steps.split(",")] if args.steps else []
    except ServewatchError:
        raise CalibrateError(
            f"--range {args.range!r} / --steps {args.steps or ''!r}: want times as RFC 3339 "
            "(2026-11-30T12:00:00Z), Unix seconds or -30m (ago)"
        ) from None
    if z <= a:
        raise CalibrateError(f"--range {args.range}: the end is not after the start")
    if bool(args.step_every) == bool(args.steps):
        raise CalibrateError("--range needs either --step-every DURATION or --steps T,T,... (not both)")
    if any(not a < t < z for t in edges):
        raise CalibrateError(f"--steps: every boundary must lie inside --range {args.range}")
    every = seconds(args.step_every) if args.step_every else None
    return a, z, every, edges


def cmd_calibrate(args) -> int:
    from ..spec.loader import load
    from ..validation import validate

    if not args.bench and not args.prometheus:
        raise CalibrateError("give --bench FILE... and/or --prometheus URL --range START..END")
    spec = load(Path(args.specs))
    model = validate(spec).model
    targets = [parse(t) for t in args.target]
    notes = []
    if not targets:
        targets, skipped = from_slos(spec.slos, f"{args.specs}/slos.yaml")
        notes += skipped
        if not targets:
            raise CalibrateError("no targets: give --target MEASURE=LIMIT or SLOs in specs/slos.yaml")
    needed = _measures(model, targets)
    goodput = [slo for slo in spec.slos.values() if slo.goodput]
    sweeps = []
    if args.bench:
        steps = [s for f in args.bench for s in bench.read(Path(f), needed, _conditions(goodput))]
        check_steps("bench", steps, targets, args.min_requests)
        sweeps.append(sweep("bench", steps, targets))
    if args.prometheus:
        a, z, every, edges = _range(args)
        try:
            with connect(args) as client:
                hist = History(client, model, client.shown)
                steps = [hist.step(k, r, needed, goodput) for k, r in enumerate(split(a, z, every, edges))]
        except PromApiError as exc:
            print(f"servewatch: error: {exc}; nothing was written", file=sys.stderr)
            return 1
        check_steps("prometheus", steps, targets, args.min_requests)
        sweeps.append(sweep("prometheus", steps, targets))
    result = Result(targets, sweeps, combine(sweeps), notes=notes + mismatched_loads(sweeps))
    result.proposals = Proposer(model, result).run()
    cost = spec.dashboards.defaults.cost
    costs = {}
    if args.gpus:
        costs = {
            sw.name: [
                None
                if s.good_tokens is None
                else cost.per_million(args.gpus, s.seconds, s.good_tokens, args.price_per_gpu_hour)
                for s in sw.steps
            ]
            for sw in sweeps
        }
    sys.stdout.write(report.text(result, costs, cost.currency))
    path = Path(args.specs) / overrides.FILE
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    new = overrides.apply(old, result.proposals)
    if new == old:
        print("\nno change to the overrides")
        return 0
    overrides.check(Path(args.specs), new)
    print()
    sys.stdout.write(overrides.diff(path, old, new))
    if args.write:
        overrides.write(path, new)
        print(f"servewatch: wrote {path}; run `servewatch generate` and `servewatch test`", file=sys.stderr)
    return 0


__all__ = ["add_cli", "ERRORS"]
