"""Where deployment tools put a vLLM series' role and track (deployment.yaml beside this module)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from .. import yamlio


@dataclass(frozen=True)
class LabelSource:
    label: str
    source: str  # the tool and how its label reaches Prometheus
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()  # role -> the label values meaning it

    def role_of(self, value: str) -> str | None:
        return next((role for role, values in self.values if value in values), None)


@dataclass(frozen=True)
class DeploymentLabels:
    roles: tuple[LabelSource, ...]
    tracks: tuple[LabelSource, ...]
    stable_values: tuple[str, ...]


@cache
def load() -> DeploymentLabels:
    raw = yamlio.load(resources.files(__package__).joinpath("deployment.yaml").read_text())

    def sources(key: str) -> tuple[LabelSource, ...]:
        return tuple(
            LabelSource(
                s["label"], s["source"], tuple((r, tuple(v)) for r, v in (s.get("values") or {}).items())
            )
            for s in raw[key]
        )

    return DeploymentLabels(sources("roles"), sources("tracks"), tuple(raw["stable_values"]))
