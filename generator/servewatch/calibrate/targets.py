"""The team's targets: `--target ttft_p95=1.5s` or, without any, the objectives of specs/slos.yaml."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import ServewatchError
from ..spec.slos import AvailabilitySLI, LatencySLI
from .measures import ERRORS, Measure, for_slo, parse_key

VALUE_RE = re.compile(r"(?P<n>[0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?)(?P<unit>ms|s|%)?")


class CalibrateError(ServewatchError):
    """The load test cannot support an answer, or the input is not a load test: exit 2, nothing written."""


@dataclass(frozen=True)
class Goal:
    measure: Measure
    limit: float  # seconds, or a ratio for errors
    origin: str  # "--target ttft_p95=1.5s" or "specs/slos.yaml: vllm-ttft"

    def met(self, value: float) -> bool:
        return value <= self.limit

    def shown(self) -> str:
        return f"{self.measure.key} <= {show(self.limit, self.measure.unit)}"


def show(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"  # e.g. a percentile of a step where every request failed
    if unit == "ratio":
        return f"{value * 100:.3g}%"
    return f"{value * 1000:.3g}ms" if value < 1 else f"{value:.3g}s"


def parse(text: str) -> Goal:
    name, eq, raw = text.partition("=")
    try:
        measure = parse_key(name.strip())
    except ValueError as exc:
        raise CalibrateError(f"--target {text!r}: {exc}") from None
    m = VALUE_RE.fullmatch(raw.strip()) if eq else None
    unit = m and m["unit"]
    latency = measure.metric != ERRORS
    if not m or (latency and unit == "%") or (not latency and unit in ("s", "ms")):
        want = "a duration like 1.5s or 80ms" if latency else "a share like 1% or 0.01"
        raise CalibrateError(f"--target {text!r}: want {name.strip()}={want}")
    value = float(m["n"]) / (1000 if unit == "ms" else 100 if unit == "%" else 1)
    if not latency and not 0 <= value < 1:
        raise CalibrateError(f"--target {text!r}: an error share is between 0% and 100%")
    return Goal(measure, value, f"--target {text}")


def from_slos(
    slos: dict, where: str, served: str | None = None, client_side=None
) -> tuple[list[Goal], list[str]]:
    """Targets the SLOs state: a latency SLO's objective is a percentile under its threshold
    (99% within 2.5 s = ttft_p99 <= 2.5s); an availability SLO's budget is the error share.
    With `served` (--model), what the SLO promises that model: its per-model objective and threshold,
    and none of an SLO whose scope leaves the model out. A target is on the SLI's side
    (config.client_side: where a gateway measures it), under a key naming it where a plain target
    reads the other side (`errors@instance`). Also the SLOs a load test cannot check."""
    out, skipped = [], []
    for name, slo in sorted(slos.items()):
        if served and not slo.covers_model(served):
            skipped.append(f"SLO {name}: its scope ({slo.scope.text}) leaves out model {served!r}")
            continue
        origin = f"{where}: {name}" + (f" (per_model {served!r})" if served in slo.per_model else "")
        objective = slo.objective_of(served)
        measure = for_slo(slo.sli, objective, client_side)
        if isinstance(slo.sli, LatencySLI):
            if measure is None:
                skipped.append(f"SLO {name}: {slo.sli.histogram} is not measured by a load test")
                continue
            out.append(Goal(measure, float(slo.threshold_of(served)), origin))
        elif isinstance(slo.sli, AvailabilitySLI):
            out.append(Goal(measure, round(1 - objective, 9), origin))
    return out, skipped
