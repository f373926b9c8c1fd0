"""The probes of `servewatch detect`: one function per question, all behind one signature.

A probe takes the ProbeContext (the Prometheus to ask, the config, the catalog) and returns a
ProbeOutcome: findings, counts, and the config settings it suggests as {dotted key: value}. PROBES lists
them in the order they run; docs/detect.md describes each. Every exporter name a probe asks about
(framebuffer metric per profile, host label spellings, workload labels, MIG label, the vLLM liveness
gauge, removed vLLM names) comes from the catalog, so a profile added there is detected too.

Every question is an instant `count(...)` (or `count by`) query, built with promql.builders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from ..catalog import Catalog, ExporterProfile
from ..catalog import deployment as deployment_labels
from ..investigate.client import Client
from ..promql import builders as b
from ..signals import SignalBuilder
from ..slo.exprs import SloExprs
from ..slo.kinds import kind_of, le_value
from ..validation.slo_checks import bound_problem

CLUSTER_HINT = "cluster"
SHOW_MAX = 10  # twice-scraped GPUs listed at most
DOWN_ALERT = {"dcgm": "DCGMExporterDown", "vllm": "VLLMMetricsAbsent"}


@dataclass
class DetectFinding:
    topic: str
    level: str  # info | warning | differs
    message: str


@dataclass
class ProbeOutcome:
    topic: str  # of the findings, unless one names another
    findings: list[DetectFinding] = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    suggested: dict = field(default_factory=dict)  # dotted config key -> value

    def info(self, message: str, topic: str | None = None) -> None:
        self.findings.append(DetectFinding(topic or self.topic, "info", message))

    def warning(self, message: str, topic: str | None = None) -> None:
        self.findings.append(DetectFinding(topic or self.topic, "warning", message))

    def differs(self, message: str, topic: str | None = None) -> None:
        self.findings.append(DetectFinding(topic or self.topic, "differs", message))


def regex(names) -> str:
    """An alternation matching exactly `names`, written for the inside of a PromQL double-quoted string."""
    exact = (re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\1", n) for n in sorted(names))
    return "|".join(exact).replace("\\", "\\\\").replace('"', '\\"')


class Ask:
    """Instant queries at one time."""

    def __init__(self, client: Client, at: float | None):
        self.client, self.at = client, at

    def rows(self, expr: str) -> list[dict]:
        return self.client.query(expr, self.at)

    def count(self, expr: str) -> int:
        """Value of a `count(...)` query; 0 when it returns nothing."""
        rows = self.rows(expr)
        return int(float(rows[0]["value"][1])) if rows else 0


@dataclass(frozen=True)
class FbName:
    """One framebuffer-used metric name and the exporter profile that exports it."""

    profile: ExporterProfile
    name: str

    @property
    def era(self) -> str:
        return f"{self.profile.unit('fb_used')}, exporter {self.profile.exporter}"


class ProbeContext:
    """What every probe reads: the Prometheus, the config, the catalog, and a few shared answers."""

    def __init__(self, ask: Ask, config, catalog: Catalog, current: dict, slos: dict | None = None):
        self.ask, self.config, self.catalog, self.current = ask, config, catalog, current
        self.slos = slos or {}  # the specs' SLOs, whose inputs are checked too
        self.dcgm = catalog.dcgm
        self.dsel = config.selectors.get("dcgm", "")
        self.vsel = config.selectors.get("vllm", "")

    @cached_property
    def fb_names(self) -> list[FbName]:
        """The framebuffer-used name of each profile (in catalog order), each name once."""
        out: dict[str, FbName] = {}
        for profile in self.dcgm.profiles.values():
            if profile.has("fb_used"):
                out.setdefault(profile.metric("fb_used"), FbName(profile, profile.metric("fb_used")))
        return list(out.values())

    def fb_twins(self, fb: FbName) -> list[ExporterProfile]:
        """The profiles (in catalog order) that give the framebuffer the name `fb`: the FB series alone
        cannot tell them apart (exporter 4.9 and 4.10)."""
        return [p for p in self.dcgm.profiles.values() if p.has("fb_used") and p.metric("fb_used") == fb.name]

    @cached_property
    def old_namespace_names(self) -> list[str]:
        """FB names of exporters run with -o (1.x names): catalog renames whose replacement is one."""
        fb = {n.name for n in self.fb_names}
        return [old for old, r in self.catalog.renamed.items() if r.replacement in fb]

    @cached_property
    def fb_name_counts(self) -> dict[str, int]:
        names = [n.name for n in self.fb_names] + self.old_namespace_names
        expr = b.agg("count", ["__name__"], b.selector("", f'__name__=~"{regex(names)}"', self.dsel))
        return {r["metric"].get("__name__", ""): int(float(r["value"][1])) for r in self.ask.rows(expr)}

    @property
    def fb_series(self) -> int:
        """FB series under any profile's name: the series the dcgm probes look at."""
        return sum(self.fb_name_counts.get(n.name, 0) for n in self.fb_names)

    @cached_property
    def vllm_series(self) -> int:
        return self.ask.count(b.agg("count", [], self.vllm()))

    def fb(self, *matchers: str) -> str:
        """Every FB-used series (every profile's name) with extra matchers."""
        names = [n.name for n in self.fb_names]
        return b.selector("", f'__name__=~"{regex(names)}"', self.dsel, *matchers)

    @cached_property
    def live_name_counts(self) -> dict[str, int]:
        """vLLM profile -> engines' liveness series under the name it gives them."""
        names = {p.name: p.metric(self.catalog.vllm_liveness) for p in self.catalog.vllm_profiles.values()}
        expr = b.agg("count", ["__name__"], b.selector("", f'__name__=~"{regex(names.values())}"', self.vsel))
        found = {r["metric"].get("__name__", ""): int(float(r["value"][1])) for r in self.ask.rows(expr)}
        return {profile: found.get(name, 0) for profile, name in names.items()}

    @cached_property
    def vllm_profile(self) -> str:
        """The vLLM profile whose names the engines' series go by here: the one most series use,
        else the configured one."""
        counts = self.live_name_counts
        best = max(counts, key=lambda p: (counts[p], p == self.config.vllm_profile))
        return best if counts[best] else self.config.vllm_profile

    def vllm_name(self, name: str) -> str:
        """A vLLM metric under the name the vLLM profile in use gives it."""
        return self.catalog.vllm_profiles[self.vllm_profile].metric(name)

    @property
    def vllm_config(self):
        """The config with the vLLM profile in use: what the other vLLM probes read through."""
        return self.config.model_copy(update={"vllm_profile": self.vllm_profile})

    def vllm(self, *matchers: str) -> str:
        """The engines' liveness series (under the name the vLLM profile in use gives it)."""
        return b.selector(self.vllm_name(self.catalog.vllm_liveness), self.vsel, *matchers)

    def count(self, expr: str) -> int:
        return self.ask.count(b.agg("count", [], expr))


