"""Which generated files are which: found by the paths the renderers give them."""

from __future__ import annotations

from pathlib import PurePosixPath


from ... import yamlio
from ..rules import GENERATED

__all__ = ["GENERATED", "Generated", "relative"]
RULES_K8S = "rules/kubernetes"
DASHBOARDS_K8S = "dashboards/kubernetes"


class Generated:
    """A view of {path: text} by kind of file. Paths are POSIX and relative to the output folder."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self._parsed: dict[str, object] = {}

    def _in(self, folder: str, suffix: str) -> list[str]:
        return sorted(p for p in self.files if str(PurePosixPath(p).parent) == folder and p.endswith(suffix))

    @property
    def rule_files(self) -> list[str]:
        """Plain Prometheus rule files, one per family."""
        return self._in("rules", ".rules.yaml")

    @property
    def dashboards(self) -> list[str]:
        """Classic dashboard JSON, one per dashboard."""
        return self._in("dashboards", ".json")

    @property
    def prometheus_rules(self) -> list[str]:
        return self._in(RULES_K8S, ".prometheusrule.yaml")

    @property
    def configmaps(self) -> list[str]:
        return self._in(DASHBOARDS_K8S, ".configmap.yaml")

    @property
    def grafana_dashboards(self) -> list[str]:
        return self._in(DASHBOARDS_K8S, ".grafanadashboard.yaml")

    def data(self, path: str):
        """A generated YAML file read back (once), to take what another tool needs from it."""
        if path not in self._parsed:
            self._parsed[path] = yamlio.load(self.files[path])
        return self._parsed[path]


def relative(path: str, folder: str) -> str:
    return str(PurePosixPath(path).relative_to(folder))
