"""`servewatch investigate`: run an alert's runbook against a Prometheus and print a triage report."""

from __future__ import annotations

import os
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from ..errors import ServewatchError
from ..spec.schema import seconds
from ..promapi import ENV_URL
from .client import ENV_PASSWORD, ENV_TOKEN, ENV_USER, Auth, Client, InvestigateError
from .report import FORMATS

DESCRIPTION = f"""Run an alert's runbook steps against a Prometheus and judge each one (healthy / suspicious /
unhealthy by the spec's thresholds). Without ALERTNAME, triage every firing alert the Prometheus reports.
With ALERTNAME, every step is narrowed to the worst series where the alert's condition holds; where it
holds nowhere, no cause is named.

Credentials come from the environment only: {ENV_TOKEN} (bearer token), or {ENV_USER} and
{ENV_PASSWORD} (basic auth). They are never printed."""


def add_connection_args(p) -> None:
    """Where and how to reach Prometheus: shared by every command that queries it."""
    p.add_argument(
        "--prometheus",
        metavar="URL",
        default=os.environ.get(ENV_URL),
        help=f"Prometheus base URL (default: ${ENV_URL})",
    )
    p.add_argument(
        "--at", metavar="TIME", help="evaluate at this time: RFC 3339, Unix seconds, 'now' or '-30m' (ago)"
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per-request timeout (default: 30)"
    )
    p.add_argument("--ca-file", metavar="PEM", help="CA bundle to verify the server's TLS certificate")
    p.add_argument(
        "--insecure-skip-verify",
        action="store_true",
        help="do not verify TLS certificates (test servers only)",
    )


def connect(args) -> Client:
    """The Prometheus client for the options add_connection_args defined (credentials from the env)."""
    return Client(
        args.prometheus,
        Auth.from_env(),
        timeout=args.timeout,
        ca_file=args.ca_file,
        insecure=args.insecure_skip_verify,
    )