Run = Callable[[ProbeContext], ProbeOutcome]


@dataclass(frozen=True)
class DetectProbe:
    topic: str
    run: Run
    question: str
    needs_fb_series: bool = False  # asked only where FB series exist


# -- dcgm-exporter ------------------------------------------------------------------------------------
def _majority(per: list[tuple]) -> tuple[list[tuple], object]:
    """Of (candidate, series count) pairs in catalog order: the (index, candidate, count) of those
    present, and the one with the most series, the newer (later) on a tie; None when none is."""
    present = [(i, x, c) for i, (x, c) in enumerate(per) if c]
    return present, max(present, key=lambda x: (x[2], x[0]))[1] if present else None


def fb_units(ctx: ProbeContext) -> ProbeOutcome:
    out = ProbeOutcome("dcgm.fb_units")
    counts = ctx.fb_name_counts
    per = [(n, counts.get(n.name, 0)) for n in ctx.fb_names]
    old = sum(counts.get(name, 0) for name in ctx.old_namespace_names)
    out.counts["dcgm"] = {f"fb_used_{n.profile.name}_series": c for n, c in per}
    out.counts["dcgm"]["old_namespace_series"] = old
    present, pick = _majority(per)
    if len(present) > 1:
        twins = TwinNames(ctx, pick)
        out.suggested["dcgm.fb_units"] = twins.pick
        named = " and ".join(
            f"{c} {'series ' if k == 0 else ''}named {n.name} ({n.era})"
            for k, (_, n, c) in enumerate(present)
        )
        out.warning(
            f"mid-upgrade: {named}; the FB alerts read one name set only, so until every exporter runs "
            f"the same version part of the fleet is covered by GPUFramebufferMetricsMissing only; "
            f"suggesting the majority, {twins.pick}"
        )
        twins.report(out)
    elif present:
        [(_, n, c)] = present
        twins = TwinNames(ctx, n)
        out.suggested["dcgm.fb_units"] = twins.pick
        out.info(f"{c} series named {n.name} ({n.era})")
        twins.report(out)
    else:
        scope = f" matching selectors.dcgm {ctx.dsel!r}" if ctx.dsel else ""
        names = " or ".join(n.name for n in ctx.fb_names)
        out.warning(f"no {names} series{scope}; keeping the configured fb_units")
    if old:
        old_names = ", ".join(name for name in ctx.old_namespace_names if counts.get(name))
        out.warning(
            f"{old} series named {old_names}: an exporter runs with -o/--use-old-namespace (1.x names, "
            "labels uuid/pod_name); servewatch reads the DCGM_FI_* names, so drop -o",
            "dcgm.names",
        )
    return out


