"""dcgm-exporter series for one GPU or one MIG GPU instance, with the exporter's label layout.

Label layout (dcgm-exporter 4.5.3-4.8.2 ``render_metrics.go``; reference/dcgm.md section 2):
``gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], [Hostname|hostname],
[DCGM_FI_DRIVER_VERSION], [container, namespace, pod]`` plus the scrape target's labels.

Workload labels exist only while a pod holds the GPU. With ``workload_label_prefix="exported_"``
(ServiceMonitor, honorLabels=false) they arrive as ``exported_*`` and ``namespace/pod/container``
are the exporter pod's; with ``""`` (honorLabels=true) busy GPUs keep the workload's labels and idle
GPUs receive the exporter pod's target labels instead (one label, two meanings).

Values are derived from one ``util`` knob (0..1) unless overridden per metric; everything may be a
constant, a per-step list or a function of the step index.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from .scrape import Target, stable_ip, stable_suffix
from .series import Series, Value, Values, in_active, resolve

FB_MIB_NAMES = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
FB_BYTES_NAMES = ("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_FREE_BYTES")  # exporter 4.9 / DCGM 4.7
H100 = "NVIDIA H100 80GB HBM3"
H100_USABLE_MIB = 80986  # FB_USED + FB_FREE of a full H100 80GB (81559 MiB total - 573 reserved)
MIG_3G_40GB_MIB = 40320  # FB_USED + FB_FREE of one 3g.40gb instance
_PCI_BUS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")  # an HGX H100 board's GPU buses

XID_MESSAGES = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}

# Fields emitted, in a fixed order; the type is what dcgm-exporter's CSV declares.
FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
    "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "FB_FREE": "gauge",
    "FB_USED": "gauge",
    "FB_RESERVED": "gauge",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_SM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
}
# Fields that describe the whole physical GPU: repeated identically on each of its MIG instances.
GPU_SCOPED = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
}


def dcgm_target(
    host: str,
    *,
    job: str = "nvidia-dcgm-exporter",
    namespace: str | None = "gpu-operator",
    container: str | None = "nvidia-dcgm-exporter",
    port: int = 9400,
) -> Target:
    """The scrape target of the dcgm-exporter pod on ``host`` (a DaemonSet pod, one per node)."""
    pod = f"nvidia-dcgm-exporter-{stable_suffix(host)}" if namespace else None
    return Target(job, f"{stable_ip(host, prefix='10.0')}:{port}", namespace, pod, container)


def _strings(spec, steps: int) -> list[str | None]:
    if spec is None or isinstance(spec, str):
        return [spec] * steps
    out = [spec(i) for i in range(steps)] if callable(spec) else list(spec)
    if len(out) != steps:
        raise ValueError(f"expected {steps} per-step label values, got {len(out)}")
    return out


def _round(v: Value, nd: int = 6) -> Value:
    return None if v is None else round(v, nd)


def dcgm_gpu(
    host: str,
    gpu_index: int,
    uuid: str,
    fb_used_mib: Values,
    fb_free_mib: Values,
    *,
    steps: int,
    step: float = 30.0,
    util: Values = 0.0,
    parent_util: Values | None = None,
    mig_instance: tuple[int, str] | None = None,
    pod: str | None | Sequence[str | None] | Callable[[int], str | None] = None,
    namespace: str | None | Sequence[str | None] | Callable[[int], str | None] = None,
    container: str = "vllm",
    hostname_label: str | None = "Hostname",
    workload_label_prefix: str = "exported_",
    fb_names: tuple[str, str] = FB_MIB_NAMES,
    fb_reserved_mib: Values | str = "auto",
    driver_label: str | None = "DCGM_FI_DRIVER_VERSION",
    driver_version: str = "570.133.20",
    gpu_model: str = H100,
    pci_bus_id: str | None = None,
    xid: Values = 0,
    energy_start_mj: float = 1.2e12,
    targets: Iterable[Target] | None = None,
    extra_labels: Mapping[str, str] | None = None,
    overrides: Mapping[str, Values] | None = None,
    active: tuple[int, int] | None = None,
    drop: Iterable[str] = (),
) -> list[Series]:
    """All dcgm-exporter series of one GPU, or of one MIG instance.

    A MIG instance is given as ``mig_instance=(GPU_I_ID, profile)``.

    ``fb_used_mib``/``fb_free_mib`` are MiB; with byte names (``FB_BYTES_NAMES``, exporter 4.9) the
    values are written in bytes. ``fb_reserved_mib="auto"`` is 573 MiB on a full GPU and absent on a
    MIG instance (None = absent). ``pod``/``namespace`` name the workload holding the GPU (None = idle)
    and may change per step (a pod restart). ``util`` drives the activity fields (GPU_UTIL in %,
    PROF_* ratios, power, temperatures, clocks, PCIe, NVLink); for MIG instances the GPU-scoped fields
    follow ``parent_util`` (default ``util``) so all instances of a GPU repeat the same values.
    ``overrides`` replaces any field by name (e.g. ``{"DCGM_FI_DEV_GPU_TEMP": 91}``; for the two
    counters the values are per-step increments); ``drop`` removes
    fields by emitted name; ``active`` limits every series to a step range (exporter gone outside).
    Counters (energy in mJ, NVLink) accumulate over the steps.
    """
    mig = mig_instance is not None
    used_name, free_name = fb_names
    in_bytes = used_name.endswith("_BYTES")
    fb_scale = 1024 * 1024 if in_bytes else 1
    reserved_name = "DCGM_FI_DEV_FB_RESERVED_BYTES" if in_bytes else "DCGM_FI_DEV_FB_RESERVED"
    names = {"FB_USED": used_name, "FB_FREE": free_name, "FB_RESERVED": reserved_name}

    u = resolve(util, steps)
    pu = resolve(parent_util, steps) if parent_util is not None else u
    if fb_reserved_mib == "auto":
        fb_reserved_mib = None if mig else 573
    base: dict[str, tuple[Value, ...]] = {
        "FB_USED": resolve(fb_used_mib, steps),
        "FB_FREE": resolve(fb_free_mib, steps),
        "FB_RESERVED": resolve(fb_reserved_mib, steps),
        "DCGM_FI_DEV_XID_ERRORS": resolve(xid, steps),
        "DCGM_FI_DEV_GPU_UTIL": tuple(None if v is None else round(v * 100) for v in u),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": tuple(_round(v) for v in u),
        "DCGM_FI_PROF_SM_ACTIVE": tuple(_round(None if v is None else v * 0.9) for v in u),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": tuple(_round(None if v is None else v * 0.45) for v in u),
        "DCGM_FI_PROF_DRAM_ACTIVE": tuple(_round(None if v is None else v * 0.75) for v in u),
        "DCGM_FI_DEV_SM_CLOCK": tuple(None if v is None else (1980 if v > 0.05 else 345) for v in pu),
        "DCGM_FI_DEV_MEMORY_TEMP": tuple(None if v is None else round(35 + 30 * v) for v in pu),
        "DCGM_FI_DEV_GPU_TEMP": tuple(None if v is None else round(32 + 35 * v) for v in pu),
        "DCGM_FI_DEV_POWER_USAGE": tuple(_round(None if v is None else 70 + 630 * v, 3) for v in pu),
        "DCGM_FI_PROF_PCIE_TX_BYTES": tuple(None if v is None else round(2e6 + 1.8e9 * v) for v in pu),
        "DCGM_FI_PROF_PCIE_RX_BYTES": tuple(None if v is None else round(3e6 + 3.2e9 * v) for v in pu),
        # per-step increments; accumulated below
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": tuple(
            None if v is None else round(1.5e5 * v * step) for v in pu
        ),
    }
    for k, spec in (overrides or {}).items():
        key = next((f for f, n in names.items() if n == k), k)
        if key not in FIELDS:
            raise KeyError(f"unknown DCGM field {k!r}")
        base[key] = resolve(spec, steps)
    if "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" not in (overrides or {}):  # else: given per-step increments
        base["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] = tuple(  # W * s * 1000 = mJ per step
            None if p is None else round(p * step * 1000) for p in base["DCGM_FI_DEV_POWER_USAGE"]
        )
    if mig:
        base["DCGM_FI_DEV_GPU_UTIL"] = (None,) * steps  # blank for MIG instances -> series absent

    counter_start = {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy_start_mj,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 3.6e11,
    }
    pods, namespaces = _strings(pod, steps), _strings(namespace, steps)

    static = {
        "gpu": str(gpu_index),
        "UUID": uuid,
        "pci_bus_id": pci_bus_id or f"00000000:{_PCI_BUS[gpu_index % len(_PCI_BUS)]}:00.0",
        "device": f"nvidia{gpu_index}",
        "modelName": gpu_model,
    }
    if mig:
        static["GPU_I_PROFILE"] = mig_instance[1]
        static["GPU_I_ID"] = str(mig_instance[0])
    if hostname_label:
        static[hostname_label] = host
    if driver_label:
        static[driver_label] = driver_version
    static.update(extra_labels or {})
    tlist = list(targets) if targets is not None else [dcgm_target(host)]
    dropped = set(drop)

    series: dict[tuple, list[Value]] = {}
    kinds: dict[tuple, str] = {}
    for field, kind in FIELDS.items():
        name = names.get(field, field)
        if name in dropped:
            continue
        vals = base[field]
        acc = counter_start.get(field, 0.0)
        for i in range(steps):
            v = vals[i]
            if v is None or not in_active(i, active):
                continue
            if kind == "counter":
                acc += v
                v = acc
            elif field.startswith("FB_"):
                v = v * fb_scale
            labels = dict(static)
            if field == "DCGM_FI_DEV_XID_ERRORS":
                code = int(v)
                labels["err_code"] = str(code)
                labels["err_msg"] = XID_MESSAGES.get(code, "Unknown Error")
            workload = {}
            if pods[i] is not None:
                workload = {"container": container, "namespace": namespaces[i] or "default", "pod": pods[i]}
            for t in tlist:
                lab = dict(labels)
                tl = t.labels()
                if workload_label_prefix:
                    lab.update({workload_label_prefix + k: w for k, w in workload.items()})
                    lab.update(tl)
                else:  # honor_labels: scraped labels win, target labels fill the gaps
                    lab.update(workload)
                    for k, w in tl.items():
                        lab.setdefault(k, w)
                key = (name, tuple(sorted(lab.items())))
                if key not in series:
                    series[key] = [None] * steps
                    kinds[key] = kind
                series[key][i] = v
    return [Series(name, labels, vals, kinds[(name, labels)]) for (name, labels), vals in series.items()]


__all__ = [
    "dcgm_gpu",
    "dcgm_target",
    "FIELDS",
    "GPU_SCOPED",
    "FB_MIB_NAMES",
    "FB_BYTES_NAMES",
    "H100",
    "H100_USABLE_MIB",
    "MIG_3G_40GB_MIB",
    "XID_MESSAGES",
]
