"""The real binaries servewatch and its tests use, and the Debian packages that ship them.

Each tool is found the same way (``$ENV_VAR``, the cache, PATH) and installed the same way (its Debian
package from the ``sid`` suite, unpacked into the cache). The binary names and paths below are the
ones inside the packages; the Debian builds of VictoriaMetrics and kustomize do not report a version
(``-version`` prints an empty line, ``kustomize version`` prints "(devel)"), so for those the version
of the package they came from is what the cache records and checks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Requirement:
    """The versions servewatch accepts: from ``minimum`` (major, minor) up to, not including, ``below``."""

    minimum: tuple[int, int]
    below: tuple[int, int]

    def allows(self, numbers: tuple[int, int, int]) -> bool:
        return self.minimum <= numbers[:2] < self.below

    def __str__(self) -> str:
        (major, minor), below = self.minimum, self.below
        if below == (major, minor + 1):
            return f"{major}.{minor}.x"
        return f">={major}.{minor}, <{below[0]}.{below[1]}"


@dataclass(frozen=True)
class Tool:
    name: str  # what servewatch calls it, and its file name in the cache
    package: str  # the Debian package that ships it
    deb_path: str  # where the package puts it
    requires: Requirement
    version_args: tuple[str, ...]  # how the binary reports its version; () when it has no way to
    reports_version: bool = True  # False: some builds (Debian's) print no version, so none can be required
    path_names: tuple[str, ...] = ()  # names to look for on PATH (default: the tool's own name)
    reads_from: str = ""  # a system folder the Debian build reads by a fixed path (see relocate.py)

    @property
    def env_var(self) -> str:
        """The environment variable that points at a binary of the user's choice, e.g. $VMALERT_TOOL."""
        return self.name.upper().replace("-", "_")

    @property
    def names_on_path(self) -> tuple[str, ...]:
        return self.path_names or (self.name,)

    def __str__(self) -> str:
        return f"{self.name} {self.requires}"


PROMETHEUS_3_5 = Requirement((3, 5), (3, 6))
ALERTMANAGER = Requirement((0, 28), (1, 0))
VICTORIA_METRICS = Requirement((1, 100), (2, 0))
KUSTOMIZE = Requirement((5, 0), (6, 0))

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("promtool", "promtool", "usr/bin/promtool", PROMETHEUS_3_5, ("--version",)),
        Tool("prometheus", "prometheus", "usr/bin/prometheus", PROMETHEUS_3_5, ("--version",)),
        # Debian renames the server (upstream archives and most PATHs call it alertmanager) and keeps its
        # templates and UI out of the binary
        Tool(
            "alertmanager",
            "prometheus-alertmanager",
            "usr/bin/prometheus-alertmanager",
            ALERTMANAGER,
            ("--version",),
            path_names=("alertmanager", "prometheus-alertmanager"),
            reads_from="usr/share/prometheus/alertmanager",
        ),
        Tool("amtool", "prometheus-alertmanager", "usr/bin/amtool", ALERTMANAGER, ("--version",)),
        *(
            Tool(name, "victoria-metrics", f"usr/bin/{name}", VICTORIA_METRICS, args, reports_version=False)
            for name, args in (
                ("victoria-metrics", ("-version",)),
                ("vmagent", ("-version",)),
                ("vmalert", ("-version",)),
                ("vmalert-tool", ()),  # no version flag at all
            )
        ),
        Tool("kustomize", "kustomize", "usr/bin/kustomize", KUSTOMIZE, ("version",), reports_version=False),
    )
}

# The pair servewatch itself runs (`servewatch test`, the local Prometheus); `servewatch promtool` manages it.
PROMETHEUS_PAIR = ("promtool", "prometheus")


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise ValueError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None


def package_tools(package: str) -> list[Tool]:
    """Every tool the cache takes from one Debian package."""
    return [t for t in TOOLS.values() if t.package == package]
