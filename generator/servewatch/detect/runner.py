"""Run every probe against one Prometheus and fold the outcomes into one Detection.

The Detection holds the current config block, the suggested one, the findings and the counts; the
exit code says whether they match: 0 they do, 3 a setting differs, 4 a source had no series at all, so
its settings could not be checked (1 is left for a Prometheus that could not be asked, 2 for invalid
specs). Nothing found is never a match: a CI gate must not pass on an empty or wrong Prometheus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import catalog as catalog_mod

if TYPE_CHECKING:  # the probes and the client are imported when a detection runs (cli.py's --help not)
    from ..investigate.client import Client
    from .probes import DetectFinding

EXIT_MATCH, EXIT_ERROR, EXIT_DIFFERS, EXIT_NOTHING_FOUND = 0, 1, 3, 4
SOURCES = ("dcgm", "vllm")


@dataclass
class Detection:
    prometheus: str
    at: float | None
    current: dict
    suggested: dict
    counts: dict
    findings: list[DetectFinding] = field(default_factory=list)
    not_found: tuple[str, ...] = ()  # sources without a single series: their settings are unchecked

    @property
    def differences(self) -> list[dict]:
        out = []
        for key, cur, sug in leaves(self.current, self.suggested):
            if cur != sug:
                out.append({"field": key, "current": cur, "suggested": sug})
        return out

    @property
    def matches(self) -> bool:
        """The config is confirmed: nothing differs and every source was seen."""
        return not self.differences and not self.not_found

    @property
    def exit_code(self) -> int:
        if self.differences:
            return EXIT_DIFFERS
        return EXIT_NOTHING_FOUND if self.not_found else EXIT_MATCH

    def as_dict(self) -> dict:
        return json.loads(
            json.dumps(
                {  # plain, unshared values: no YAML anchors
                    "prometheus": self.prometheus,
                    "at": self.at,
                    "matches": self.matches,
                    "not_found": list(self.not_found),
                    "differences": self.differences,
                    "findings": [f.__dict__ for f in sorted(self.findings, key=finding_order)],
                    "counts": sorted_dict(self.counts),
                    "config": sorted_dict(self.suggested),
                }
            )
        )


def finding_order(f: DetectFinding) -> tuple:
    return ({"differs": 0, "warning": 1, "info": 2}.get(f.level, 3), f.topic, f.message)


def sorted_dict(d):
    if isinstance(d, dict):
        return {k: sorted_dict(d[k]) for k in sorted(d)}
    return d


def leaves(cur: dict, sug: dict, prefix: str = ""):
    """(dotted key, current value, suggested value) for every setting of the two config blocks."""
    for key in sorted(set(cur) | set(sug)):
        c, s = cur.get(key), sug.get(key)
        if isinstance(c, dict) and isinstance(s, dict):
            yield from leaves(c, s, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", c, s


def current_config(config) -> dict:
    """The settings detect can suggest, as the specs configure them."""
    return {
        "cluster_label": config.cluster_label,
        "dcgm": {
            "fb_units": config.dcgm.fb_units,
            "hostname_label": config.dcgm.hostname_label,
            "workload_labels": config.dcgm.workload_labels,
        },
        "histograms": config.histograms,
        "vllm_profile": config.vllm_profile,
        "identity": {"vllm": list(config.identity.vllm), "model": list(config.identity.model)},
        "role": config.role.model_dump(mode="json") if config.role else None,
        "track": config.track.model_dump(mode="json") if config.track else None,
        "client_side": config.client_side.model_dump(mode="json") if config.client_side else None,
        "targets": {"dcgm": config.targets["dcgm"], "vllm": config.targets["vllm"]},
    }


def _merge(into: dict, more: dict) -> None:
    for key, value in more.items():
        if isinstance(value, dict):
            _merge(into.setdefault(key, {}), value)
        else:
            into[key] = value


def _suggest(sug: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    node = sug
    for key in path:
        node = node[key]
    node[last] = value


def detect(client: Client, config, at: float | None = None, slos: dict | None = None) -> Detection:
    from .probes import PROBES, Ask, DetectFinding, ProbeContext

    ctx = ProbeContext(Ask(client, at), config, catalog_mod.load(), current_config(config), slos)
    sug = json.loads(json.dumps(ctx.current))  # deep copy
    counts: dict = {"dcgm": {}, "vllm": {}}
    found: list[DetectFinding] = []
    for probe in PROBES:
        if probe.needs_fb_series and not ctx.fb_series:
            continue
        outcome = probe.run(ctx)
        found += outcome.findings
        _merge(counts, outcome.counts)
        for key, value in outcome.suggested.items():
            _suggest(sug, key, value)
    for key, cur, new in leaves(ctx.current, sug):
        if cur != new and not any(f.topic == key and f.level == "differs" for f in found):
            found.append(DetectFinding(key, "differs", f"configured {cur!r}, detected {new!r}"))
    seen = {"dcgm": ctx.fb_series, "vllm": ctx.vllm_series}
    not_found = tuple(src for src in SOURCES if not seen[src])
    return Detection(client.shown, at, ctx.current, sug, counts, found, not_found)
