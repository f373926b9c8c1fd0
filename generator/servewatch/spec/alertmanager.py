"""The `alertmanager:` section: how servewatch's alerts reach on-call (render/alertmanager.py).

Only names and timings live here: the receivers' integrations (pager keys, chat webhooks) are
secrets and stay in your Alertmanager configuration, under the receiver names given here.
"""

from __future__ import annotations

from pydantic import field_validator

from .fields import label_value
from .schema import Strict, _duration, _label


class Route(Strict):
    """Where one kind of notification goes and how often."""

    receiver: str
    group_wait: str = "30s"
    group_interval: str = "5m"
    repeat_interval: str = "4h"

    _d = field_validator("group_wait", "group_interval", "repeat_interval")(
        classmethod(lambda cls, v: _duration(v))
    )

    @field_validator("receiver")
    @classmethod
    def _name(cls, v):
        if not v.strip() or label_value(v) != v:
            raise ValueError("a receiver needs a name")
        return v


class Routes(Strict):
    """page: SLO page rows and critical alerts; ticket: SLO ticket rows and warnings; info: the rest."""

    page: Route = Route(receiver="servewatch-page", group_wait="10s", repeat_interval="1h")
    ticket: Route = Route(receiver="servewatch-ticket", group_wait="1m", repeat_interval="1d")
    info: Route = Route(receiver="servewatch-info", repeat_interval="1d")


class Alertmanager(Strict):
    # The `team` label every generated alert carries and the route tree matches; null: the route
    # matches servewatch's alert names instead and no label is added.
    team: str | None = None
    team_label: str = "team"
    routes: Routes = Routes()
    # Labels a notification groups by besides alertname and the cluster label; default: the model
    # identity (config identity.model), so one deployment's alerts arrive together.
    group_by: tuple[str, ...] | None = None

    _team_label = field_validator("team_label")(classmethod(lambda cls, v: _label(v)))
    _group_by = field_validator("group_by")(
        classmethod(lambda cls, v: v if v is None else tuple(_label(x) for x in v))
    )

    @field_validator("team")
    @classmethod
    def _team(cls, v):
        if v is not None and not label_value(v).strip():
            raise ValueError("team is a label value: not empty")
        return v

    def team_labels(self) -> dict[str, str]:
        return {self.team_label: self.team} if self.team else {}