def own_names(profiles: list[ExporterProfile]) -> dict[str, list[str]]:
    """Profile name -> the names it gives fields that every other one of `profiles` names otherwise
    (exporter 4.10's PCIe and NVLink ..._BYTES_PER_SECOND against 4.9's ..._BYTES)."""
    return {
        p.name: sorted(
            n.name
            for f, n in p.metrics.items()
            if all(q.has(f) and q.metric(f) != n.name for q in profiles if q is not p)
        )
        for p in profiles
    }


class TwinNames:
    """Which of the profiles that name the framebuffer `fb` alike a Prometheus holds, told apart by
    the names only one of them gives a field: the one with the most series under its own names (the
    newer on a tie); with none, the configured profile if it is one of them, else the first. A
    profile whose FB name no other shares is picked without a query."""

    def __init__(self, ctx: ProbeContext, fb: FbName):
        self.twins = ctx.fb_twins(fb)
        self.own = own_names(self.twins) if len(self.twins) > 1 else {}
        self.found: dict[str, int] = {}
        if self.own:
            names = [n for ns in self.own.values() for n in ns]
            expr = b.agg("count", ["__name__"], b.selector("", f'__name__=~"{regex(names)}"', ctx.dsel))
            self.found = {
                r["metric"].get("__name__", ""): int(float(r["value"][1])) for r in ctx.ask.rows(expr)
            }
        self.per = [(p, sum(self.found.get(n, 0) for n in self.own.get(p.name, ()))) for p in self.twins]
        self.present, picked = _majority(self.per)
        if picked is not None:
            self.pick = picked.name
        else:
            configured = ctx.current["dcgm"]["fb_units"]
            self.pick = configured if configured in {p.name for p in self.twins} else self.twins[0].name

    def _named(self, profile: ExporterProfile) -> str:
        return ", ".join(n for n in self.own[profile.name] if self.found.get(n))

    def report(self, out: ProbeOutcome) -> None:
        """The counts and the finding that say why `pick` (nothing for a profile without twins)."""
        if not self.own:
            return
        for p, c in self.per:
            out.counts["dcgm"][f"{p.name}_only_name_series"] = c
        between = " and ".join(p.name for p in self.twins)
        if not self.present:
            names = " or ".join(n for ns in self.own.values() for n in ns)
            out.info(
                f"{between} name the framebuffer alike and no {names} series tells them apart (the "
                f"panels reading those stay empty either way); suggesting {self.pick}"
            )
        elif len(self.present) > 1:
            named = " and ".join(
                f"{c} series named {self._named(p)} ({p.name}, exporter {p.exporter})"
                for _, p, c in self.present
            )
            out.warning(
                f"mid-upgrade: {named}; the PCIe panel reads one name set only (the NVLink panel "
                f"reads the total both name alike); suggesting the majority, {self.pick}"
            )
        else:
            [(_, p, c)] = self.present
            out.info(f"{c} series named {self._named(p)} ({p.name}, exporter {p.exporter})")


def hostname_label(ctx: ProbeContext) -> ProbeOutcome:
    out = ProbeOutcome("dcgm.hostname_label")
    spellings = ctx.dcgm.host_labels  # spelling -> exporter versions
    seen = {label: ctx.count(ctx.fb(f'{label}!=""')) for label in spellings}
    out.counts["dcgm"] = {f"hostname_label_{label}": n for label, n in seen.items()}
    present = [label for label, n in seen.items() if n]
    current = ctx.current["dcgm"]["hostname_label"]
    if len(present) > 1:
        most = max(seen.values())
        leaders = [label for label in present if seen[label] == most]
        pick = current if current in leaders else leaders[0]  # the configured one on a tie
        out.suggested["dcgm.hostname_label"] = pick
        carry = ", ".join(
            f"{seen[label]} {'FB series ' if k == 0 else ''}carry {label} "
            f"({'exporter ' if k == 0 else ''}{spellings[label]})"
            for k, label in enumerate(present)
        )
        out.warning(
            f"mixed spellings (mid-upgrade): {carry}; the rules carry both, the setting only picks the one "
            f"descriptions and dashboard variables show; suggesting the majority, {pick}"
        )
    elif present:
        [label] = present
        out.suggested["dcgm.hostname_label"] = label
        out.info(f"all {seen[label]} FB series carry {label}")
    else:
        out.info(
            f"no FB series carries {' or '.join(spellings)} (exporter run with -n/--no-hostname); "
            "keeping the configured hostname_label"
        )
    return out


