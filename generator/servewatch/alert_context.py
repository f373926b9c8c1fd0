"""What an alert carries besides its identity, kept stable (DESIGN.md invariant 10; the convention is
docs/alert-labels.md).

An alert's label set is its identity: when a label changes, Prometheus starts a new alert and `for`
starts over. So the labels that come and go on scraped series (the pod dcgm-exporter maps a GPU to,
the `Hostname`/`hostname` spelling, a target that vanished) never reach an alert as they are:

- one `host` label, folded from every host spelling;
- a GPU's workload (namespace and pod) is not a label: a GPU that starts being mapped to a pod would
  gain one and restart `for`. The description looks up the workload most recently seen on it within
  `config.remember.workload` (`gpu_workload_lookup`);
- an exporter target keeps the host it served, a vLLM target the model it served, after it went down.

Each memory is an incremental recording rule (`promql.builders.remember`): it reads the scraped
series of now and its own previous value, never its whole window (docs/scale.md, "Memories").
The alerts read it with one sample per series (`recall`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .promql import builders as b
from .spec.schema import seconds

HOST = "host"  # the one host label of GPU and exporter alerts
NAMESPACE = "namespace"  # the namespace of what an alert is about (of a GPU: its workload's)
POD = "pod"
MODEL = "model_name"
TARGET_CONTEXT = (NAMESPACE, POD)  # the scrape labels a ServiceMonitor or PodMonitor adds to a target

GPU_INFO = "gpu:dcgm_gpu:info"
GPU_WORKLOAD = "gpu:dcgm_workload:last_seen"
DCGM_TARGET_HOST = "target:dcgm_host:last_seen"
VLLM_TARGET_MODEL = "target:vllm_model:last_seen"
ENGINE_SEEN = "engine:vllm_engine:seen_recently"
GPU_SEEN = "gpu:dcgm_gpu:seen_recently"
POOL_SEEN = "pool:inference_pool:seen_recently"
DCGM_TARGETS = "cluster:dcgm_up_targets:count"
VLLM_TARGETS = "namespace:vllm_up_targets:count"

# The DCGM fields that say a GPU or MIG instance is exported: the framebuffer pair the memory alerts
# read, and the GPU temperature, which every GPU and MIG instance carries (catalog/dcgm.yaml: scope
# gpu, repeated on each instance), also where the framebuffer fields are missing.
PRESENCE_FIELDS = ("fb_used", "fb_free", "gpu_temp")
# The one field the parts' memory reads to say a GPU or MIG instance is there: a memory reads hours of
# samples, so it reads one field, the one every GPU and MIG instance carries.
PART_FIELD = "gpu_temp"
POOL_READY = "client_pool_ready_pods"  # the gauge that says an inference pool is reported
INSTANCE = "instance"  # the part of a target's labels that changes when its pod restarts
# How often the GPU context memories (its info and the workload last seen on it) are recorded: they
# only describe a GPU, which changes rarely, and a series recorded every 2 minutes stays fresh for
# Prometheus' 5 minute lookback, so the alerts that join them never miss one (docs/scale.md).
CONTEXT_EVERY = "2m"


@dataclass(frozen=True)
class Memory:
    """A recording rule an alert's labels depend on."""

    record: str
    expr: str
    every: str | None = None  # a memory recorded less often runs at this interval: in its group if that
    # has this interval, else in a group of its own, named after the group with `slow` appended
    slow: str = "memory"


def fold_host(expr: str, spellings: list[str]) -> str:
    """`expr` with every host spelling folded into the one `host` label."""
    for spelling in spellings:
        expr = b.fill_label(expr, spelling, HOST)
    return expr


def gpu_workload_lookup(gpu_id: list[str]) -> str:
    """A Go template pipeline, for `{{ with ... }}`, that finds the workload (namespace and pod) most
    recently seen on the alert's GPU within `config.remember.workload`, when the alert is sent: it
    can appear, change and go while the GPU stays full, so it belongs in the text, not the labels."""
    matchers = ", ".join(f"{label}=%q" for label in gpu_id)
    query = f"topk(1, {GPU_WORKLOAD}{{{matchers}}})"
    return f'printf "{query}" {" ".join(f"$labels.{label}" for label in gpu_id)} | query'


