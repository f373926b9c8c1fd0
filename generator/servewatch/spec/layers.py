"""A team's specs laid over the default specs of the installed servewatch.

A specs folder with `extends: servewatch` in one of its files holds only what the team changed;
everything else comes from the defaults shipped with the servewatch that runs (servewatch/defaults,
the same files as this project's specs/), so a new release's alerts, scenarios and runbooks reach
the team on upgrade. What the team writes wins:

- config, dashboards and alertmanager settings: field by field, nested ones too (a team that sets
  `config.cluster_label` keeps every other default setting);
- signals, groups, scenarios, runbooks, SLOs and overrides: by name; a group of the team's replaces
  the default group of that name, and an alert of the team's replaces the default alert of that name
  wherever it sat. A default scenario of a replaced alert still runs against the team's alert;
  disable it in overrides or replace it by name.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ..errors import SpecError
from .alertmanager import Alertmanager
from .dashboards import Settings
from .schema import Config, Overrides


def defaults_dir() -> Path:
    """The default specs of the installed servewatch."""
    return Path(str(resources.files("servewatch") / "defaults"))


def deep_merge(base: dict, top: dict) -> dict:
    """`base` with every key `top` gives replaced; nested mappings are merged key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _section(model, base, written: dict | None, where, kind: str):
    """A settings section: the default's values with the team's written ones over them, validated
    again as a whole (a cross-field rule may now fail: it is reported at the team's section)."""
    if not written:
        return base
    try:
        return model.model_validate(deep_merge(base.model_dump(by_alias=True), written))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise SpecError(
            f"{kind}{'.' + field if field else ''}: {err['msg']} "
            f"(with the default specs' other {kind} settings)",
            where,
        ) from None


def overlay(base, top):
    """The Spec `top` (the team's) laid over `base` (the defaults)."""
    alerts = {a.alert for g in top.groups for a in g.alerts}
    named = {g.name for g in top.groups}
    kept_groups = tuple(
        g.model_copy(update={"alerts": tuple(a for a in g.alerts if a.alert not in alerts)})
        for g in base.groups
        if g.name not in named
    )
    scenario_names = {s.name for s in top.scenarios}
    written = top.written
    board_at = top.locate("dashboard", next(iter(written.get("dashboards") or {"": 0})))
    am_at = top.locate("alertmanager", "alertmanager")
    overrides = Overrides(
        **{
            part: {**getattr(base.overrides, part), **getattr(top.overrides, part)}
            for part in ("alerts", "groups", "scenarios")
        }
    )
    return replace(
        top,
        config=_section(Config, base.config, written.get("config"), top.locate("config", "config"), "config"),
        signals={**base.signals, **top.signals},
        groups=kept_groups + top.groups,
        overrides=overrides,
        scenarios=tuple(s for s in base.scenarios if s.name not in scenario_names) + top.scenarios,
        dashboards=_section(Settings, base.dashboards, written.get("dashboards"), board_at, "dashboards"),
        runbooks={**base.runbooks, **top.runbooks},
        slos={**base.slos, **top.slos},
        alertmanager=_section(
            Alertmanager, base.alertmanager, written.get("alertmanager"), am_at, "alertmanager"
        ),
        files=base.files + top.files,
        sources={**base.sources, **top.sources},
    )
