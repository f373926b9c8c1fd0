"""`servewatch tools` (every tool in the table) and `servewatch promtool` (the promtool/prometheus pair)."""

from __future__ import annotations

import argparse
import sys

from .cache import cache_dir
from .debian import install
from .errors import ToolError
from .locate import locate
from .table import PROMETHEUS_PAIR, TOOLS, get


def _fail(e: ToolError) -> int:
    print(f"servewatch: error: {e}", file=sys.stderr)
    return 1


def _names(args) -> list[str]:
    return list(args.names or args.default_names)


def cmd_where(args) -> int:
    rc = 0
    width = max(map(len, _names(args)))
    for name in _names(args):
        try:
            found = locate(name)
            print(f"{name:<{width}}  {found.path}  {found.shown_version}  ({found.source})")
        except ToolError as e:
            rc = _fail(e)
    return rc


def cmd_version(args) -> int:
    rc = 0
    for name in _names(args):
        try:
            print(f"{name} {locate(name).shown_version}")
        except ToolError as e:
            rc = _fail(e)
    return rc


def cmd_install(args) -> int:
    names = _names(args)
    try:
        paths = install(names, force=args.force)
        width = max(map(len, names))
        for name in names:
            print(f"{name:<{width}}  {paths[name]}  {locate(name).shown_version}")
    except ToolError as e:
        return _fail(e)
    return 0


def _tool_name(text: str) -> str:
    try:
        return get(text).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


EXITS = (
    "Exit status: 0 done; 1 a tool is missing, of the wrong version, or could not be installed; "
    "2 the command was misused."
)


def _add_commands(parser: argparse.ArgumentParser, default_names: tuple[str, ...], names: bool) -> None:
    parser.set_defaults(default_names=default_names, names=[])
    sub = parser.add_subparsers(dest="tools_command", metavar="{where,version,install}", required=True)
    if names:
        which, versions, fetched = "binary of each tool", "the tools' versions", "the tools (default: all)"
    else:
        which, versions = "promtool/prometheus", "the promtool/prometheus versions"
        fetched = f"promtool/prometheus {get(default_names[0]).requires}"
    commands = (
        ("where", f"show which {which} would be used, and why", cmd_where),
        ("version", f"print {versions}", cmd_version),
        ("install", f"fetch {fetched} from Debian into the cache", cmd_install),
    )
    for command, text, func in commands:
        p = sub.add_parser(command, help=text, epilog=EXITS)
        if names:
            p.add_argument("names", nargs="*", type=_tool_name, metavar="NAME", help=", ".join(TOOLS))
        if command == "install":
            p.add_argument("--force", action="store_true", help="reinstall even if the cache is already good")
        p.set_defaults(func=func)


def add_cli(subparsers) -> None:
    """Register `servewatch promtool ...` and `servewatch tools ...` on an argparse subparsers object."""
    pair = f"{'/'.join(PROMETHEUS_PAIR)} {get(PROMETHEUS_PAIR[0]).requires}"
    _add_commands(
        subparsers.add_parser(
            "promtool",
            help=f"locate or install {pair}",
            description=f"Locate or install {pair}. Lookup order: $PROMTOOL/$PROMETHEUS, the cache "
            f"({cache_dir()}), PATH.",
        ),
        PROMETHEUS_PAIR,
        names=False,
    )
    _add_commands(
        subparsers.add_parser(
            "tools",
            help="locate or install the real binaries (Prometheus, Alertmanager, VictoriaMetrics, kustomize)",
            description="Locate or install the real binaries servewatch and its tests use. Lookup order: "
            f"the tool's variable ($ALERTMANAGER, $VICTORIA_METRICS, ...), the cache ({cache_dir()}), PATH.",
        ),
        tuple(TOOLS),
        names=True,
    )