class Context:
    """The context labels and memory records of the alerts, built with a SignalBuilder (so a scoped
    builder of `investigate` filters them like everything else)."""

    def __init__(self, builder):
        self.sb = builder
        self.labels = builder.labels
        self.config = builder.config

    # -- label names ------------------------------------------------------------------------
    @property
    def gpu_id(self) -> list[str]:
        return self.labels.identity("gpu")

    @property
    def target(self) -> list[str]:
        return self.labels.target()

    def gpu_labels(self) -> list[str]:
        """What a GPU alert carries besides the GPU's identity: all stable while the GPU is."""
        roles = self.labels.dcgm.labels
        stable = [HOST, roles.gpu, roles.mig_profile, roles.model]
        return [label for label in stable if label not in self.gpu_id]

    def presence_fields(self) -> list[str]:
        """The presence fields the exporter profile has."""
        return [f for f in PRESENCE_FIELDS if self.labels.profile.has(f)]

    def presence(self, by: list[str], *matchers: str, besides: tuple[str, ...] = ()) -> str | None:
        """One series per `by` for every GPU or MIG instance any presence field is exported for;
        with `besides`, only through the presence fields not named there (None if none is left)."""
        fields = [f for f in self.presence_fields() if f not in besides]
        if not fields:
            return None
        return f"({b.any_of(*(b.agg('group', by, self.sb.select(f, *matchers)) for f in fields))})"

    def _host(self, expr: str) -> str:
        return fold_host(expr, self.labels.host_spellings)

    # -- the memories -------------------------------------------------------------------------
    def gpu_info(self) -> Memory:
        roles = self.labels.dcgm.labels
        described = [roles.gpu, roles.mig_profile, roles.model]
        seen = self.presence(self.gpu_id + self.labels.host_spellings + described)
        info = b.agg("group", self.gpu_id + [HOST] + described, self._host(seen))
        return Memory(GPU_INFO, f"topk by ({b.labels(self.gpu_id)}) (1, {info})", CONTEXT_EVERY, "context")

    def gpu_workload(self) -> Memory:
        wl = self.labels.workload
        mapped = self.presence(self.gpu_id + [wl.namespace, wl.pod], f'{wl.pod}!=""')
        named = b.copy_label(b.copy_label(mapped, wl.namespace, NAMESPACE), wl.pod, POD)
        memory = self._remember(
            GPU_WORKLOAD, named, self.gpu_id + [NAMESPACE, POD], self.config.remember.workload
        )
        return Memory(memory.record, memory.expr, CONTEXT_EVERY, "context")

    def dcgm_target_host(self) -> Memory:
        seen = self._host(self.presence(self.target + self.labels.host_spellings))
        return self._remember(DCGM_TARGET_HOST, seen, self.target + [HOST], self.config.remember.targets)

    def pair_exported(self, signal) -> tuple[Memory, Memory]:
        """What the partner_missing alert of a matched ratio asks of its pair of fields, recorded
        once per evaluation in the alert's group instead of read again per operand: per GPU, which of
        the pair it exports (1: the numerator, 2: the partner, 3: both), and the exporter targets
        that export either."""
        ident, fields = self.gpu_id, (signal.numerator, signal.partner)
        per_gpu = [
            b.with_label(b.agg("group", ident, self.sb.select(f)), "field", f)
            + (f" * {bit}" if bit > 1 else "")
            for f, bit in zip(fields, (1, 2), strict=True)
        ]
        name = "_".join(re.sub(r"[^a-z0-9]+", "_", f.lower()).strip("_") for f in fields)
        return (
            Memory(f"gpu:dcgm_{name}:exported", b.agg("sum", ident, f"\n  {b.any_of(*per_gpu)}\n")),
            Memory(f"target:dcgm_{name}:exported", self.pair_by_target(signal)),
        )

    def pair_by_target(self, signal) -> str:
        """The exporter targets that export either field of a matched ratio's pair, from the raw fields."""
        return b.any_of(
            *(b.agg("group", self.target, self.sb.select(f)) for f in (signal.numerator, signal.partner))
        )

    def pair_read(self, signal) -> tuple[str, str]:
        """The two records of `pair_exported` as the alert reads them."""
        per_gpu, by_target = self.pair_exported(signal)
        return (
            self._memory(per_gpu.record, "dcgm", self.gpu_id),
            self._memory(by_target.record, "dcgm", self.target),
        )

    def vllm_target_model(self) -> Memory:
        seen = self.sb.select(self.sb.liveness)
        return self._remember(VLLM_TARGET_MODEL, seen, self.target + [MODEL], self.config.remember.targets)

    @staticmethod
    def _remember(record: str, seen: str, by: list[str], window: str) -> Memory:
        return Memory(record, b.remember(seen, by, record, seconds(window)))

    def engines_seen(self) -> Memory:
        """Every engine (with its target) seen within `config.remember.parts`: what a rank that stops
        reporting is compared with. A slow group's record, so the hours it reads are read rarely."""
        keys = self.labels.identity("engine") + self.target
        seen = f"last_over_time({self.sb.select(self.sb.liveness)}[{self.config.remember.parts}])"
        return Memory(ENGINE_SEEN, b.agg("group", keys, seen), self.config.remember.parts_every)

    def gpus_seen(self) -> Memory:
        """Every GPU or MIG instance (with its exporter, host and description) seen within
        `config.remember.parts`; the description stays, since the GPU info of a GPU that vanished is gone."""
        seen = f"last_over_time({self.sb.select(PART_FIELD)}[{self.config.remember.parts}])"
        keys = self.part_labels("dcgm") + self.target
        return Memory(GPU_SEEN, b.agg("group", keys, self._host(seen)), self.config.remember.parts_every)

    def pool_keys(self) -> list[str]:
        """What an inference pool is: the pool identity (cluster, namespace) and the labels of its
        ready-pods gauge (its `name`)."""
        ready = self.sb.metric_name(POOL_READY)
        return list(dict.fromkeys(self.labels.pool_identity() + list(self.sb.catalog.lookup(ready).labels)))

    def gateway(self) -> list[str]:
        """The gateway that reports a pool: its job in the pool's namespace (and cluster). Not its
        target: a restarted endpoint picker is a new instance, which may never report the pool again."""
        job = [label for label in self.target if label != INSTANCE]
        return list(dict.fromkeys(self.labels.pool_identity() + job))

    def pool_memory_keys(self) -> list[str]:
        """What the pools' memory keeps of each pool: the pool and its gateway."""
        return list(dict.fromkeys(self.pool_keys() + self.gateway()))

    def pools_seen(self) -> Memory:
        """Every inference pool (with the gateway that reported it) seen within `config.remember.parts`,
        in a slow group like the engines' and GPUs' memory: the pools are few, but a memory that reads
        hours is read rarely."""
        keys = self.pool_memory_keys()
        seen = f"last_over_time({self.sb.select(POOL_READY)}[{self.config.remember.parts}])"
        return Memory(POOL_SEEN, b.agg("group", keys, seen), self.config.remember.parts_every)

    def pools_seen_recently(self) -> str:
        """The pools' memory as the alert reads it: the last record within two of its intervals,
        narrowed like the gauge it remembers (config.client_side.selector)."""
        read = self._read(POOL_SEEN, self.config.selector("gateway"), self.pool_memory_keys())
        return f"last_over_time({read}[{self._parts_window()}])"

    def gateway_up(self) -> str:
        """`up` of the gateway's targets, narrowed by the matchers of config.client_side.selector that
        a target carries (a job, a namespace)."""
        return self._read("up", self.config.selector("gateway"), self.gateway() + [INSTANCE])

    def _parts_window(self) -> str:
        """Two intervals of the parts' memory group: the last record is always within it."""
        twice = 2 * int(seconds(self.config.remember.parts_every))
        return f"{twice // 60}m" if twice % 60 == 0 else f"{twice}s"

    def part_labels(self, source: str) -> list[str]:
        """What a part alert carries: the part's identity, and for a GPU its host and description."""
        if source == "vllm":
            return self.labels.identity("engine")
        roles = self.labels.dcgm.labels
        described = (roles.gpu, roles.mig_profile, roles.model)
        return self.gpu_id + [HOST] + [label for label in described if label not in self.gpu_id]

    def seen_recently(self, source: str, *matchers: str) -> str:
        """The parts' memory as the alerts read it: the last record within two of its intervals, of
        the parts `matchers` select (e.g. only MIG instances)."""
        memory = self.engines_seen() if source == "vllm" else self.gpus_seen()
        keys = self.part_labels(source) + self.target
        return (
            f"last_over_time({self._memory(memory.record, source, keys, *matchers)}[{self._parts_window()}])"
        )

    def targets(self, source: str) -> Memory | None:
        """How many targets a source has per cluster (vLLM: per namespace); None when there is nothing
        to group by, where `absent()` alone tells that all targets are gone."""
        by = self._cluster() + ([NAMESPACE] if source == "vllm" else [])
        if not by:
            return None
        record = VLLM_TARGETS if source == "vllm" else DCGM_TARGETS
        return Memory(record, b.agg("count", by, self.sb.up(source)))

    def _cluster(self) -> list[str]:
        return [self.config.cluster_label] if self.config.cluster_label else []

    # -- reading them ---------------------------------------------------------------------------
    def _read(self, record: str, matchers: str, keys: list[str], *extra: str) -> str:
        """A memory record, narrowed by those of `matchers` (config.selectors or .targets, which a
        dashboard narrows by its variables) that its series can carry: its `keys`; and by `extra`."""
        kept = [f'{label}{op}"{value}"' for label, op, value in b.parse_matchers(matchers) if label in keys]
        return b.selector(record, *kept, *extra)

    def _memory(self, record: str, source: str, keys: list[str], *extra: str) -> str:
        return self._read(record, self.config.selectors.get(source, ""), keys, *extra)

    def recorded(self, record: str, level: str) -> str:
        """A signal's recording rule, narrowed like the memories (its series carry the level's identity)."""
        return self._memory(record, "dcgm" if level == "gpu" else "vllm", self.labels.identity(level))

    # -- the joins alerts use -----------------------------------------------------------------
    def gpu(self, expr: str) -> str:
        """A per-GPU result with the GPU's stable labels.

        A plain join: `gpu:dcgm_gpu:info` has a series for every GPU that exports any presence field,
        and every per-GPU alert reads one of those fields, so the join cannot drop a result."""
        info = self._memory(GPU_INFO, "dcgm", self.gpu_id + self.gpu_labels())
        return b.join(expr, info, self.gpu_id, self.gpu_labels())

    def gpu_carried(self, record: str) -> str:
        """A per-GPU result of a record that carries the GPU's stable labels itself (one series per GPU,
        `SignalBuilder.carries_gpu_context`): those labels kept, no join with `gpu:dcgm_gpu:info`."""
        return b.dedup(record, self.gpu_id + self.gpu_labels())

    def dcgm_target(self, expr: str) -> str:
        """A per-exporter-target result with the host it serves (also after it went down). `expr` is
        read from the exporters' `up`: its targets are among `up`'s."""
        seen = self._memory(DCGM_TARGET_HOST, "dcgm", self.target + [HOST])
        return b.left_join(expr, b.recall(seen, self.target), self.target, [HOST], self._up_targets("dcgm"))

    def vllm_target(self, expr: str) -> str:
        """A per-vLLM-target result with the model it serves (also after it went down). `expr` is read
        from the vLLM targets' `up`: its targets are among `up`'s."""
        seen = self._memory(VLLM_TARGET_MODEL, "vllm", self.target + [MODEL])
        return b.left_join(expr, b.recall(seen, self.target), self.target, [MODEL], self._up_targets("vllm"))

    def _up_targets(self, source: str) -> str:
        """One series per target of `source`, value 1: the join's fallback where nothing is remembered,
        so the joined result is written once (see `left_join`)."""
        return b.agg("group", self.target, self.sb.up(source))

    def was_engine(self) -> str:
        """The vLLM targets that exported engine metrics within `config.remember.targets`."""
        seen = self._memory(VLLM_TARGET_MODEL, "vllm", self.target + [MODEL])
        return b.agg("group", self.target, seen)

    def gone(self, source: str) -> str | None:
        memory = self.targets(source)
        if memory is None:
            return None
        by = self._cluster() + ([NAMESPACE] if source == "vllm" else [])
        counted = self._read(memory.record, self.config.targets[source], by)
        return b.gone(counted, by, self.config.remember.targets)

    # -- which memories an alert needs ------------------------------------------------------------
    def memories(self, alert, signals: dict) -> list[Memory]:
        """The recording rules `alert`'s expression reads besides its signal's."""
        if alert.signal is not None:
            signal = signals[alert.signal]
            if signal.level != "gpu":
                return []
            return [self.gpu_workload()] if self.sb.carries_gpu_context(signal) else self._gpu()
        kind, source = alert.absence.kind, alert.absence.source
        out: list[Memory | None] = []
        if kind == "partner_missing":
            out += [*self._gpu(), self.dcgm_target_host(), *self.pair_exported(signals[alert.absence.signal])]
        if kind == "target_down":
            out += [self.dcgm_target_host() if source == "dcgm" else self.vllm_target_model()]
            out.append(self.targets(source))
        if kind == "metrics_absent":
            out += [self.vllm_target_model() if source == "vllm" else self.dcgm_target_host()]
            out.append(self.targets(source))
        if kind == "part_missing":
            out.append(self.engines_seen() if source == "vllm" else self.gpus_seen())
        if kind == "pool_gone":
            out.append(self.pools_seen())
        return [m for m in out if m is not None]

    def _gpu(self) -> list[Memory]:
        return [self.gpu_info(), self.gpu_workload()]