def workload_labels(ctx: ProbeContext) -> ProbeOutcome:
    """exported_pod (honorLabels false) or a workload pod in `pod` (honorLabels true)."""
    out = ProbeOutcome("dcgm.workload_labels")
    exported_pod = ctx.dcgm.workload_labels["exported"].pod
    pod = ctx.dcgm.workload_labels["plain"].pod
    exported = ctx.count(ctx.fb(f'{exported_pod}!=""'))
    with_pod = ctx.count(ctx.fb(f'{pod}!=""'))
    # a `pod` that is no dcgm-exporter target's own pod is the workload's
    workload_pod = ctx.count(
        b.unless(ctx.fb(f'{pod}!=""'), b.selector("up", ctx.config.targets["dcgm"]), [pod])
    )
    out.counts["dcgm"] = {
        f"{exported_pod}_series": exported,
        f"{pod}_series": with_pod,
        f"workload_{pod}_series": workload_pod,
    }
    if exported:
        out.suggested["dcgm.workload_labels"] = "exported"
        out.info(f"{exported} FB series carry {exported_pod} (ServiceMonitor with honorLabels false)")
    elif workload_pod:
        out.suggested["dcgm.workload_labels"] = "plain"
        out.info(
            f"{workload_pod} FB series carry a workload pod in `{pod}` and none {exported_pod} "
            "(honorLabels true)"
        )
    else:
        out.info(
            "unknown: no FB series carries a workload pod (no pod mapping, or every GPU idle); "
            "keeping the configured workload_labels"
        )
    return out


def mig(ctx: ProbeContext) -> ProbeOutcome:
    out = ProbeOutcome("dcgm.mig")
    instance, uuid = ctx.dcgm.labels.mig_instance, ctx.dcgm.labels.uuid
    n = ctx.count(ctx.fb(f'{instance}!=""'))
    out.counts["dcgm"] = {"mig_instance_series": n}
    if n:
        out.info(
            f"{n} FB series are MIG instances ({instance}); identity.dcgm must keep {instance} next to {uuid}"
        )
        if instance not in ctx.config.identity.dcgm:
            out.warning(
                f"MIG instances present but identity.dcgm lacks {instance}: instances of one GPU collide",
                "identity.dcgm",
            )
    return out


def duplicates(ctx: ProbeContext) -> ProbeOutcome:
    """GPUs (or MIG instances) whose FB series come from more than one scrape target."""
    out = ProbeOutcome("dcgm.duplicates")
    gpu = [ctx.dcgm.labels.uuid, ctx.dcgm.labels.mig_instance]
    per_target = b.agg("count", [*gpu, "job", "instance"], ctx.fb())
    dup = b.compare(b.agg("count", gpu, per_target), ">", 1)
    rows = ctx.ask.rows(b.agg("group", [*gpu, "job", "instance"], b.only_where(ctx.fb(), dup, gpu)))
    twice: dict[tuple, list[str]] = {}
    for r in rows:
        m = r["metric"]
        key = (m.get(gpu[0], ""), m.get(gpu[1], ""))
        twice.setdefault(key, []).append(f"{m.get('job', '')}/{m.get('instance', '')}")
    out.counts["dcgm"] = {"gpus_scraped_twice": len(twice)}
    for (uuid, instance), where in sorted(twice.items())[:SHOW_MAX]:
        what = uuid + (f" {gpu[1]} {instance}" if instance else "")
        out.warning(
            f"{what} is scraped by {len(where)} targets: {', '.join(sorted(where))} "
            "(rules deduplicate; fix the scrape config to halve the series)"
        )
    if len(twice) > SHOW_MAX:
        out.warning(f"... and {len(twice) - SHOW_MAX} more GPUs scraped twice")
    return out


# -- both sources ------------------------------------------------------------------------------------
def targets(ctx: ProbeContext) -> ProbeOutcome:
    """`up` series per configured target selector; a job selector suggested when none matches."""
    out = ProbeOutcome("targets")
    for src, probe in (("dcgm", ctx.fb()), ("vllm", ctx.vllm())):
        selector = ctx.config.targets[src]
        up_sel = b.selector("up", selector)
        n_up = ctx.count(up_sel)
        n_ok = ctx.count(b.compare(up_sel, "==", 1))
        out.counts[src] = {"up_series": n_up, "up_series_up": n_ok}
        jobs = sorted(r["metric"].get("job", "") for r in ctx.ask.rows(b.agg("count", ["job"], probe)))
        topic = f"targets.{src}"
        if n_up:
            report = out.info if n_ok == n_up else out.warning
            report(f"{n_up} up series match {selector!r}, {n_ok} of them up", topic)
        elif jobs:
            out.suggested[topic] = f'job=~"{regex([j for j in jobs if j]) or ".+"}"'
            out.differs(
                f"no up series match {selector!r} although {src} series come from "
                f"job(s) {', '.join(jobs)}: {DOWN_ALERT[src]} would see nothing",
                topic,
            )
        else:
            out.warning(f"no up series match {selector!r}", topic)
    return out


