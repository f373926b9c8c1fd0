"""`servewatch detect`: the command line. Parses arguments, asks, prints, returns the exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..investigate.cli import ENV_URL, add_connection_args, connect, parse_time
from ..investigate.client import InvestigateError
from .report import FORMATS
from .runner import EXIT_ERROR, detect

DESCRIPTION = f"""Ask a Prometheus which layout the exporters really use (dcgm-exporter FB names and units,
Hostname/hostname, exported_pod/pod, MIG, duplicate scrapes, target selectors, vLLM labels and removed
vLLM metric names, classic or native histograms, a latency SLO's bucket missing where its histogram is
scraped) and print a suggested `config:` block with findings, compared with --specs.

Exit codes: 0 the current config matches what was detected, 3 it differs, 4 nothing was detected for
dcgm-exporter or vLLM (no series at that time and selectors: those settings were not checked), 1
Prometheus could not be asked (unreachable, refused, timed out, rejected a query), 2 the specs are
invalid.

Credentials come from the environment only (as for `servewatch investigate`); default URL: ${ENV_URL}."""


def add_cli(sub) -> None:
    p = sub.add_parser(
        "detect",
        help="detect the exporter layout a Prometheus holds and suggest a config block",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(p)
    p.add_argument("--format", choices=sorted(FORMATS), default="text", help="output format (default: text)")
    p.add_argument("--specs", default="specs", help="specs folder whose config is compared (default: specs)")
    p.set_defaults(func=cmd_detect)


def _fail(message: str) -> int:
    print(f"servewatch: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def cmd_detect(args) -> int:
    from ..spec.loader import load

    if not args.prometheus:
        return _fail(f"--prometheus URL is required (or set {ENV_URL})")
    spec = load(Path(args.specs))  # spec errors: exit 2 through cli.main
    config = spec.config
    try:
        at = parse_time(args.at)
        with connect(args) as client:
            det = detect(client, config, at, spec.slos)
    except InvestigateError as exc:
        return _fail(str(exc))
    sys.stdout.write(FORMATS[args.format](det))
    sys.stdout.flush()
    return det.exit_code
