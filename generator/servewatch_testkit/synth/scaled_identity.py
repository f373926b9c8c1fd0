"""Identity beyond (namespace, model_name) in the benchmark fleet: roles, tracks and a gateway.

``scaled_fleet`` serves every model with identical aggregated engines; a team that configures
``config.role``, ``config.track`` or ``config.client_side`` (docs/disaggregated.md) runs something
else, and the rules only that configuration adds must be measured on it. ``Identity`` says which of
the three a fleet has, and what it changes:

  role      each model's pods in prefill/decode pairs (even replica prefill, odd decode), the role
            on every series of the pod (a PodMonitor's ``podTargetLabels``); prefill legs finish with
            ``length`` after one token, decode legs wait only for their KV cache; both run vLLM's
            NIXL connector (decode pulls its requests' KV caches, prefill pulls none) and decode
            defers one request on its transfers
  track     the last pair of each model (one in eight where a model has sixteen pairs or more) is
            the canary, every other pair stable; no pair is a canary where a model has one pair only
  client    llm-d's endpoint picker in front of every model: two EPP pods, two streaming flows each
            (TTFT, ITL and request counters per flow, the model's decode requests split among them),
            one non-streaming flow (its TTFT is the whole response), and the model's pool gauges

Deterministic: the same shape and identity give the same series.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from servewatch import catalog

from .histogram import allocate, histogram_series
from .scrape import Target, stable_suffix, up
from .series import Series

if TYPE_CHECKING:
    from .vllm import RequestProfile

CLIENT = "llm-d-epp"  # the one client source the fleet can stand in for (its names are catalogued)
EPP_PODS, FLOWS = 2, ("team-a", "team-b")
BATCH_FLOW, WHOLE_RESPONSE_S = "batch", 20.0  # a non-streaming flow: the EPP times its whole response
GATEWAY_TTFT_S = 0.15  # what the gateway adds to an engine's first token: routing and the KV transfer
POOL_VALUES = {"ready_pods": None, "kv_cache": 0.45, "queue": 1.0}  # ready_pods: the model's pods
CANARY_SHARE = 8  # one pair in eight is a canary where a model has that many


@dataclass(frozen=True)
class Identity:
    """Which identity dimensions the fleet carries, named as a team's config names them."""

    role_label: str | None = None
    prefill: str = "prefill"  # the role label's value of a prefill pod
    decode: str = "decode"
    track_label: str | None = None
    stable: str = "stable"
    canary: str = "canary"
    client: str | None = None  # config.client_side.source: CLIENT or None

    def __post_init__(self):
        if self.client not in (None, CLIENT):
            raise ValueError(f"the benchmark fleet has no {self.client!r} gateway; only {CLIENT!r}")

    @classmethod
    def of(cls, config) -> "Identity":
        """The identity a servewatch config (``spec.schema.Config``) reads: its first value of each role."""
        role, track, client = config.role, config.track, config.client_side
        roles = (
            {"role_label": role.label, **{r: role.values[r][0] for r in ("prefill", "decode")}}
            if role
            else {}
        )
        tracks = {"track_label": track.label, "stable": track.stable} if track else {}
        return cls(**roles, **tracks, client=client.source if client else None)

    @property
    def paired(self) -> bool:
        return self.role_label is not None

    def summary(self) -> dict:
        return {
            "role_label": self.role_label,
            "track_label": self.track_label,
            "client": self.client,
        }

    # -- pods ----------------------------------------------------------------------------------
    def role(self, replica: int) -> str | None:
        """The servewatch role of a model's pod ``replica``: prefill, decode, or None (aggregated)."""
        if not self.paired:
            return None
        return "prefill" if replica % 2 == 0 else "decode"

    def is_canary(self, replica: int, pods_per_model: int) -> bool:
        """Whether pod ``replica`` of a model belongs to a canary pair (or canary pod, unpaired)."""
        if self.track_label is None:
            return False
        size = 2 if self.paired else 1
        units = pods_per_model // size
        canaries = max(1, units // CANARY_SHARE) if units >= 2 else 0
        return replica // size >= units - canaries

    def pod_labels(self, replica: int, pods_per_model: int) -> dict[str, str]:
        """The role and track labels every series of the pod carries."""
        out = {}
        if self.paired:
            out[self.role_label] = self.prefill if self.role(replica) == "prefill" else self.decode
        if self.track_label is not None:
            out[self.track_label] = self.canary if self.is_canary(replica, pods_per_model) else self.stable
        return out


def role_mix(mix: tuple[RequestProfile, ...], role: str | None) -> tuple[RequestProfile, ...]:
    """A request mix as the pod of ``role`` sees it (None: aggregated, the mix itself)."""
    if role == "prefill":
        return prefill_leg(mix)
    if role == "decode":
        return decode_leg(mix)
    return mix


def prefill_leg(mix: tuple[RequestProfile, ...]) -> tuple[RequestProfile, ...]:
    """The prefill leg of each request: the router sends it with max_tokens=1, so one token, no
    inter-token latency, finished with ``length``."""
    return tuple(replace(p, generation_tokens=1, finished_reason="length", cached_tokens=0) for p in mix)


def decode_leg(mix: tuple[RequestProfile, ...]) -> tuple[RequestProfile, ...]:
    """The decode leg: no queue of its own, its "prefill" the wait for the KV cache to arrive."""
    return tuple(replace(p, queue_s=0.0, prefill_s=round(min(p.prefill_s, 0.25), 6)) for p in mix)


# -- the gateway --------------------------------------------------------------------------------
def gateway(
    model: str,
    namespace: str,
    pool: str,
    requests: list[int],
    ttft_s: float,
    itl_s: float,
    tokens: int,
    ready_pods: int,
    steps: int,
    prior: int,
) -> list[Series]:
    """One model's endpoint picker: EPP_PODS pods, each with FLOWS streaming flows sharing the
    model's ``requests`` per step, each first token at ``ttft_s`` + GATEWAY_TTFT_S and each of
    ``tokens`` gaps at ``itl_s``, one non-streaming flow, and the pool's gauges."""
    source = catalog.load().clients[CLIENT]
    ttft, itl = source.metric("ttft"), source.metric("itl")
    bounds = catalog.load().test_buckets
    out: list[Series] = []
    shares = [allocate(n, [1] * (EPP_PODS * len(FLOWS))) for n in requests]
    short = model.split("/")[-1].lower().replace(".", "-")[:30].rstrip("-")
    for p in range(EPP_PODS):
        pod = f"epp-{short}-{stable_suffix('scaled', 'epp', model, str(p))}"
        target = Target("epp", f"{pod}:9090", namespace, pod, "epp")
        out.append(up(target, 1, steps=steps))
        me = {**target.labels(), source.model_label: model, "target_model_name": model, "priority": "0"}
        for f, flow in enumerate(FLOWS):
            counts = [share[p * len(FLOWS) + f] for share in shares]
            labels = {**me, "fairness_id": flow}
            first = [[(ttft_s + GATEWAY_TTFT_S, n)] if n else [] for n in counts]
            gaps = [[(itl_s, n * tokens)] if n else [] for n in counts]
            out += histogram_series(ttft, {**labels, "streaming": "true"}, bounds(ttft), first, prior=prior)
            out += histogram_series(itl, labels, bounds(itl), gaps, prior=prior)
            total = [float(sum(counts[: i + 1]) + prior * counts[0]) for i in range(steps)]
            out.append(Series(source.metric("requests"), labels, total, kind="counter"))
        whole = [[(WHOLE_RESPONSE_S, 1)]] * steps
        batch = {**me, "fairness_id": BATCH_FLOW, "streaming": "false"}
        out += histogram_series(ttft, batch, bounds(ttft), whole, prior=prior)
        for quantity, metric in source.pool:
            value = float(ready_pods) if POOL_VALUES[quantity] is None else POOL_VALUES[quantity]
            out.append(Series(metric, {**target.labels(), "name": pool}, [value] * steps))
    return out


__all__ = ["CLIENT", "Identity", "decode_leg", "gateway", "prefill_leg", "role_mix"]