def cluster_label(ctx: ProbeContext) -> ProbeOutcome:
    out = ProbeOutcome("cluster_label")
    label = ctx.config.cluster_label or CLUSTER_HINT
    have = ctx.count(ctx.fb(f'{label}!=""')) + ctx.count(ctx.vllm(f'{label}!=""'))
    out.counts["cluster_label_series"] = have
    if ctx.config.cluster_label:
        if not have and (ctx.fb_series or ctx.vllm_series):
            out.warning(f"cluster_label is {label!r} but no FB or vLLM series carries it")
    elif have:
        out.suggested["cluster_label"] = CLUSTER_HINT
        out.differs(
            f"{have} FB/vLLM series carry a {CLUSTER_HINT!r} label but cluster_label is null: "
            "rules would aggregate across clusters"
        )
    return out


# -- vLLM -------------------------------------------------------------------------------------------
def vllm_identity(ctx: ProbeContext) -> ProbeOutcome:
    """Whether the liveness series carry namespace and pod (scraped through Kubernetes)."""
    out = ProbeOutcome("identity.vllm")
    live, running = ctx.catalog.vllm_liveness, ctx.vllm_series
    with_k8s = ctx.count(ctx.vllm('namespace!=""', 'pod!=""')) if running else 0
    short = live.split(":", 1)[-1]
    out.counts["vllm"] = {f"{short}_series": running, "with_namespace_and_pod": with_k8s}
    identity = ctx.current["identity"]
    if not running:
        scope = f" matching {ctx.vsel!r}" if ctx.vsel else ""
        out.warning(
            f"no {live} series{scope} (vLLM down, not scraped, or run with --disable-log-stats)", "vllm"
        )
    elif with_k8s < running and "instance" not in ctx.config.identity.vllm:
        # job and instance take the places of namespace and pod, which keeps the shape the dashboards need
        stand_in = {"namespace": "job", "pod": "instance"}
        out.suggested["identity.vllm"] = [stand_in.get(x, x) for x in identity["vllm"]]
        out.suggested["identity.model"] = [stand_in.get(x, x) for x in identity["model"]]
        why = (
            "none carries namespace and pod (not scraped through Kubernetes)"
            if with_k8s == 0
            else f"{running - with_k8s} of them lack namespace or pod"
        )
        out.differs(
            f"{running} {live} series, {why}: engines of different "
            "servers would merge; identify engines by job and instance instead"
        )
    else:
        out.info(f"{running} {live} series, {with_k8s} with namespace and pod")
    return out


def vllm_profile(ctx: ProbeContext) -> ProbeOutcome:
    """Which vLLM profile's names the engines' series go by (KServe renames them kserve_vllm:...)."""
    out = ProbeOutcome("vllm_profile")
    counts = ctx.live_name_counts
    out.counts["vllm"] = {f"liveness_{p}_series": c for p, c in counts.items()}
    present = {p: c for p, c in counts.items() if c}
    if not present:
        return out  # identity.vllm warns that no engine is seen
    pick = ctx.vllm_profile
    out.suggested["vllm_profile"] = pick
    named = ", ".join(
        f"{c} named {ctx.catalog.vllm_profiles[p].metric(ctx.catalog.vllm_liveness)} ({p})"
        for p, c in present.items()
    )
    if len(present) > 1:
        out.warning(
            f"engines' series under two profiles' names: {named}; the rules read one name set only, so "
            f"part of the fleet is covered by VLLMMetricsAbsent only; suggesting the majority, {pick}"
        )
    else:
        out.info(f"engines' liveness series {named}")
    return out


