"""A ready-made scenario: its series, its step grid and its documented ground truth."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from .openmetrics import to_openmetrics
from .series import Series
from .truth import one, select


@dataclass(frozen=True)
class Scenario:
    """Series on a grid of ``steps`` samples ``step`` seconds apart, plus the facts tests assert.

    Iterating a Scenario yields its series, so it can be passed wherever a series list is expected.
    ``eval_step`` is the step an on-call query should be evaluated at (``time_at(start, eval_step)``);
    ``incident_step`` is the first step of the incident (None when healthy); ``truth`` holds the
    identities and exact values described in the builder's docstring.
    """

    name: str
    series: tuple[Series, ...]
    steps: int
    step: float
    eval_step: int
    truth: Mapping[str, Any] = field(default_factory=dict)
    incident_step: int | None = None

    def __iter__(self) -> Iterator[Series]:
        return iter(self.series)

    def __len__(self) -> int:
        return len(self.series)

    def time_at(self, start: float, i: int) -> float:
        """Unix time of step ``i`` when the scenario is written with ``start``."""
        return start + i * self.step

    def start_for(self, last_sample_time: float) -> float:
        """The ``start`` that puts the last step at ``last_sample_time``."""
        return last_sample_time - (self.steps - 1) * self.step

    def openmetrics(self, start: float) -> str:
        return to_openmetrics(self.series, start, self.step)

    def select(self, name: str | None = None, **labels: str | None) -> list[Series]:
        return select(self.series, name, **labels)

    def one(self, name: str | None = None, **labels: str | None) -> Series:
        return one(self.series, name, **labels)


__all__ = ["Scenario"]
