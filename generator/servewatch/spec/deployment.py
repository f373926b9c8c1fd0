"""Deployment identity beyond namespace and model_name (docs/disaggregated.md): the role of a vLLM
series in prefill/decode disaggregation, and the track (stable, canary, a revision) it belongs to.
Both are optional and each reads a label the user names; unset, servewatch sees one aggregated,
single-track deployment per model and generates exactly what it generated before they existed."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from .fields import LabelName, shown

ROLES = ("prefill", "decode", "both")  # both: an aggregated engine that prefills and decodes
RoleName = Literal["prefill", "decode", "both"]
# Where each user request is counted once: every request ends on a decode engine (a prefill engine
# finishes its leg too, with `length`, and sees no request the router prefilled locally on decode),
# and a decode engine counts the whole prompt, computed or transferred. The SLOs count here; the
# request and token signals of specs/signals.yaml say the same in their `roles`.
COUNTING_ROLES = ("decode", "both")
# Kubernetes label values (what podTargetLabels copies); `.` is the one regex character among them
ESCAPED_DOT = "\\\\."  # a literal dot in an RE2 pattern inside a PromQL string: \\.
VALUE_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _value(value: str) -> str:
    if not isinstance(value, str) or not VALUE_RE.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a Kubernetes label value (letters, digits, -, _ and .)")
    return value


LabelValue = Annotated[str, AfterValidator(_value)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleConfig(_Frozen):
    """Which label names a vLLM series' role, and which of its values mean which role."""

    label: LabelName  # llm-d: llm_d_ai_role (podTargetLabels), KServe: llm_isvc_role, Dynamo: worker_type
    # servewatch role -> the label's values that mean it (Dynamo: both: [aggregated])
    values: dict[RoleName, tuple[LabelValue, ...]] = Field(
        default_factory=lambda: {role: (role,) for role in ROLES}
    )

    @field_validator("values", mode="before")
    @classmethod
    def _roles(cls, v):
        if not isinstance(v, dict):
            return v
        return {**{role: (role,) for role in ROLES}, **v}  # a role left out keeps its own name

    @field_validator("values")
    @classmethod
    def _distinct(cls, v):
        seen: dict[str, str] = {}
        for role in ROLES:
            if not v[role]:
                raise ValueError(f"role {role} needs at least one label value")
            for value in v[role]:
                if value in seen and seen[value] != role:
                    raise ValueError(f"{value!r} is named for both {seen[value]} and {role}")
                seen[value] = role
        return {role: tuple(dict.fromkeys(v[role])) for role in ROLES}

    def matcher(self, roles) -> str:
        """The label matcher that keeps the series of `roles`."""
        values = [value for role in ROLES if role in roles for value in self.values[role]]
        if len(values) == 1:
            return f'{self.label}="{values[0]}"'
        escaped = "|".join(v.replace(".", ESCAPED_DOT) for v in values)
        return f'{self.label}=~"{escaped}"'


class TrackConfig(_Frozen):
    """Which label names a vLLM series' track (stable, canary or any revision), and which value is
    the one the others are compared against."""

    label: LabelName  # a pod label brought in by podTargetLabels: track, version, ...
    stable: LabelValue = "stable"

    def stable_matcher(self) -> str:
        return f'{self.label}="{self.stable}"'

    def others_matcher(self) -> str:
        return f'{self.label}!="{self.stable}"'
