"""What an alert carries besides its identity, kept stable (DESIGN.md invariant 10; the convention is
docs/alert-labels.md).

An alert's label set is its identity: when a label changes, Prometheus starts a new alert and `for`
starts over. So the labels that come and go on scraped series (the pod dcgm-exporter maps a GPU to,
the `Hostname`/`hostname` spelling, a target that vanished) never reach an alert as they are:

- one `host` label, folded from every host spelling;
- a GPU's `namespace` is the workload namespace most recently seen on it within
  `config.remember.workload`, so a flapping or dropped pod mapping does not change it (the pod
  itself is only looked up by the description, see `gpu_pod_lookup`);
- an exporter target keeps the host it served, a vLLM target the model it served, after it went down.

Each memory is a recording rule that reads scraped series only, so `promtool tsdb create-blocks-from
rules` can backfill it (servewatch_testkit/localprom.py); the alerts combine them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .promql import builders as b

HOST = "host"  # the one host label of GPU and exporter alerts
NAMESPACE = "namespace"  # the namespace of what an alert is about (of a GPU: its workload's)
POD = "pod"
MODEL = "model_name"
TARGET_CONTEXT = (NAMESPACE, POD)  # the scrape labels a ServiceMonitor or PodMonitor adds to a target

GPU_INFO = "gpu:dcgm_gpu:info"
GPU_WORKLOAD = "gpu:dcgm_workload:last_seen"
DCGM_TARGET_HOST = "target:dcgm_host:last_seen"
VLLM_TARGET_MODEL = "target:vllm_model:last_seen"
DCGM_TARGETS = "cluster:dcgm_up_targets:count"
VLLM_TARGETS = "namespace:vllm_up_targets:count"

# The DCGM fields that say a GPU or MIG instance is exported: the framebuffer pair the memory alerts
# read, and the GPU temperature, which every GPU and MIG instance carries (catalog/dcgm.yaml: scope
# gpu, repeated on each instance), also where the framebuffer fields are missing.
PRESENCE_FIELDS = ("fb_used", "fb_free", "gpu_temp")


@dataclass(frozen=True)
class Memory:
    """A recording rule an alert's labels depend on."""

    record: str
    expr: str


def fold_host(expr: str, spellings: list[str]) -> str:
    """`expr` with every host spelling folded into the one `host` label."""
    for spelling in spellings:
        expr = b.fill_label(expr, spelling, HOST)
    return expr


