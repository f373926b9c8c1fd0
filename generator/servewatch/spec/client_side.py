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


CLIENT_ERRORS = "client_errors"  # a signal's metric: the failed requests of the source that counts them


def counting_source(client_side: ClientSideConfig | None) -> catalog.ClientSource:
    """The source of the request and error counters: the configured one where it counts them, else
    the catalog's first that does, so a signal that needs them is still checked against real ones."""
    if client_side is not None and client_side.client.measures_errors:
        return client_side.client
    return next(c for c in catalog.load().clients.values() if c.measures_errors)


def with_cause(signal, client_side: ClientSideConfig | None):
    """A signal of the client's failed requests kept per the cause its source says they failed of,
    in the source's own label (llm-d's error_code, Dynamo's error_type: catalog/gateway.yaml
    `outcome.cause`); any other signal as it is."""
    if signal.metric != CLIENT_ERRORS:
        return signal
    cause = counting_source(client_side).outcome.cause
    return signal if cause in signal.by else signal.model_copy(update={"by": (cause, *signal.by)})
