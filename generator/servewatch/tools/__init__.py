"""The real binaries servewatch runs and tests against: locate them, check their versions, install them.

One table (table.py) lists every tool: promtool and prometheus 3.5 (what `servewatch test` and the local
Prometheus need), Alertmanager with amtool, VictoriaMetrics with vmagent, vmalert and vmalert-tool, and
kustomize. Each is looked up in the same order ($ENV_VAR, the cache, PATH; locate.py) and installed the
same way, from its Debian package in the sid suite into a git-ignored cache (debian.py, cache.py), only
when something asks for it. The command line is in cli.py.
"""

from .cache import cache_dir
from .debian import install
from .errors import ToolError, ToolNotFound
from .locate import Found, ensure, find, locate, run
from .table import PROMETHEUS_PAIR, TOOLS, Tool, get

__all__ = [
    "PROMETHEUS_PAIR",
    "TOOLS",
    "Found",
    "Tool",
    "ToolError",
    "ToolNotFound",
    "cache_dir",
    "ensure",
    "find",
    "get",
    "install",
    "locate",
    "run",
]
