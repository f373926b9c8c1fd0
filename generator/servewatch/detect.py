"""`servewatch detect`: ask a live Prometheus which exporter layout it holds and suggest a `config:` block.

Every question is an instant `count(...)` (or `count by`) query over the series the rules read: the
dcgm-exporter FB_USED series (both MiB and byte names), `vllm:num_requests_running` and the `up` series
the config's target selectors match. The answers become a suggested config (dcgm profile, identity,
targets, cluster label) and findings; the exit code says whether the current config already fits:
0 it does, 3 it differs, 1 Prometheus could not be asked.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .catalog import load as load_catalog
from .investigate.cli import ENV_URL, add_connection_args, parse_time
from .investigate.client import Auth, Client, InvestigateError
from .promql import builders as b

EXIT_MATCH, EXIT_ERROR, EXIT_DIFFERS = 0, 1, 3
FB_MIB, FB_BYTES, FB_OLD = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES", "dcgm_fb_used"
VLLM_PROBE = "vllm:num_requests_running"
CLUSTER_HINT = "cluster"
SHOW_MAX = 10
DOWN_ALERT = {"dcgm": "DCGMExporterDown", "vllm": "VLLMMetricsAbsent"}  # twice-scraped GPUs listed at most

DESCRIPTION = f"""Ask a Prometheus which layout the exporters really use (dcgm-exporter FB names and units,
Hostname/hostname, exported_pod/pod, MIG, duplicate scrapes, target selectors, vLLM labels and removed
vLLM metric names) and print a suggested `config:` block with findings, compared with --specs.

Exit codes: 0 the current config matches what was detected, 3 it differs, 1 Prometheus could not be
asked (unreachable, refused, timed out, rejected a query), 2 the specs are invalid.