def add_cli(sub) -> None:
    p = sub.add_parser(
        "investigate",
        help="run an alert's runbook queries against a Prometheus and print a verdict",
        description=DESCRIPTION,
        epilog="Exit status: 0 investigated (whatever the verdict); 1 Prometheus could not be asked or a "
        "query failed; 2 the specs are invalid or the command was misused.",
        formatter_class=_Formatter,
    )
    p.add_argument(
        "alert", nargs="?", metavar="ALERTNAME", help="alert to investigate (default: every firing alert)"
    )
    add_connection_args(p)
    p.add_argument(
        "--label",
        "-l",
        action="append",
        default=[],
        metavar="K=V",
        help="filter every query by this label (also K!=V, K=~RE, K!~RE); repeatable",
    )
    p.add_argument("--format", choices=sorted(FORMATS), default="text", help="report format (default: text)")
    p.add_argument("--specs", default="specs", help="specs folder (default: specs)")
    p.add_argument("--top", type=int, default=5, metavar="N", help="series shown per step (default: 5)")
    p.add_argument(
        "--max-alerts", type=int, default=20, metavar="N", help="firing alerts triaged at most (default: 20)"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress display on stderr")
    p.set_defaults(func=cmd_investigate)


class _Formatter(__import__("argparse").RawDescriptionHelpFormatter):
    pass


def parse_time(text: str | None, now: float | None = None, what: str = "--at") -> float | None:
    """RFC 3339 / ISO 8601, Unix seconds, 'now', or '-<duration>' (that long ago); `what` names the
    option or field in the error."""
    if text is None:
        return None
    now = time.time() if now is None else now
    t = text.strip()
    if t == "now":
        return now
    if re.fullmatch(r"-([0-9]+(ms|s|m|h|d|w))+", t):
        return now - seconds(t[1:])
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", t):
        return float(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise InvestigateError(
            f"{what} {text!r} is not a time: use RFC 3339 (2026-07-01T12:00:00Z), Unix seconds, "
            "'now' or '-30m'"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


class Progress:
    """One self-updating line on a terminal; terse lines otherwise; nothing with --quiet."""

    def __init__(self, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = 0
        self._last_alert = None

    def __call__(self, i: int, n: int, alert: str, title: str) -> None:
        if self.quiet:
            return
        if self.tty:
            line = f"investigating {alert}: [{i}/{n}] {title}"[:110]
            self.stream.write("\r" + line.ljust(self.width))
            self.width = max(self.width, len(line))
            self.stream.flush()
        elif alert != self._last_alert:
            self.stream.write(f"servewatch: investigating {alert} ({n} queries)\n")
            self.stream.flush()
        self._last_alert = alert

    def done(self) -> None:
        if self.tty and self.width and not self.quiet:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _fail(message: str) -> int:
    print(f"servewatch: error: {message}", file=sys.stderr)
    return 1


def cmd_investigate(args) -> int:
    from ..runbooks import book
    from ..runbooks.queries import parse_filter
    from .runner import run

    from ..spec.loader import load
    from ..validation import validate

    if not args.prometheus:
        return _fail(f"--prometheus URL is required (or set {ENV_URL})")
    try:
        filters = tuple(parse_filter(x) for x in args.label)
    except ValueError as exc:
        return _fail(str(exc))
    progress = Progress(quiet=args.quiet)
    try:
        at = parse_time(args.at)
        model = validate(load(Path(args.specs))).model
        pages = {p.name: p for p in book.pages(model)}
        if args.alert and args.alert not in pages:
            known = ", ".join(sorted(pages))
            return _fail(f"no enabled alert named {args.alert!r} in {args.specs} (known: {known})")
        with connect(args) as client:
            notes: list[str] = []
            invs = []
            if args.alert:
                invs.append(run(model, pages[args.alert], client, filters=filters, at=at, progress=progress))
            else:
                firing, source = client.firing_alerts(at)
                when = "now" if at is None else "at the given time"
                todo, unknown = _select(firing, pages, filters)
                if not firing:
                    notes.append(f"No alerts are firing {when} (from {source}).")
                if unknown:
                    notes.append(
                        "Firing but without a servewatch runbook: " + ", ".join(sorted(unknown)) + "."
                    )
                if len(todo) > args.max_alerts:
                    notes.append(
                        f"{len(todo)} firing alerts; triaging the first {args.max_alerts} (--max-alerts)."
                    )
                    todo = todo[: args.max_alerts]
                at = time.time() if at is None else at
                for name, labels in todo:
                    invs.append(
                        run(
                            model,
                            pages[name],
                            client,
                            filters=filters,
                            alert_labels=labels,
                            at=at,
                            progress=progress,
                            source="firing alert",
                        )
                    )
    except ServewatchError as exc:
        progress.done()
        if isinstance(exc, InvestigateError):
            return _fail(str(exc))
        raise
    progress.done()
    out = FORMATS[args.format](model, invs, client.shown, max(args.top, 0), notes)
    sys.stdout.write(out)
    sys.stdout.flush()
    failed = [(inv.alert.alert, r) for inv in invs for r in inv.errors]
    if failed:
        first_alert, first = failed[0]
        return _fail(
            f"{len(failed)} quer{'y' if len(failed) == 1 else 'ies'} failed; first: {first_alert} step "
            f"{first.step.id}: {first.error}"
        )
    return 0


def _select(firing: list[dict], pages: dict, filters) -> tuple[list[tuple[str, dict]], set[str]]:
    """Firing alerts we have runbooks for (deduplicated, stable order) and the names we do not know."""
    todo, unknown, seen = [], set(), set()
    for a in firing:
        labels = dict(a["labels"])
        name = labels.pop("alertname", None)
        if name is None:
            continue
        if name not in pages:
            unknown.add(name)
            continue
        if not _matches(labels, filters):
            continue
        key = (name, tuple(sorted(labels.items())))
        if key not in seen:
            seen.add(key)
            todo.append((name, labels))
    todo.sort(key=lambda x: (x[0], sorted(x[1].items())))
    return todo, unknown


def _matches(labels: dict, filters) -> bool:
    """Whether a firing alert fits the --label filters on the labels it has (others do not exclude it)."""
    for label, op, value in filters:
        if label not in labels:
            continue
        v = labels[label]
        if op == "=" and v != value or op == "!=" and v == value:
            return False
        if op == "=~" and not re.fullmatch(value, v) or op == "!~" and re.fullmatch(value, v):
            return False
    return True
