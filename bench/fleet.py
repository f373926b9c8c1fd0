"""``make bench-fleet``: servewatch's rules and dashboards measured on a synthetic fleet in a real
Prometheus 3.5, at several fleet sizes, next to vLLM's and NVIDIA's dashboards.

Per size: the fleet (``servewatch_testkit.synth.scaled_fleet``) is loaded into Prometheus with the
history of the generated recording rules, backfilled as TSDB blocks or (``--load scrape``) scraped
into the head as a running Prometheus holds its recent hours (``bench/loading.py``). Then its
query statistics give: one evaluation of every rule group at the last sample; a refresh of
every dashboard over the hour (default view, and one model selected); the anchor dashboards with
the same model; the quantities both show. Last, ``servewatch generate`` is timed for the default
specs and N deployments. Writes ``<out>/<label>.json`` and, through ``bench/report.py``,
``<label>.md`` and ``<label>.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "generator"))

from servewatch import tools  # noqa: E402
from servewatch_testkit.localprom import LocalPrometheus  # noqa: E402
from servewatch_testkit.synth.scaled_fleet import FleetShape, Identity  # noqa: E402

from . import (  # noqa: E402
    anchors,
    dashboard_cost,
    generation_cost,
    interleave,
    loading,
    machine,
    report,
    rule_cost,
)
from .dashboard_cost import Window  # noqa: E402
from .promstats import Runner, Uncompressed  # noqa: E402

SCRAPE_S = 30  # the fleet's scrape interval and the data source's timeInterval (dashboards/provisioning)


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None


def existing_folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder; create it first (mkdir -p {text})")
    return path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int_list, default=(512, 1024, 2048, 4096), help="fleet sizes in GPUs")
    p.add_argument("--engines", type=int_list, help="vLLM engines per size (default: one per 8 GPUs)")
    p.add_argument("--models", type=int, default=8)
    p.add_argument("--engines-per-pod", type=int, default=2, help="data-parallel engines per pod")
    p.add_argument("--gpus-per-engine", type=int, default=4, help="tensor-parallel GPUs per engine")
    p.add_argument("--mig-share", type=float, default=0.125, help="share of hosts in MIG mode")
    p.add_argument("--minutes", type=int, default=60, help="data length (30 s scrape)")
    p.add_argument("--repeats", type=int, default=5, help="measured runs per query (median)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured runs per query first")
    p.add_argument("--model", help="the model selected where one is (default: the first offered)")
    p.add_argument("--deployments", type=int_list, default=(1, 100), help="spec scales for generation time")
    p.add_argument("--label", default=datetime.date.today().isoformat(), help="results file name")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    p.add_argument(
        "--workdir", type=existing_folder, help="where the OpenMetrics text and the TSDB go (default: tmp)"
    )
    p.add_argument("--note", default="", help="free text stored with the results (e.g. the machine's load)")
    p.add_argument(
        "--before",
        metavar="GIT_REF",
        help="also measure the rules/*.rules.yaml of this git ref (with --specs: the rules its generator "
        "makes from that specs folder), on the same data in the same run",
    )
    p.add_argument(
        "--aba",
        action="store_true",
        help="with --before: measure its rules before this tree's as well as after them (A-B-A), "
        "since the side measured first pays for pages the backfill left cold",
    )
    p.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --before: also run each rule whose expression differs, before and after, in "
        "alternation for ROUNDS rounds (both sides under the same load)",
    )
    p.add_argument(
        "--specs",
        type=existing_folder,
        help="measure what servewatch generates from this specs folder instead of the committed "
        "rules/ and dashboards/, on a fleet with the role, track and gateway its config names",
    )
    p.add_argument(
        "--load",
        choices=loading.WAYS,
        default="backfill",
        help="how the fleet's hour reaches Prometheus: promtool's blocks (quick; every query decodes "
        "its series from the block index) or scraped into the head, as on a running Prometheus "
        "(about 10 min at 4,096 GPUs); bench/loading.py",
    )
    p.add_argument(
        "--scrape-interval", default="2s", help="with --load scrape: how often Prometheus scrapes the replay"
    )
    p.add_argument(
        "--rules-only",
        action="store_true",
        help="measure the rules only: no dashboards, anchors or generation time",
    )
    args = p.parse_args(argv)
    if args.engines and len(args.engines) != len(args.gpus):
        p.error("--engines needs one value per --gpus value")
    if args.aba and not args.before:
        p.error("--aba needs --before")
    if args.interleave and not args.before:
        p.error("--interleave needs --before")
    return args


def shape_for(args: argparse.Namespace, i: int, identity: Identity | None = None) -> FleetShape:
    return FleetShape.sized(
        args.gpus[i],
        args.engines[i] if args.engines else None,
        models=args.models,
        engines_per_pod=args.engines_per_pod,
        gpus_per_engine=args.gpus_per_engine,
        mig_share=args.mig_share,
        minutes=args.minutes,
        step=SCRAPE_S,
        identity=identity,
    )


def generated(specs: Path, into: Path) -> Identity:
    """Write what servewatch generates from `specs` under `into` (rules/, dashboards/, ...) and
    return the identity its config names."""
    from servewatch import generate, writer
    from servewatch.errors import ServewatchError

    try:
        model, files = generate.build(specs, out=into)
        writer.write(into, files)
    except ServewatchError as e:
        raise SystemExit(f"bench-fleet: {specs}: {e}") from None
    return Identity.of(model.config)


def pick_model(prom: LocalPrometheus, wanted: str | None, at: float) -> tuple[str, str]:
    """The model to select (and its namespace): ``wanted``, else the first in name order."""
    rows = prom.query("group by (namespace, model_name) (vllm:num_requests_running)", at)
    models = sorted((r["metric"]["model_name"], r["metric"]["namespace"]) for r in rows)
    if not models:
        raise SystemExit("no vllm:num_requests_running in the data: cannot pick a model")
    for name, ns in models:
        if wanted in (None, name):
            return name, ns
    raise SystemExit(f"model {wanted!r} not in the fleet; it has: {', '.join(m for m, _ in models)}")


def compare(anchor_views: dict, one_model: dict) -> list[dict]:
    """Samples touched per quantity: the anchor's panel vs servewatch's, one model selected."""
    rows = []
    for q in anchors.QUANTITIES:
        a = dashboard_cost.panel_cost(anchor_views[q.anchor[0]], q.anchor[1])
        for uid, title in q.servewatch:
            s = dashboard_cost.panel_cost(one_model[uid], title) if uid in one_model else None
            row = {"quantity": q.name, "kind": q.kind, "anchor": f"{q.anchor[0]}: {q.anchor[1]}"}
            row["servewatch"] = f"{uid}: {title}"
            if a is None or s is None:
                row["error"] = "panel not found"
            else:
                row.update(anchor_samples=a.samples, servewatch_samples=s.samples)
                row.update(
                    anchor_eval_ms=round(a.eval_s * 1000, 3), servewatch_eval_ms=round(s.eval_s * 1000, 3)
                )
                row["ratio"] = round(a.samples / s.samples, 3) if s.samples else None
            rows.append(row)
    return rows


def run_size(
    args: argparse.Namespace,
    shape: FleetShape,
    groups: list[dict],
    before: list[dict] | None = None,
    outputs: Path = REPO,
) -> dict:
    """One fleet size: the rules (and the dashboards) of `outputs` (rules/, dashboards/) measured."""
    aba, rules_only = getattr(args, "aba", False), getattr(args, "rules_only", False)
    result: dict = {"shape": shape.summary(), "load_before": machine.load()}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-", dir=args.workdir) as tmp:
        rule_files = sorted((outputs / "rules").glob("*.rules.yaml"))
        if getattr(args, "load", "backfill") == "scrape":
            loader = loading.scraped(shape, rule_files, Path(tmp), args.scrape_interval)
        else:
            loader = loading.backfilled(shape, rule_files, Path(tmp))
        with loader as loaded:
            prom, end = loaded.prom, loaded.at
            window = Window(end - args.minutes * 60, end, SCRAPE_S, SCRAPE_S)
            result.update(loaded.facts)
            runner = Runner(Uncompressed(prom.url), args.repeats, args.warmup)
            cpu = CpuMeter(prom.pid, args.warmup + args.repeats)
            if before and aba:  # the same rules on both sides of this tree's: the order effect shows
                result["rules_before_first"] = cpu.add(rule_cost.measure(runner, before, end), to="total")
                _log(f"rules before, first: {result['rules_before_first']['total']}")
            result["rules"] = cpu.add(rule_cost.measure(runner, groups, end), to="total")
            _log(f"rules: {result['rules']['total']}")
            if before:  # the same data, the same minute: only the rule files differ
                result["rules_before"] = cpu.add(rule_cost.measure(runner, before, end), to="total")
                _log(f"rules before: {result['rules_before']['total']}")
            if before and getattr(args, "interleave", 0):
                pairs = interleave.differing(before, groups)
                api = Uncompressed(prom.url)
                result["interleaved"] = interleave.measure(api, prom.pid, pairs, end, args.interleave)
                _log(f"interleaved: {len(pairs)} rules, {args.interleave} rounds")
            # the least one evaluation must read; samples do not change between runs: measured once
            once = Runner(Uncompressed(prom.url), 1, 0)
            result["rules"]["floor"] = rule_cost.floor(once, groups, end)
            if before:
                result["rules_before"]["floor"] = rule_cost.floor(once, before, end)
            cpu.mark = machine.cpu_seconds(prom.pid)  # not charged to the dashboards
            _log(f"floor: {result['rules']['floor']['samples']} samples per evaluation")
            if rules_only:
                result["load_after"] = machine.load()
                return result
            model, namespace = pick_model(prom, args.model, end)
            result["model"] = {"model_name": model, "namespace": namespace}
            boards = [json.loads(p.read_text()) for p in sorted((outputs / "dashboards").glob("*.json"))]
            result["dashboards"] = {
                d["uid"]: cpu.add(dashboard_cost.refresh(prom, runner, d, window), to="all_panels")
                for d in boards
            }
            one_model = {
                d["uid"]: cpu.add(
                    dashboard_cost.refresh(
                        prom, runner, d, window, pick={"model": model}, prefer={"namespace": namespace}
                    ),
                    to="all_panels",
                )
                if _has_variable(d, "model")
                else result["dashboards"][d["uid"]]  # nothing to select: the same queries
                for d in boards
            }
            result["dashboards_one_model"] = one_model
            result["anchors"] = {
                d["uid"]: cpu.add(
                    dashboard_cost.refresh(prom, runner, d, window, pick={"model_name": model}),
                    to="all_panels",
                )
                for d in (anchors.vllm_example(), anchors.dcgm_exporter())
            }
            result["quantities"] = compare(result["anchors"], one_model)
            _log(
                f"dashboards: { {u: v['default_view']['samples'] for u, v in result['dashboards'].items()} }"
            )
    result["load_after"] = machine.load()
    return result


class CpuMeter:
    """Prometheus' CPU time per run of a measurement (warm-up and measured runs alike): unlike the
    eval times, it does not grow when other processes compete for the cores."""

    def __init__(self, pid: int, runs: int):
        self.pid, self.runs = pid, runs
        self.mark = machine.cpu_seconds(pid)

    def add(self, result: dict, to: str) -> dict:
        now = machine.cpu_seconds(self.pid)
        result[to]["cpu_ms"] = round((now - self.mark) / self.runs * 1000, 1)
        self.mark = now
        return result


def _has_variable(dashboard: dict, name: str) -> bool:
    return any(v.get("name") == name for v in dashboard.get("templating", {}).get("list", []))


def _log(msg: str) -> None:
    print(f"[bench-fleet {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-specs-") as scratch:
        outputs = Path(scratch) if args.specs else REPO
        identity = generated(args.specs, outputs) if args.specs else None
        return _run(args, outputs, identity)


def _run(args: argparse.Namespace, outputs: Path, identity: Identity | None) -> int:
    try:
        shapes = [shape_for(args, i, identity) for i in range(len(args.gpus))]
    except ValueError as e:
        raise SystemExit(f"bench-fleet: {e}") from None
    groups = rule_cost.rule_groups(outputs / "rules")
    before = rule_cost.rule_groups_at(REPO, args.before, args.specs) if args.before else None
    results = started(
        args,
        {
            "step_s": SCRAPE_S,
            "rate_interval": Window(0, 1, SCRAPE_S, SCRAPE_S).macros()["__rate_interval"],
            "rule_interval_s": 30,
            **({"aba": True} if args.aba else {}),
            **({"interleave": args.interleave} if args.interleave else {}),
            **({"rules_only": True} if args.rules_only else {}),
            "load": args.load,
            **({"specs": str(args.specs)} if args.specs else {}),
            **({"before": {"ref": args.before, "commit": before[0]}} if before else {}),
        },
    )
    for shape in shapes:
        results["sizes"].append(run_size(args, shape, groups, before[1] if before else None, outputs))
    if not args.rules_only:
        _log("generation time")
        results["generation"] = generation_cost.run(
            args.specs or REPO / "specs", args.deployments, args.repeats
        )
    path = finished(args, results)
    report.write(results, args.out / f"{args.label}.md", args.out / f"{args.label}.png")
    _log(f"wrote {path} and its report")
    return 0


def started(args: argparse.Namespace, settings: dict) -> dict:
    """A results document of one bench run: its label, note, start time, machine and settings (the
    repeats, warm-up, scrape interval and window of every run, then `settings`)."""
    return {
        "label": args.label,
        "note": args.note,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine.describe(str(tools.ensure("prometheus")), str(tools.ensure("promtool"))),
        "settings": {
            "repeats": args.repeats,
            "warmup": args.warmup,
            "scrape_s": SCRAPE_S,
            "window_s": args.minutes * 60,
            **settings,
        },
        "sizes": [],
    }


def finished(args: argparse.Namespace, results: dict) -> Path:
    """Stamp the end time and write the results as `<out>/<label>.json`; returns that path."""
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.label}.json"
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return path


if __name__ == "__main__":
    raise SystemExit(main())