def _version(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def vllm_removed_names(ctx: ProbeContext) -> ProbeOutcome:
    """Metric names the catalog lists as removed from vLLM that a target still exposes."""
    out = ProbeOutcome("vllm.version")
    renamed = {old: r for old, r in ctx.catalog.renamed.items() if old.startswith("vllm:")}
    if not renamed:
        return out
    pattern = "|".join(f"{regex([n])}(_bucket|_sum|_count)?" for n in sorted(renamed))
    rows = ctx.ask.rows(b.agg("count", ["__name__"], b.selector("", f'__name__=~"{pattern}"', ctx.vsel)))
    gone: dict[str, int] = {}
    for r in rows:
        rename = ctx.catalog.rename_of(r["metric"].get("__name__", ""))
        if rename is not None:
            gone[rename.old] = gone.get(rename.old, 0) + int(float(r["value"][1]))
    out.counts["vllm"] = {"removed_metric_series": sum(gone.values())}
    if gone:
        newest = max((renamed[n].gone_in for n in gone), key=_version)
        listed = ", ".join(f"{n} ({c} series, gone in {renamed[n].gone_in})" for n, c in sorted(gone.items()))
        out.warning(
            f"removed vLLM metric names still exposed: {listed}; this vLLM is older than "
            f"{newest} and the rules (written for 0.25.0) miss it"
        )
    return out


# -- deployment identity: role and track ------------------------------------------------------------
def _values_of(ctx: ProbeContext, label: str) -> dict[str, int]:
    """label value -> engines' liveness series carrying it."""
    rows = ctx.ask.rows(b.agg("count", [label], ctx.vllm(f'{label}!=""')))
    return {r["metric"].get(label, ""): int(float(r["value"][1])) for r in rows}


def _listed(values: dict[str, int]) -> str:
    return ", ".join(f"{v} ({n})" for v, n in sorted(values.items()))


def _configured(ctx: ProbeContext, out: ProbeOutcome, field: str, label: str, blind: str) -> dict[str, int]:
    """The values of a configured deployment label; a warning when no engine carries it."""
    values = _values_of(ctx, label)
    out.counts["vllm"] = {f"{field}_series": sum(values.values())}
    if not values and ctx.vllm_series:
        out.warning(
            f"{field}.label is {label!r} but no {ctx.catalog.vllm_liveness} series carries it: {blind}"
        )
    return values


def _carried(ctx: ProbeContext, out: ProbeOutcome, field: str, sources, why: str):
    """The first known source whose label the engines carry, with its values (config unset)."""
    for source in sources:
        values = _values_of(ctx, source.label)
        if values:
            out.counts["vllm"] = {f"{field}_series": sum(values.values())}
            out.differs(
                f"{sum(values.values())} engines carry {source.label} ({source.source}): {_listed(values)}; "
                f"{field} is null, so {why}"
            )
            return source, values
    return None, {}


def role(ctx: ProbeContext) -> ProbeOutcome:
    """Which label carries the prefill/decode role: the configured one, or a known tool's."""
    out = ProbeOutcome("role")
    configured = ctx.config.role
    if configured is not None:
        blind = "every role-scoped signal (requests, KV cache, queueing, inter-token latency) reads nothing"
        values = _configured(ctx, out, "role", configured.label, blind)
        odd = {v: n for v, n in values.items() if not any(v in vs for vs in configured.values.values())}
        if odd:
            out.warning(
                f"{configured.label} values {_listed(odd)} name no role in role.values: "
                "those engines are left out of every role-scoped signal"
            )
        elif values:
            out.info(f"{configured.label}: {_listed(values)}")
        return out
    why = "prefill and decode engines merge and each request counts twice"
    source, values = _carried(ctx, out, "role", deployment_labels.load().roles, why)
    if source is not None:
        mapped: dict[str, list[str]] = {}
        for value in sorted(values):
            if source.role_of(value) is not None:
                mapped.setdefault(source.role_of(value), []).append(value)
        out.suggested["role"] = {"label": source.label, "values": dict(sorted(mapped.items()))}
    return out


def track(ctx: ProbeContext) -> ProbeOutcome:
    """Which label tells the tracks (stable, canary, revisions) of one model apart."""
    out = ProbeOutcome("track")
    configured, facts = ctx.config.track, deployment_labels.load()
    if configured is not None:
        blind = "every engine counts as one track and the canary alerts have no stable track to compare with"
        values = _configured(ctx, out, "track", configured.label, blind)
        if values and configured.stable not in values:
            out.warning(
                f"no engine is on the stable track {configured.stable!r} ({configured.label}: "
                f"{_listed(values)}): the canary alerts have nothing to compare with"
            )
        elif values:
            out.info(f"{configured.label}: {_listed(values)}")
        return out
    why = "an alert about a canary names the model, stable and canary alike"
    source, values = _carried(ctx, out, "track", facts.tracks, why)
    if source is not None:
        stable = next((v for v in facts.stable_values if v in values), None)
        out.suggested["track"] = {
            "label": source.label,
            "stable": stable or max(sorted(values), key=values.get),
        }
    return out


# -- the client's side: a gateway or frontend in front of vLLM -----------------------------------------
def _client_series(ctx: ProbeContext, name: str, selector: str = "") -> list[dict]:
    """The series of a client source's TTFT histogram (its _count, or the native histogram itself)."""
    return ctx.ask.rows(b.selector("", f'__name__=~"{regex([f"{name}_count", name])}"', selector))


def _model_label(ctx: ProbeContext, series: list[dict]) -> str | None:
    """The label of a client source's series whose values name the models vLLM engines serve."""
    rows = ctx.ask.rows(b.agg("count", ["model_name"], ctx.vllm()))
    served = {r["metric"].get("model_name") for r in rows}
    shared: dict[str, int] = {}
    for row in series:
        for label, value in row["metric"].items():
            if label != "__name__" and value in served:
                shared[label] = shared.get(label, 0) + 1
    return max(sorted(shared), key=shared.get) if shared else None


def _old_gateway_names(ctx: ProbeContext, old: list[str], out: ProbeOutcome) -> None:
    """Warn of gateway series still exposed under a name the catalog lists as renamed, each with
    its new name: a query on the old one reads nothing once the gateway stops exporting it. Only
    the series the configured selector keeps: another team's gateway is not this deployment's."""
    names = f'__name__=~"{regex(old)}(_count)?"'
    expr = b.agg("count", ["__name__"], b.selector("", names, ctx.config.selector("gateway")))
    exposed = sorted({r["metric"].get("__name__", "").removesuffix("_count") for r in ctx.ask.rows(expr)})
    if exposed:
        renames = [ctx.catalog.renamed[n] for n in exposed if n in ctx.catalog.renamed]
        named = "; ".join(f"{r.old} is now {r.replacement} ({r.gone_in})" for r in renames)
        out.warning(
            f"older gateway metric names are exposed: {named}; servewatch reads only the new names, and a "
            "query on an old one reads nothing once the gateway stops exporting it as a twin"
        )


def client_side(ctx: ProbeContext) -> ProbeOutcome:
    """Which gateway or frontend source (catalog/gateway.yaml) measures the client's latency: the
    configured one, or the first catalogued source whose TTFT histogram is scraped."""
    out = ProbeOutcome("client_side")
    configured = ctx.config.client_side
    replaced = {n: ctx.catalog.lookup(r.replacement or "") for n, r in ctx.catalog.renamed.items()}
    old = [n for n, entry in replaced.items() if entry is not None and entry.source == "gateway"]
    if old:
        _old_gateway_names(ctx, old, out)
    if configured is not None:
        ttft = configured.metric("ttft")
        series = _client_series(ctx, ttft, configured.selector)
        out.counts["gateway"] = {"client_ttft_series": len(series)}
        if not series:
            out.warning(
                f"client_side.source is {configured.source} but no {ttft} series is scraped"
                f"{' with ' + repr(configured.selector) if configured.selector else ''}: the client-side "
                "TTFT alert reads nothing and VLLMClientLatencyMetricsMissing fires for every served model"
            )
        elif not any(configured.label in r["metric"] for r in series):
            out.warning(f"no {ttft} series carries client_side.model_label {configured.label!r}")
        else:
            out.info(f"{configured.source}: {len(series)} {ttft} series")
        _pools(ctx, configured.client, configured.selector, out)
        return out
    for source in ctx.catalog.clients.values():
        ttft = source.metric("ttft")
        series = _client_series(ctx, ttft)
        if not series:
            continue
        out.counts["gateway"] = {"client_ttft_series": len(series)}
        label = _model_label(ctx, series) or source.model_label
        out.differs(
            f"{len(series)} {ttft} series ({source.name}) measure first tokens at the client's side; "
            "client_side is null, so the TTFT alerts read only the engines' own view"
        )
        suggested = {"source": source.name}
        if label is not None and label != source.model_label:
            suggested["model_label"] = label
        elif label is None:
            out.warning(
                f"no label of {ttft} names a model the vLLM engines serve: set client_side.model_label"
            )
        out.suggested["client_side"] = suggested
        _thresholds_at(ctx, source, out)
        return out
    return out


def _thresholds_at(ctx: ProbeContext, source, out: ProbeOutcome) -> None:
    """The latency SLO thresholds (per-model ones too) the suggested source has no bucket at, where
    the catalog lists its bounds: an SLO that leaves sli.side out moves there with the suggestion,
    and generate refuses the threshold (validation/slo_checks.py), so say so now."""
    for name, slo in sorted(ctx.slos.items()):
        quantity = ctx.catalog.client_quantity(getattr(slo.sli, "histogram", ""))
        twin = ctx.catalog.lookup(source.metric(quantity) or "") if quantity else None
        if twin is None or not twin.buckets:
            continue
        thresholds = [slo.sli.threshold] + [o.threshold for o in slo.per_model.values() if o.threshold]
        for problem in filter(None, (bound_problem(twin, t) for t in dict.fromkeys(thresholds))):
            out.warning(
                f"slos.{name}: with client_side {{source: {source.name}}} an SLO that leaves sli.side out "
                f"is measured at the client, and {problem}: generate refuses it; set a bound {source.name} "
                "has, or sli.side: instance"
            )


def _pools(ctx: ProbeContext, source, selector: str, out: ProbeOutcome) -> None:
    """How many inference pools the configured source reports, where it documents pool gauges: with
    none, VLLMInferencePoolNoReadyPods reads nothing."""
    ready = source.metric("pool_ready_pods")
    if ready is None:
        return
    pools = ctx.count(b.selector(ready, selector))
    out.counts["gateway"] = {**out.counts.get("gateway", {}), "inference_pool_series": pools}
    if not pools:
        out.warning(
            f"{source.name} documents {ready} but no series is scraped: VLLMInferencePoolNoReadyPods "
            "reads nothing (an older endpoint picker, or its metrics port not scraped)"
        )
    else:
        out.info(f"{source.name}: {pools} {ready} series (one per inference pool and gateway pod)")


def histogram_form(ctx: ProbeContext) -> ProbeOutcome:
    """Whether vLLM's histograms are stored classic (`_bucket` per `le`) or native (one series per
    histogram, as `convert_classic_histograms_to_nhcb` stores them), and the matching
    `config.histograms`. A series named like the histogram itself is a native one: classic
    histograms have only their _bucket, _count and _sum series."""
    out = ProbeOutcome("histograms")
    names = sorted(
        ctx.vllm_name(n)
        for n, m in ctx.catalog.metrics.items()
        if m.type == "histogram" and m.source == "vllm"
    )
    histograms = b.selector("", f'__name__=~"{regex(names)}"', ctx.vsel)
    buckets = b.selector("", f'__name__=~"{regex([f"{n}_bucket" for n in names])}"', ctx.vsel)
    classic, native = ctx.count(buckets), ctx.count(histograms)
    out.counts["vllm"] = {"classic_bucket_series": classic, "native_histogram_series": native}
    forms = {(True, False): "classic", (False, True): "native", (True, True): "both"}
    form = forms.get((classic > 0, native > 0))
    if form is None:
        out.info("no vLLM histogram series, classic or native: nothing to tell the form from")
        return out
    out.suggested["histograms"] = form
    if form == "both":
        out.info(
            f"{classic} classic bucket series and {native} native histograms: histograms: both "
            "reads either (native where an engine has it)"
        )
    elif form == "native":
        out.info(f"{native} native histograms and no _bucket series (convert_classic_histograms_to_nhcb)")
    else:
        out.info(f"{classic} classic bucket series and no native histograms")
    return out


def slo_buckets(ctx: ProbeContext) -> ProbeOutcome:
    """Models serving a latency SLO's histogram (its count is there) without the bucket at the SLO's
    threshold: a relabelling dropped it, and their SLI is absent (slo/kinds.py)."""
    out = ProbeOutcome("slos")
    sb = SignalBuilder(ctx.vllm_config)
    grouping = sb.labels.identity("model")
    x = SloExprs(sb)
    for name, slo in sorted(ctx.slos.items()):
        kind = kind_of(slo.sli)
        if kind.absent_good_is_zero:
            continue
        # at the client, the gateway's histogram with its model label read as model_name
        histogram = sb.metric_name(slo.sli.reads)
        named = sb.labels.as_model_name if slo.side == "client" else (lambda expr: expr)
        for matcher, threshold in x.branches(slo, kind.param):
            events = kind.events(sb, slo.sli, threshold, matcher)
            served = b.agg("group", grouping, named(events.valid))
            good = b.agg("group", grouping, named(events.good))
            rows = ctx.ask.rows(b.unless(served, good, grouping))
            if not rows:
                continue
            models = ", ".join(sorted("/".join(r["metric"].get(k, "") for k in grouping) for r in rows))
            out.warning(
                f"SLO {name}: {len(rows)} model(s) export {histogram}_count but not "
                f'{histogram}_bucket{{le="{le_value(threshold)}"}}, which the SLO counts good '
                f"events from (a relabelling dropped it?): their SLI is absent: {models}",
                "slos",
            )
    return out


PROBES: tuple[DetectProbe, ...] = (
    DetectProbe(
        "dcgm.fb_units",
        fb_units,
        "which exporter profile's FB names exist (PCIe/NVLink names where profiles share them; -o names)",
    ),
    DetectProbe("dcgm.hostname_label", hostname_label, "which host label spellings FB series carry", True),
    DetectProbe("dcgm.workload_labels", workload_labels, "exported_pod or a workload pod in `pod`", True),
    DetectProbe("dcgm.mig", mig, "FB series of MIG instances", True),
    DetectProbe("dcgm.duplicates", duplicates, "GPUs scraped by more than one target", True),
    DetectProbe("targets", targets, "up series per configured target selector"),
    DetectProbe("vllm_profile", vllm_profile, "vLLM's own series names or KServe's kserve_ ones"),
    DetectProbe("identity.vllm", vllm_identity, "whether vLLM series carry namespace and pod"),
    DetectProbe("vllm.version", vllm_removed_names, "removed vLLM metric names still exposed"),
    DetectProbe("histograms", histogram_form, "vLLM histograms stored classic (_bucket) or native"),
    DetectProbe("cluster_label", cluster_label, "a cluster label on FB or vLLM series"),
    DetectProbe("role", role, "which label carries the prefill/decode role of vLLM engines"),
    DetectProbe("track", track, "which label tells the stable and canary tracks of a model apart"),
    DetectProbe("client_side", client_side, "which gateway or frontend source measures client-side latency"),
    DetectProbe("slos", slo_buckets, "latency SLO buckets missing where their histogram is scraped"),
)
