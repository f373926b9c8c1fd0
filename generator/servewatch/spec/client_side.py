"""The client's side of latency (docs/disaggregated.md): a gateway or frontend in front of vLLM that
sees each request as its client does, catalogued in catalog/gateway.yaml. Optional; unset, every
latency alert reads the engines' own histograms and says so."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from .. import catalog
from .fields import LabelName, Matchers, shown
from .translate import did_you_mean


def _source(value: str) -> str:
    known = sorted(catalog.load().clients)
    if value not in known:
        hint = did_you_mean(value, known)
        raise ValueError(
            f"{shown(value)} is not a catalogued client source{hint}; use one of {', '.join(known)}"
        )
    return value


class ClientSideConfig(BaseModel):
    """Which gateway or frontend source measures the client's latency, which of its series, and the
    label its series carry the model name in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Annotated[str, AfterValidator(_source)]  # llm-d-epp, dynamo-frontend (catalog/gateway.yaml)
    selector: Matchers = ""  # which of the source's series (e.g. one gateway's job)
    # the label carrying the model name; default: the one the catalog documents for the source
    model_label: LabelName | None = None

    @model_validator(mode="after")
    def _model_label(self):
        if self.model_label is None and self.client.model_label is None:
            raise ValueError(
                f"source {self.source} documents no model label: set model_label to the label its "
                "series carry the model name in"
            )
        return self

    @property
    def client(self) -> catalog.ClientSource:
        return catalog.load().clients[self.source]

    @property
    def label(self) -> str:
        """The label carrying the model name on the source's series."""
        return self.model_label or self.client.model_label

    def metric(self, field: str) -> str | None:
        """The source's histogram of a client-side quantity (ttft, itl); None where it has none."""
        return self.client.metric(field)