def gpu_pod_lookup(gpu_id: list[str], window: str) -> str:
    """A Go template pipeline, for `{{ with ... }}`, that finds the pod most recently seen on the
    alert's GPU when the alert is sent: the pod belongs in the text, not in the labels."""
    matchers = ", ".join(f"{label}=%q" for label in gpu_id)
    query = f"topk(1, max_over_time({GPU_WORKLOAD}{{{matchers}}}[{window}]))"
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
        stable = [HOST, roles.gpu, roles.mig_profile, roles.model, NAMESPACE]
        return [label for label in stable if label not in self.gpu_id]

    def presence(self, by: list[str], *matchers: str) -> str:
        """One series per `by` for every GPU or MIG instance any presence field is exported for."""
        fields = [f for f in PRESENCE_FIELDS if self.labels.profile.has(f)]
        return f"({b.any_of(*(b.agg('group', by, self.sb.select(f, *matchers)) for f in fields))})"

    def _host(self, expr: str) -> str:
        return fold_host(expr, self.labels.host_spellings)

    # -- the memories -------------------------------------------------------------------------
    def gpu_info(self) -> Memory:
        roles = self.labels.dcgm.labels
        described = [roles.gpu, roles.mig_profile, roles.model]
        seen = self.presence(self.gpu_id + self.labels.host_spellings + described)
        info = b.agg("group", self.gpu_id + [HOST] + described, self._host(seen))
        return Memory(GPU_INFO, f"topk by ({b.labels(self.gpu_id)}) (1, {info})")

    def gpu_workload(self) -> Memory:
        wl = self.labels.workload
        mapped = self.presence(self.gpu_id + [wl.namespace, wl.pod], f'{wl.pod}!=""')
        named = b.copy_label(b.copy_label(mapped, wl.namespace, NAMESPACE), wl.pod, POD)
        return Memory(GPU_WORKLOAD, b.seen_at(named, self.gpu_id + [NAMESPACE, POD]))

    def dcgm_target_host(self) -> Memory:
        seen = self._host(self.presence(self.target + self.labels.host_spellings))
        return Memory(DCGM_TARGET_HOST, b.seen_at(seen, self.target + [HOST]))

    def vllm_target_model(self) -> Memory:
        return Memory(VLLM_TARGET_MODEL, b.seen_at(self.sb.select(self.sb.liveness), self.target + [MODEL]))

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
    def _read(self, record: str, matchers: str, keys: list[str]) -> str:
        """A memory record, narrowed by those of `matchers` (config.selectors or .targets, which a
        dashboard narrows by its variables) that its series can carry: its `keys`."""
        kept = [f'{label}{op}"{value}"' for label, op, value in b.parse_matchers(matchers) if label in keys]
        return b.selector(record, *kept)

    def _memory(self, record: str, source: str, keys: list[str]) -> str:
        return self._read(record, self.config.selectors.get(source, ""), keys)

    def recorded(self, record: str, level: str) -> str:
        """A signal's recording rule, narrowed like the memories (its series carry the level's identity)."""
        return self._memory(record, "dcgm" if level == "gpu" else "vllm", self.labels.identity(level))

    # -- the joins alerts use -----------------------------------------------------------------
    def gpu(self, expr: str) -> str:
        """A per-GPU result with the GPU's stable labels and its workload namespace.

        A plain join: `gpu:dcgm_gpu:info` has a series for every GPU that exports any presence field,
        and every per-GPU alert reads one of those fields, so the join cannot drop a result (the
        workload namespace, which a GPU may lack, is joined onto the info with a left join)."""
        seen = self._memory(GPU_WORKLOAD, "dcgm", self.gpu_id + [NAMESPACE, POD])
        workload = b.recall(seen, self.gpu_id, self.config.remember.workload)
        info = self._memory(GPU_INFO, "dcgm", self.gpu_id + self.gpu_labels())
        return b.join(
            expr, b.left_join(info, workload, self.gpu_id, [NAMESPACE]), self.gpu_id, self.gpu_labels()
        )

    def dcgm_target(self, expr: str) -> str:
        """A per-exporter-target result with the host it serves (also after it went down)."""
        seen = self._memory(DCGM_TARGET_HOST, "dcgm", self.target + [HOST])
        return b.left_join(
            expr, b.recall(seen, self.target, self.config.remember.targets), self.target, [HOST]
        )

    def vllm_target(self, expr: str) -> str:
        """A per-vLLM-target result with the model it serves (also after it went down)."""
        seen = self._memory(VLLM_TARGET_MODEL, "vllm", self.target + [MODEL])
        return b.left_join(
            expr, b.recall(seen, self.target, self.config.remember.targets), self.target, [MODEL]
        )

    def was_engine(self) -> str:
        """The vLLM targets that exported engine metrics within `config.remember.targets`."""
        seen = self._memory(VLLM_TARGET_MODEL, "vllm", self.target + [MODEL])
        return b.agg("group", self.target, f"max_over_time({seen}[{self.config.remember.targets}])")

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
            return self._gpu() if signals[alert.signal].level == "gpu" else []
        kind, source = alert.absence.kind, alert.absence.source
        out: list[Memory | None] = []
        if kind == "partner_missing":
            out += [*self._gpu(), self.dcgm_target_host()]
        if kind == "target_down":
            out += [self.dcgm_target_host() if source == "dcgm" else self.vllm_target_model()]
            out.append(self.targets(source))
        if kind == "metrics_absent":
            out += [self.vllm_target_model() if source == "vllm" else self.dcgm_target_host()]
            out.append(self.targets(source))
        return [m for m in out if m is not None]

    def _gpu(self) -> list[Memory]:
        return [self.gpu_info(), self.gpu_workload()]
