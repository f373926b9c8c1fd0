"""`servewatch calibrate`: the command line (run.py does the work, imported only when it runs)."""

from __future__ import annotations

import argparse

from ..investigate.cli import ENV_URL

DESCRIPTION = """Read a load test (vllm bench serve result files, one per load step, and/or the run's
Prometheus history), find the highest load step that met every target (the sustainable load) and
propose a threshold and a `for` for every alert, each with its evidence and the rule it followed,
as a diff of specs/overrides.yaml; for each SLO, a latency threshold (a bucket bound, written where
the SLO is defined) and whether its objective holds at that load and whether the data can show it
(--write applies the diff, keeping your comments).

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
    p.add_argument(
        "--model",
        metavar="NAME",
        help="the served model (model_name): narrows a range holding several; SLO thresholds go to "
        "its per_model entry",
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
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
    p.add_argument(
        "--write",
        action="store_true",
        help="apply the proposals to specs/overrides.yaml (SLO thresholds: specs/slos.yaml)",
    )
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from .run import calibrate

    return calibrate(args)
