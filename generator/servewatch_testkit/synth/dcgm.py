"""dcgm-exporter series for one GPU or one MIG GPU instance, with the exporter's label layout.

Label layout (dcgm-exporter 4.5.3-4.8.2; the labels catalog/dcgm.yaml lists):
``gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], [Hostname|hostname],
[<driver label>], [container, namespace, pod]`` plus the scrape target's labels.

Metric names, units, the driver-version label and each field's scope come from an exporter profile
of ``servewatch.catalog`` (catalog/dcgm.yaml), the same facts the generator reads: ``profile="bytes"``
gives an exporter 4.9 GPU. Values are computed in the units of ``REFERENCE`` (MiB, percent, MHz, mJ,
MB/s) and converted to the profile's; ``as_profile`` converts finished series the same way.

Workload labels exist only while a pod holds the GPU. With ``workload_label_prefix="exported_"``
(ServiceMonitor, honorLabels=false) they arrive as ``exported_*`` and ``namespace/pod/container``
are the exporter pod's; with ``""`` (honorLabels=true) busy GPUs keep the workload's labels and idle
GPUs receive the exporter pod's target labels instead (one label, two meanings).

Values are derived from one ``util`` knob (0..1) unless overridden per field; everything may be a
constant, a per-step list or a function of the step index.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from servewatch import catalog

from .scrape import Target, stable_ip, stable_suffix
from .series import Series, Value, Values, in_active, resolve

REFERENCE = "mib"  # the profile whose units the values below are computed in
# Reference unit -> another profile's unit: a value is multiplied by the first number and divided by
# the second (a division keeps 93 percent -> 0.93 exact).
UNIT_SCALE = {
    ("MiB", "bytes"): (1024 * 1024, 1),
    ("percent", "ratio"): (1, 100),
    ("MHz", "hertz"): (1_000_000, 1),
    ("millijoules", "joules"): (1, 1000),
    ("megabytes_per_second", "bytes_per_second"): (1_000_000, 1),
}
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

# The catalog fields a GPU emits (dcgm-exporter's default counters CSV), in a fixed order.
FIELDS = (
    "sm_clock",
    "memory_temp",
    "gpu_temp",
    "power",
    "energy",
    "gpu_util",
    "xid",
    "fb_free",
    "fb_used",
    "fb_reserved",
    "nvlink_throughput",
    "gr_engine_active",
    "sm_active",
    "tensor_active",
    "dram_active",
    "pcie_tx",
    "pcie_rx",
)
# Fields the default counters CSV leaves commented out, emitted only when asked for: the exporter's
# own XID count (``xid_window_ms``) and the NVLink profiling throughput each way (``nvlink_links``).
OPT_IN_FIELDS = ("xid_count", "nvlink_tx", "nvlink_rx")


def exporter_profile(name: str = REFERENCE):
    """An exporter profile of the catalog (catalog/dcgm.yaml)."""
    return catalog.load().dcgm.profile(name)


def field_names(profile_name: str, *fields: str) -> tuple[str, ...]:
    """The metric names a profile gives `fields`, e.g. ``field_names("bytes", "fb_used", "fb_free")``."""
    return tuple(exporter_profile(profile_name).metric(f) for f in fields)


def _scale(field: str, to: str) -> tuple[int, int]:
    src, dst = exporter_profile(REFERENCE).unit(field), exporter_profile(to).unit(field)
    if src == dst:
        return 1, 1
    if (src, dst) not in UNIT_SCALE:
        raise ValueError(f"no conversion for DCGM field {field!r} from {src} to {dst} (profile {to!r})")
    return UNIT_SCALE[(src, dst)]


def as_profile(series: Iterable[Series], to: str) -> list[Series]:
    """Series of the reference profile as an exporter of profile `to` exposes them: each DCGM field
    renamed and converted to that profile's unit, the driver-version label renamed; others as they are.
    A field the target profile has no name for is dropped (that exporter would not expose it)."""
    if to == REFERENCE:
        return list(series)
    ref, dst = exporter_profile(REFERENCE), exporter_profile(to)
    out = []
    for s in series:
        field = ref.field_of(s.name)
        if field is None:
            out.append(s)
            continue
        if not dst.has(field):
            continue
        labels = dict(s.labels)
        if ref.driver_label in labels:
            labels[dst.driver_label] = labels.pop(ref.driver_label)
        mul, div = _scale(field, to)
        values = [None if v is None else v * mul / div for v in s.values]
        out.append(Series(dst.metric(field), labels, values, s.kind))
    return out


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
    profile: str = REFERENCE,
    fb_reserved_mib: Values | str = "auto",
    driver_label: str | None = "auto",
    driver_version: str = "570.133.20",
    gpu_model: str = H100,
    pci_bus_id: str | None = None,
    xid: Values = 0,
    xid_window_ms: int | None = None,
    nvlink_links: bool = False,
    energy_start_mj: float = 1.2e12,
    targets: Iterable[Target] | None = None,
    extra_labels: Mapping[str, str] | None = None,
    overrides: Mapping[str, Values] | None = None,
    active: tuple[int, int] | None = None,
    drop: Iterable[str] = (),
) -> list[Series]:
    """All dcgm-exporter series of one GPU, or of one MIG instance, as an exporter of ``profile``
    exposes them (names, units and driver-version label from the catalog).

    A MIG instance is given as ``mig_instance=(GPU_I_ID, profile)``.

    ``fb_used_mib``/``fb_free_mib`` are MiB (written in bytes by a profile that counts bytes).
    ``fb_reserved_mib="auto"`` is 573 MiB on a full GPU and absent on a MIG instance (None = absent).
    ``pod``/``namespace`` name the workload holding the GPU (None = idle) and may change per step (a
    pod restart). ``util`` drives the activity fields (GPU_UTIL in %, PROF_* ratios, power,
    temperatures, clocks, PCIe, NVLink throughput); for MIG instances the whole-GPU fields (catalog
    scope gpu) follow ``parent_util`` (default ``util``) so all instances of a GPU repeat the same
    values. ``overrides`` replaces a field, named as a catalog field or by a profile's metric name
    (e.g. ``{"gpu_temp": 91}``), in ``REFERENCE`` units; for the energy counter the values are
    per-step increments. ``drop`` removes fields the same way; ``active`` limits every series to a
    step range (exporter gone outside). ``driver_label="auto"`` is the profile's. Counters (catalog
    type counter: energy in mJ) accumulate over the steps.

    ``xid_window_ms`` turns on the opt-in XID count (``DCGM_EXP_XID_ERRORS_COUNT``) with that window,
    with no XID in it: dcgm-exporter then exports one series at 0 with ``window_size_in_ms`` and
    no ``xid`` label (a series per ``xid`` code appears only while one is in the window).

    ``nvlink_links`` turns on the NVLink profiling fields (``nvlink_tx``/``nvlink_rx``, bytes per
    second each way; exporter 4.10 names them ``..._BYTES_PER_SECOND``): half of ``nvlink_throughput``
    each, so TX and RX add up to it.
    """
    ref, target, facts = exporter_profile(REFERENCE), exporter_profile(profile), catalog.load().dcgm
    mig = mig_instance is not None

    def field_key(name: str) -> str:
        key = name if name in facts.fields else ref.field_of(name) or target.field_of(name)
        if key not in FIELDS + OPT_IN_FIELDS:
            raise KeyError(f"unknown DCGM field {name!r}")
        return key

    u = resolve(util, steps)
    pu = resolve(parent_util, steps) if parent_util is not None else u
    if fb_reserved_mib == "auto":
        fb_reserved_mib = None if mig else 573
    base: dict[str, tuple[Value, ...]] = {
        "fb_used": resolve(fb_used_mib, steps),
        "fb_free": resolve(fb_free_mib, steps),
        "fb_reserved": resolve(fb_reserved_mib, steps),
        "xid": resolve(xid, steps),
        "xid_count": resolve(None if xid_window_ms is None else 0, steps),
        "gpu_util": tuple(None if v is None else round(v * 100) for v in u),
        "gr_engine_active": tuple(_round(v) for v in u),
        "sm_active": tuple(_round(None if v is None else v * 0.9) for v in u),
        "tensor_active": tuple(_round(None if v is None else v * 0.45) for v in u),
        "dram_active": tuple(_round(None if v is None else v * 0.75) for v in u),
        "sm_clock": tuple(None if v is None else (1980 if v > 0.05 else 345) for v in pu),
        "memory_temp": tuple(None if v is None else round(35 + 30 * v) for v in pu),
        "gpu_temp": tuple(None if v is None else round(32 + 35 * v) for v in pu),
        "power": tuple(_round(None if v is None else 70 + 630 * v, 3) for v in pu),
        "pcie_tx": tuple(None if v is None else round(2e6 + 1.8e9 * v) for v in pu),
        "pcie_rx": tuple(None if v is None else round(3e6 + 3.2e9 * v) for v in pu),
        "nvlink_throughput": tuple(None if v is None else round(1.5e5 * v) for v in pu),  # MB/s
    }
    for way in ("nvlink_tx", "nvlink_rx"):  # bytes/s each way: half the MB/s total, in bytes
        base[way] = tuple(
            None if v is None or not nvlink_links else v * 1e6 / 2 for v in base["nvlink_throughput"]
        )
    overridden = {field_key(k): resolve(spec, steps) for k, spec in (overrides or {}).items()}
    base.update(overridden)
    if "energy" not in overridden:  # else: given per-step increments
        base["energy"] = tuple(  # W * s * 1000 = mJ per step
            None if p is None else round(p * step * 1000) for p in base["power"]
        )
    if mig:
        base["gpu_util"] = (None,) * steps  # blank for MIG instances -> series absent

    counter_start = {"energy": energy_start_mj}
    pods, namespaces = _strings(pod, steps), _strings(namespace, steps)

    roles = facts.labels
    static = {
        roles.gpu: str(gpu_index),
        roles.uuid: uuid,
        roles.pci_bus_id: pci_bus_id or f"00000000:{_PCI_BUS[gpu_index % len(_PCI_BUS)]}:00.0",
        roles.device: f"nvidia{gpu_index}",
        roles.model: gpu_model,
    }
    if mig:
        static[roles.mig_profile] = mig_instance[1]
        static[roles.mig_instance] = str(mig_instance[0])
    if hostname_label:
        static[hostname_label] = host
    if driver_label:
        static[ref.driver_label if driver_label == "auto" else driver_label] = driver_version
    static.update(extra_labels or {})
    tlist = list(targets) if targets is not None else [dcgm_target(host)]
    dropped = {field_key(x) for x in drop}
    err_code, err_msg = facts.field("xid").extra_labels
    window_label = facts.field("xid_count").extra_labels[1]

    series: dict[tuple, list[Value]] = {}
    kinds: dict[tuple, str] = {}
    for field in FIELDS + OPT_IN_FIELDS:
        if field in dropped:
            continue
        facts_of = facts.field(field)
        name, vals = ref.metric(field), base[field]
        acc = counter_start.get(field, 0.0)
        for i in range(steps):
            v = vals[i]
            if v is None or not in_active(i, active):
                continue
            if facts_of.type == "counter":
                acc += v
                v = acc
            labels = dict(static)
            if field == "xid":
                code = int(v)
                labels[err_code] = str(code)
                labels[err_msg] = XID_MESSAGES.get(code, "Unknown Error")
            if field == "xid_count":
                labels[window_label] = str(xid_window_ms)
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
                    kinds[key] = facts_of.exposed_as or facts_of.type
                series[key][i] = v
    built = [Series(name, labels, vals, kinds[(name, labels)]) for (name, labels), vals in series.items()]
    return as_profile(built, profile)


__all__ = [
    "dcgm_gpu",
    "dcgm_target",
    "as_profile",
    "field_names",
    "exporter_profile",
    "FIELDS",
    "OPT_IN_FIELDS",
    "REFERENCE",
    "H100",
    "H100_USABLE_MIB",
    "MIG_3G_40GB_MIB",
    "XID_MESSAGES",
]
