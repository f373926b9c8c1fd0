"""Specs for a fleet whose time runs faster: what the live distributed tests generate their rules from.

servewatch_testkit.scrape_server plays a 30 s-step scenario at one step a second, with every
per-second rate as the scenario states. Rules generated from `compressed_specs(specs, out, 30)` see
that fleet as the default rules see the real one: the scrape interval, the rate window, every
alert's ``for`` and ``keep_firing_for`` and every group's interval are divided by the factor (the
config through config.yaml, the rest through overrides.yaml, as a user would tune them).
Thresholds stay: rates, ratios, quantiles and gauges have their scenario values. SLOs are left out.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import yaml

from servewatch.slo.plan import INPUTS_ALERT
from servewatch.spec.loader import load
from servewatch.spec.schema import seconds

__all__ = ["compressed_specs", "duration"]


def duration(s: float) -> str:
    """A Prometheus duration for `s` seconds, whole seconds where possible (never below 1 ms)."""
    if s >= 1 and float(s).is_integer():
        return f"{int(s)}s"
    return f"{max(1, math.ceil(s * 1000))}ms"


def compressed_specs(specs: Path, out: Path, factor: float, cluster_label: str | None = None) -> Path:
    """A copy of `specs` at `out` for time `factor` times faster, with `cluster_label` set."""
    spec = load(specs)
    shutil.copytree(specs, out)
    fast = lambda d: duration(seconds(d) / factor)  # noqa: E731

    config_path = out / "config.yaml"
    doc = yaml.safe_load(config_path.read_text())
    cfg = doc["config"]
    cfg["scrape_interval"] = fast(cfg.get("scrape_interval", spec.config.scrape_interval))
    cfg["rate_window"] = fast(cfg.get("rate_window", spec.config.rate_window))
    cfg["cluster_label"] = cluster_label
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))

    overrides_path = out / "overrides.yaml"
    doc = yaml.safe_load(overrides_path.read_text()) or {}
    ov = doc.get("overrides") or {}
    alerts, groups = ov.setdefault("alerts", {}), ov.setdefault("groups", {})
    for group in spec.groups:
        interval = spec.group_interval(group)
        if interval:
            groups.setdefault(group.name, {})["interval"] = fast(interval)
        for alert in group.alerts:
            aov = spec.overrides.alerts.get(alert.alert)
            entry = alerts.setdefault(alert.alert, {})
            entry["for"] = fast((aov.for_ if aov and aov.for_ else None) or alert.for_)
            keep = (aov.keep_firing_for if aov else None) or alert.keep_firing_for
            if keep:
                entry["keep_firing_for"] = fast(keep)
    overrides_path.write_text(yaml.safe_dump({"overrides": ov}, sort_keys=False))
    # SLO windows run to days, which a live test cannot compress into minutes without its generated
    # promtool proofs failing their own bounds: the SLOs are left out here and proven on backfilled
    # data (tests/test_slo_integration.py) and in promtool (promtool/slo.test.yaml)
    if spec.slos:
        (out / "slos.yaml").write_text("slos: {}\n")
        # the SLO groups' own alerts go with them: their burn alerts and the inputs-missing alert
        slo_alerts = {slo.alerting.alert for slo in spec.slos.values()} | {INPUTS_ALERT}
        runbooks_path = out / "runbooks.yaml"
        doc = yaml.safe_load(runbooks_path.read_text())
        doc["runbooks"] = {k: v for k, v in doc["runbooks"].items() if k not in slo_alerts}
        runbooks_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out