Credentials come from the environment only (as for `servewatch investigate`); default URL: ${ENV_URL}."""


@dataclass
class Finding:
    topic: str
    level: str  # info | warning | differs
    message: str


@dataclass
class Detection:
    prometheus: str
    at: float | None
    current: dict
    suggested: dict
    counts: dict
    findings: list[Finding] = field(default_factory=list)

    @property
    def differences(self) -> list[dict]:
        out = []
        for key, cur, sug in _leaves(self.current, self.suggested):
            if cur != sug:
                out.append({"field": key, "current": cur, "suggested": sug})
        return out

    @property
    def exit_code(self) -> int:
        return EXIT_DIFFERS if self.differences else EXIT_MATCH

    def as_dict(self) -> dict:
        return json.loads(
            json.dumps(
                {  # plain, unshared values: no YAML anchors
                    "prometheus": self.prometheus,
                    "at": self.at,
                    "matches": not self.differences,
                    "differences": self.differences,
                    "findings": [f.__dict__ for f in sorted(self.findings, key=_finding_key)],
                    "counts": _sorted(self.counts),
                    "config": _sorted(self.suggested),
                }
            )
        )


def _finding_key(f: Finding) -> tuple:
    return ({"differs": 0, "warning": 1, "info": 2}.get(f.level, 3), f.topic, f.message)


def _sorted(d):
    if isinstance(d, dict):
        return {k: _sorted(d[k]) for k in sorted(d)}
    return d


def _leaves(cur: dict, sug: dict, prefix: str = ""):
    for key in sorted(set(cur) | set(sug)):
        c, s = cur.get(key), sug.get(key)
        if isinstance(c, dict) and isinstance(s, dict):
            yield from _leaves(c, s, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", c, s


# -- asking Prometheus -------------------------------------------------------------------------


def _regex(names) -> str:
    """An alternation matching exactly `names`, written for the inside of a PromQL double-quoted string."""
    exact = (re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\1", n) for n in sorted(names))
    return "|".join(exact).replace("\\", "\\\\").replace('"', '\\"')


class _Asker:
    def __init__(self, client: Client, at: float | None):
        self.client, self.at = client, at

    def rows(self, expr: str) -> list[dict]:
        return self.client.query(expr, self.at)

    def count(self, expr: str) -> int:
        """Value of a `count(...)` query; 0 when it returns nothing."""
        rows = self.rows(expr)
        return int(float(rows[0]["value"][1])) if rows else 0


def current_config(config) -> dict:
    return {
        "cluster_label": config.cluster_label,
        "dcgm": {
            "fb_units": config.dcgm.fb_units,
            "hostname_label": config.dcgm.hostname_label,
            "workload_labels": config.dcgm.workload_labels,
        },
        "identity": {"vllm": list(config.identity.vllm), "model": list(config.identity.model)},
        "targets": {"dcgm": config.targets["dcgm"], "vllm": config.targets["vllm"]},
    }


def detect(client: Client, config, at: float | None = None) -> Detection:
    ask = _Asker(client, at)
    cur = current_config(config)
    sug = json.loads(json.dumps(cur))  # deep copy
    counts: dict = {"dcgm": {}, "vllm": {}}
    found: list[Finding] = []
    dsel, vsel = config.selectors.get("dcgm", ""), config.selectors.get("vllm", "")

    def fb(*matchers: str) -> str:
        """Every FB_USED series (MiB and byte names) with extra matchers."""
        return b.selector("", f'__name__=~"{_regex([FB_MIB, FB_BYTES])}"', dsel, *matchers)

    def vllm(*matchers: str) -> str:
        return b.selector(VLLM_PROBE, vsel, *matchers)

    # ---- dcgm: names and units
    names = {
        r["metric"].get("__name__", ""): int(float(r["value"][1]))
        for r in ask.rows(
            b.agg(
                "count",
                ["__name__"],
                b.selector("", f'__name__=~"{_regex([FB_MIB, FB_BYTES, FB_OLD])}"', dsel),
            )
        )
    }
    mib, byt, old = names.get(FB_MIB, 0), names.get(FB_BYTES, 0), names.get(FB_OLD, 0)
    counts["dcgm"].update(
        {"fb_used_mib_series": mib, "fb_used_bytes_series": byt, "old_namespace_series": old}
    )
    total = mib + byt
    if mib and byt:
        sug["dcgm"]["fb_units"] = "bytes" if byt >= mib else "mib"
        found.append(
            Finding(
                "dcgm.fb_units",
                "warning",
                f"mid-upgrade: {mib} series named {FB_MIB} (MiB, exporter <= 4.8) and {byt} named "
                f"{FB_BYTES} (bytes, 4.9); the FB alerts read one name set only, so until every "
                f"exporter runs the same version part of the fleet is covered by "
                f"GPUFramebufferMetricsMissing only; suggesting the majority, {sug['dcgm']['fb_units']}",
            )
        )
    elif mib or byt:
        sug["dcgm"]["fb_units"] = "mib" if mib else "bytes"
        found.append(
            Finding(
                "dcgm.fb_units",
                "info",
                f"{total} series named {FB_MIB if mib else FB_BYTES} "
                f"({'MiB, exporter <= 4.8' if mib else 'bytes, exporter 4.9+'})",
            )
        )
    else:
        found.append(
            Finding(
                "dcgm.fb_units",
                "warning",
                f"no {FB_MIB} or {FB_BYTES} series"
                + (f" matching selectors.dcgm {dsel!r}" if dsel else "")
                + "; keeping the configured fb_units",
            )
        )
    if old:
        found.append(
            Finding(
                "dcgm.names",
                "warning",
                f"{old} series named {FB_OLD}: an exporter runs with -o/--use-old-namespace (1.x names, "
                "labels uuid/pod_name); servewatch reads the DCGM_FI_* names, so drop -o",
            )
        )

    if total:
        # ---- hostname label spelling
        upper = ask.count(b.agg("count", [], fb('Hostname!=""')))
        lower = ask.count(b.agg("count", [], fb('hostname!=""')))
        counts["dcgm"].update({"hostname_label_Hostname": upper, "hostname_label_hostname": lower})
        if upper and lower:
            pick = (
                "Hostname"
                if upper > lower
                else "hostname"
                if lower > upper
                else cur["dcgm"]["hostname_label"]
            )
            sug["dcgm"]["hostname_label"] = pick
            found.append(
                Finding(
                    "dcgm.hostname_label",
                    "warning",
                    f"mixed spellings (mid-upgrade): {upper} FB series "
                    "carry Hostname (exporter <= 4.5.3-4.8.2), "
                    f"{lower} carry hostname (4.6.0-4.8.3+); the rules carry both, the setting only picks "
                    f"the one descriptions and dashboard variables show; suggesting the majority, {pick}",
                )
            )
        elif upper or lower:
            sug["dcgm"]["hostname_label"] = "Hostname" if upper else "hostname"
            found.append(
                Finding(
                    "dcgm.hostname_label",
                    "info",
                    f"all {upper or lower} FB series carry {sug['dcgm']['hostname_label']}",
                )
            )
        else:
            found.append(
                Finding(
                    "dcgm.hostname_label",
                    "info",
                    "no FB series carries Hostname or hostname (exporter run with -n/--no-hostname); "
                    "keeping the configured hostname_label",
                )
            )

        # ---- workload labels
        exported = ask.count(b.agg("count", [], fb('exported_pod!=""')))
        with_pod = ask.count(b.agg("count", [], fb('pod!=""')))
        workload_pod = ask.count(
            b.agg("count", [], b.unless(fb('pod!=""'), b.selector("up", config.targets["dcgm"]), ["pod"]))
        )
        counts["dcgm"].update(
            {"exported_pod_series": exported, "pod_series": with_pod, "workload_pod_series": workload_pod}
        )
        if exported:
            sug["dcgm"]["workload_labels"] = "exported"
            found.append(
                Finding(
                    "dcgm.workload_labels",
                    "info",
                    f"{exported} FB series carry exported_pod (ServiceMonitor with honorLabels false)",
                )
            )
        elif workload_pod:
            sug["dcgm"]["workload_labels"] = "plain"
            found.append(
                Finding(
                    "dcgm.workload_labels",
                    "info",
                    f"{workload_pod} FB series carry a workload pod in `pod` and none exported_pod "
                    "(honorLabels true)",
                )
            )
        else:
            found.append(
                Finding(
                    "dcgm.workload_labels",
                    "info",
                    "unknown: no FB series carries a workload pod (no pod mapping, or every GPU idle); "
                    "keeping the configured workload_labels",
                )
            )

        # ---- MIG and duplicate scrapes
        mig = ask.count(b.agg("count", [], fb('GPU_I_ID!=""')))
        counts["dcgm"]["mig_instance_series"] = mig
        if mig:
            found.append(
                Finding(
                    "dcgm.mig",
                    "info",
                    f"{mig} FB series are MIG instances (GPU_I_ID); "
                    "identity.dcgm must keep GPU_I_ID next to UUID",
                )
            )
            if "GPU_I_ID" not in config.identity.dcgm:
                found.append(
                    Finding(
                        "identity.dcgm",
                        "warning",
                        "MIG instances present but identity.dcgm lacks "
                        "GPU_I_ID: instances of one GPU collide",
                    )
                )
        gpu = ["UUID", "GPU_I_ID"]
        per_target = b.agg("count", [*gpu, "job", "instance"], fb())
        dup = b.compare(b.agg("count", gpu, per_target), ">", 1)
        dups = ask.rows(b.agg("group", [*gpu, "job", "instance"], b.only_where(fb(), dup, gpu)))
        twice: dict[tuple, list[str]] = {}
        for r in dups:
            m = r["metric"]
            twice.setdefault((m.get("UUID", ""), m.get("GPU_I_ID", "")), []).append(
                f"{m.get('job', '')}/{m.get('instance', '')}"
            )
        counts["dcgm"]["gpus_scraped_twice"] = len(twice)
        for (uuid, gid), where in sorted(twice.items())[:SHOW_MAX]:
            what = f"{uuid}" + (f" GPU_I_ID {gid}" if gid else "")
            found.append(
                Finding(
                    "dcgm.duplicates",
                    "warning",
                    f"{what} is scraped by {len(where)} targets: {', '.join(sorted(where))} "
                    "(rules deduplicate; fix the scrape config to halve the series)",
                )
            )
        if len(twice) > SHOW_MAX:
            found.append(
                Finding(
                    "dcgm.duplicates", "warning", f"... and {len(twice) - SHOW_MAX} more GPUs scraped twice"
                )
            )

    # ---- targets
    for src, probe in (("dcgm", fb()), ("vllm", vllm())):
        up_sel = b.selector("up", config.targets[src])
        n_up = ask.count(b.agg("count", [], up_sel))
        n_ok = ask.count(b.agg("count", [], b.compare(up_sel, "==", 1)))
        counts[src].update({"up_series": n_up, "up_series_up": n_ok})
        jobs = sorted(r["metric"].get("job", "") for r in ask.rows(b.agg("count", ["job"], probe)))
        if n_up:
            found.append(
                Finding(
                    f"targets.{src}",
                    "info" if n_ok == n_up else "warning",
                    f"{n_up} up series match {config.targets[src]!r}, {n_ok} of them up",
                )
            )
        elif jobs:
            sug["targets"][src] = f'job=~"{_regex([j for j in jobs if j]) or ".+"}"'
            found.append(
                Finding(
                    f"targets.{src}",
                    "differs",
                    f"no up series match {config.targets[src]!r} although {src} series come from "
                    f"job(s) {', '.join(jobs)}: {DOWN_ALERT[src]} would see nothing",
                )
            )
        else:
            found.append(Finding(f"targets.{src}", "warning", f"no up series match {config.targets[src]!r}"))

    # ---- vLLM
    running = ask.count(b.agg("count", [], vllm()))
    with_k8s = ask.count(b.agg("count", [], vllm('namespace!=""', 'pod!=""'))) if running else 0
    counts["vllm"].update({"num_requests_running_series": running, "with_namespace_and_pod": with_k8s})
    if not running:
        found.append(
            Finding(
                "vllm",
                "warning",
                f"no {VLLM_PROBE} series"
                + (f" matching {vsel!r}" if vsel else "")
                + " (vLLM down, not scraped, or run with --disable-log-stats)",
            )
        )
    elif with_k8s < running and "instance" not in config.identity.vllm:
        # job and instance take the places of namespace and pod, which keeps the shape the dashboards need
        stand_in = {"namespace": "job", "pod": "instance"}
        sug["identity"]["vllm"] = [stand_in.get(x, x) for x in cur["identity"]["vllm"]]
        sug["identity"]["model"] = [stand_in.get(x, x) for x in cur["identity"]["model"]]
        why = (
            "none carries namespace and pod (not scraped through Kubernetes)"
            if with_k8s == 0
            else f"{running - with_k8s} of them lack namespace or pod"
        )
        found.append(
            Finding(
                "identity.vllm",
                "differs",
                f"{running} {VLLM_PROBE} series, {why}: engines of different "
                "servers would merge; identify engines by job and instance instead",
            )
        )
    else:
        found.append(
            Finding(
                "identity.vllm", "info", f"{running} {VLLM_PROBE} series, {with_k8s} with namespace and pod"
            )
        )

    renamed = {old: r for old, r in load_catalog().renamed.items() if old.startswith("vllm:")}
    if renamed:
        pattern = "|".join(f"{_regex([n])}(_bucket|_sum|_count)?" for n in sorted(renamed))
        rows = ask.rows(b.agg("count", ["__name__"], b.selector("", f'__name__=~"{pattern}"', vsel)))
        gone = {}
        for r in rows:
            name = r["metric"].get("__name__", "")
            base = load_catalog().rename_of(name)
            if base is not None:
                gone[base.old] = gone.get(base.old, 0) + int(float(r["value"][1]))
        counts["vllm"]["removed_metric_series"] = sum(gone.values())
        if gone:
            newest = max((renamed[n].gone_in for n in gone), key=_version)
            listed = ", ".join(
                f"{n} ({c} series, gone in {renamed[n].gone_in})" for n, c in sorted(gone.items())
            )
            found.append(
                Finding(
                    "vllm.version",
                    "warning",
                    f"removed vLLM metric names still exposed: {listed}; this vLLM is older than "
                    f"{newest} and the rules (written for 0.25.0) miss it",
                )
            )

    # ---- cluster label
    if config.cluster_label:
        have = ask.count(b.agg("count", [], fb(f'{config.cluster_label}!=""'))) + ask.count(
            b.agg("count", [], vllm(f'{config.cluster_label}!=""'))
        )
        counts["cluster_label_series"] = have
        if not have and (total or running):
            found.append(
                Finding(
                    "cluster_label",
                    "warning",
                    f"cluster_label is {config.cluster_label!r} but no FB or vLLM series carries it",
                )
            )
    else:
        have = ask.count(b.agg("count", [], fb(f'{CLUSTER_HINT}!=""'))) + ask.count(
            b.agg("count", [], vllm(f'{CLUSTER_HINT}!=""'))
        )
        counts["cluster_label_series"] = have
        if have:
            sug["cluster_label"] = CLUSTER_HINT
            found.append(
                Finding(
                    "cluster_label",
                    "differs",
                    f"{have} FB/vLLM series carry a {CLUSTER_HINT!r} label but cluster_label is null: "
                    "rules would aggregate across clusters",
                )
            )

    for d in _leaves(cur, sug):
        if d[1] != d[2] and not any(f.topic == d[0] and f.level == "differs" for f in found):
            found.append(Finding(d[0], "differs", f"configured {d[1]!r}, detected {d[2]!r}"))
    return Detection(client.shown, at, cur, sug, counts, found)


def _version(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text))


# -- output -------------------------------------------------------------------------------------


def _yaml_block(det: Detection) -> str:
    """The suggested `config:` block, with `# was:` on the lines that differ."""
    text = yaml.safe_dump(
        {"config": _sorted(det.suggested)}, sort_keys=True, default_flow_style=False, width=200
    )
    diffs = {d["field"]: d["current"] for d in det.differences}
    out, path = [], []
    for line in text.splitlines():
        m = re.match(r"^( *)([A-Za-z_]+):(.*)$", line)
        if m:
            depth = len(m.group(1)) // 2
            path = path[:depth] + [m.group(2)]
            key = ".".join(path[1:])
            if key in diffs:
                line += f"  # was: {json.dumps(diffs[key])}"
        out.append(line)
    return "\n".join(out) + "\n"


def to_text(det: Detection) -> str:
    lines = [
        f"servewatch detect: {det.prometheus}" + (f" at {det.at:.3f}" if det.at is not None else " (now)"),
        "",
    ]
    for f in sorted(det.findings, key=_finding_key):
        lines.append(f"[{f.level}] {f.topic}: {f.message}")
    lines += ["", "Suggested config (merge into specs/config.yaml):", "", _yaml_block(det).rstrip("\n"), ""]
    n = len(det.differences)
    lines.append(
        "The current config matches what was detected."
        if not n
        else f"{n} setting(s) differ from the current config (exit {EXIT_DIFFERS})."
    )
    return "\n".join(lines) + "\n"


def to_yaml(det: Detection) -> str:
    return yaml.safe_dump(det.as_dict(), sort_keys=False, default_flow_style=False, width=200)


def to_json(det: Detection) -> str:
    return json.dumps(det.as_dict(), indent=2) + "\n"


FORMATS = {"text": to_text, "yaml": to_yaml, "json": to_json}


# -- command line -------------------------------------------------------------------------------


def add_cli(sub) -> None:
    import argparse

    p = sub.add_parser(
        "detect",
        help="detect the exporter layout a Prometheus holds and suggest a config block",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(p)
    p.add_argument("--format", choices=sorted(FORMATS), default="text", help="output format (default: text)")
    p.add_argument("--specs", default="specs", help="specs folder whose config is compared (default: specs)")
    p.set_defaults(func=cmd_detect)


def _fail(message: str) -> int:
    print(f"servewatch: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def cmd_detect(args) -> int:
    from .spec.loader import load

    if not args.prometheus:
        return _fail(f"--prometheus URL is required (or set {ENV_URL})")
    config = load(Path(args.specs)).config  # spec errors: exit 2 through cli.main
    try:
        at = parse_time(args.at)
        with Client(
            args.prometheus,
            Auth.from_env(),
            timeout=args.timeout,
            ca_file=args.ca_file,
            insecure=args.insecure_skip_verify,
        ) as client:
            det = detect(client, config, at)
    except InvestigateError as exc:
        return _fail(str(exc))
    sys.stdout.write(FORMATS[args.format](det))
    sys.stdout.flush()
    return det.exit_code
