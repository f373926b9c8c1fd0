"""`servewatch backtest`: the generated alerts over a range of a Prometheus's history."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..promapi import ENV_URL, Auth, Client, PromApiError
from ..spec.schema import seconds
from . import report
from .evaluate import BacktestError, QueryBounds

if TYPE_CHECKING:  # the back-test itself is imported when it runs, not for --help
    from . import rules

DEFAULT_INTERVAL = "1m"  # Prometheus's own default global evaluation_interval

DESCRIPTION = """Evaluate every generated alert over a range of history, at its group's interval, with `for`
and `keep_firing_for` applied as Prometheus applies them, and report its episodes, time firing and
pages per week. Records the history lacks are evaluated in place (written out into the query).
Credentials come from the environment only, as for `servewatch investigate`."""


def add_cli(sub) -> None:
    p = sub.add_parser(
        "backtest",
        help="evaluate the generated alerts over a range of a Prometheus's history",
        description=DESCRIPTION,
        epilog="Exit status: 0 back-tested (whatever the alerts did); 2 the specs, the range or the "
        "incidents file is invalid, or Prometheus could not be asked or refused a query (the message says "
        "which and what to change).",
    )
    p.add_argument(
        "--prometheus", metavar="URL", default=os.environ.get(ENV_URL), help=f"(default: ${ENV_URL})"
    )
    p.add_argument("--range", required=True, metavar="RANGE", help="7d (ending now) or START..END")
    p.add_argument("--specs", default="specs", help="specs folder (default: specs)")
    p.add_argument("--compare", metavar="SPECS_DIR", help="another spec set, back-tested side by side")
    p.add_argument(
        "--incidents", metavar="FILE", help="known incidents: whether and how fast each was caught"
    )
    p.add_argument("--format", choices=sorted(report.FORMATS), default="text")
    p.add_argument("--html", metavar="DIR", help="also write DIR/index.html, one plot per alert")
    p.add_argument(
        "--evaluation-interval",
        metavar="DURATION",
        help="interval of groups without their own (default: the server's global one, else 1m)",
    )
    p.add_argument("--chunk", default="1d", metavar="DURATION", help="longest range per query (default: 1d)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per query (default: 120)")
    p.add_argument(
        "--evaluate-records",
        action="store_true",
        help="evaluate every record in place, even those the history holds",
    )
    p.add_argument("--ca-file", metavar="PEM", help="CA bundle to verify the server's TLS certificate")
    p.add_argument(
        "--insecure-skip-verify", action="store_true", help="do not verify TLS (test servers only)"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_backtest)


def _duration(text: str, flag: str) -> float:
    try:
        s = seconds(text)
    except (ValueError, TypeError, KeyError):
        s = 0
    if s <= 0:
        raise BacktestError(f"{flag} {text!r} is not a positive duration such as 30s, 1m or 6h")
    return s


def server_interval(client: Client) -> float | None:
    """The server's global evaluation_interval, when its config can be read."""
    try:
        cfg = yaml.safe_load(client.get("/api/v1/status/config", what="config request")["yaml"]) or {}
        return seconds(str((cfg.get("global") or {}).get("evaluation_interval") or "")) or None
    except (PromApiError, yaml.YAMLError, ValueError, KeyError, TypeError):
        return None


def cmd_backtest(args) -> int:
    from . import html, incidents, rules, runner, timespec

    if not args.prometheus:
        print(f"servewatch: error: --prometheus URL is required (or set {ENV_URL})", file=sys.stderr)
        return 2
    now = time.time()
    start, end = timespec.span(args.range, now)
    bounds = QueryBounds(chunk_s=_duration(args.chunk, "--chunk"))
    expected = incidents.load(Path(args.incidents), now) if args.incidents else []
    say = (lambda line: None) if args.quiet else (lambda line: print(f"servewatch: {line}", file=sys.stderr))
    client = Client(
        args.prometheus,
        Auth.from_env(),
        timeout=args.timeout,
        ca_file=args.ca_file,
        insecure=args.insecure_skip_verify,
    )
    with client:
        interval = (
            _duration(args.evaluation_interval, "--evaluation-interval")
            if args.evaluation_interval
            else server_interval(client) or seconds(DEFAULT_INTERVAL)
        )
        sets = [(args.specs, rules.from_specs(Path(args.specs), interval))]
        if args.compare:
            sets.append((args.compare, rules.from_specs(Path(args.compare), interval)))
        history = runner.BacktestHistory(
            client, start, end, {k: v for _, rs in sets for k, v in rs.records.items()}
        )
        runs = []
        for name, ruleset in sets:
            differs = _differs(ruleset, sets[0][1]) if runs else set()
            result = runner.run(
                client,
                ruleset,
                start,
                end,
                name=name,
                bounds=bounds,
                history=history,
                evaluate_records=args.evaluate_records,
                differs=differs,
                plots=bool(args.html),
                progress=say,
            )
            runs.append(report.BacktestRun(result, incidents.judge(expected, result)))
    sys.stdout.write(report.FORMATS[args.format](runs))
    if args.html:
        say(f"wrote {html.write(Path(args.html), runs)}")
    return 0


def _differs(ruleset: rules.RuleSet, deployed: rules.RuleSet) -> set[str]:
    """Records the compared set defines otherwise than the first one: the history's samples of them
    came from the first set's rules, so they are evaluated in place."""
    differs = {name for name, recs in ruleset.records.items() if deployed.records.get(name) != recs}
    grew = True
    while grew:  # and the records that read one of those
        before = len(differs)
        differs |= {
            name
            for name, recs in ruleset.records.items()
            if any(re.search(rf"(?<![\w:]){re.escape(d)}(?![\w:])", r.expr) for r in recs for d in differs)
        }
        grew = len(differs) > before
    return differs
