"""``python -m bench.native``: the fleet bench both ways, classic and native histograms, on one Prometheus.

``make bench-fleet`` backfills its data with promtool, which writes no native histograms. Here a
real Prometheus 3.5 scrapes the fleet's hour instead (``servewatch_testkit.replay``: one 30 s step
per scrape, stamped), with ``convert_classic_histograms_to_nhcb`` and
``always_scrape_classic_histograms``, so it holds every vLLM histogram twice: as classic
``_bucket``/``_count``/``_sum`` series and as one native histogram with custom buckets (NHCB). The
rules and dashboards servewatch generates from the specs with ``histograms: classic`` and with
``histograms: native`` are then measured on the same data, in the same run (bench/README.md).

The two rule sets record under the same names, so the native set's records are renamed
(``<record>:native``, in its rules and dashboards alike) to live side by side; a name does not
change what a query reads. Float records are backfilled over the replayed hour by promtool; records
that hold native histograms cannot be (promtool writes floats only), so both rule sets run live for
``--live-minutes`` after the replay and everything is measured at the last step: a rule reads such a
record at an instant, a dashboard over the hour finds only its live minutes (the report lists them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.replay import NATIVE_FLAG

from . import dashboard_cost, loading, machine, native_report, rule_cost
from .dashboard_cost import Window
from .fleet import (
    REPO,
    SCRAPE_S,
    CpuMeter,
    existing_folder,
    finished,
    int_list,
    generated,
    pick_model,
    shape_for,
    started,
)
from .promstats import Runner, Uncompressed

FORMS = ("classic", "native")
SUFFIX = ":native"  # the native set's records, renamed to live beside the classic set's


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.native", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int_list, default=(1024,), help="fleet sizes in GPUs")
    p.add_argument(
        "--specs",
        type=existing_folder,
        default=REPO / "specs",
        help="the specs both forms are generated from",
    )
    p.add_argument("--minutes", type=int, default=60, help="replayed data length (30 s steps)")
    p.add_argument("--scrape-interval", default="2s", help="how often Prometheus scrapes the replay")
    p.add_argument("--live-minutes", type=float, default=6.0, help="rules evaluated live after the replay")
    p.add_argument("--repeats", type=int, default=5, help="measured runs per query (median)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured runs per query first")
    p.add_argument("--rules-only", action="store_true", help="no dashboards")
    p.add_argument("--label", default=f"native-{datetime.date.today().isoformat()}", help="results file name")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--note", default="", help="free text stored with the results")
    # what shape_for reads; the fleet bench's defaults
    p.set_defaults(engines=None, models=8, engines_per_pod=2, gpus_per_engine=4, mig_share=0.125, model=None)
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ the two outputs


def form_specs(specs: Path, form: str, into: Path) -> Path:
    """A copy of `specs` whose config says ``histograms: <form>``."""
    shutil.copytree(specs, into)
    config = into / "config.yaml"
    doc = yaml.safe_load(config.read_text()) or {}
    doc.setdefault("config", {})["histograms"] = form
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return into


def records(rules_dir: Path) -> list[str]:
    return sorted(
        {r["name"] for g in rule_cost.rule_groups(rules_dir) for r in g["rules"] if r["kind"] == "record"}
    )


def renamed(text: str, names: list[str], suffix: str = SUFFIX) -> str:
    """`text` with every metric name of `names` followed by `suffix` (whole names only: a name that
    is part of a longer one is left alone)."""
    if not names:
        return text
    pattern = re.compile(
        r"(?<![\w:])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w:])"
    )
    return pattern.sub(lambda m: m.group(1) + suffix, text)


def rename_records(outputs: Path, suffix: str = SUFFIX) -> list[str]:
    """Rename every record of ``outputs/rules`` in its rule files and dashboards; returns the names."""
    names = records(outputs / "rules")
    for path in [*(outputs / "rules").glob("*.rules.yaml"), *(outputs / "dashboards").glob("*.json")]:
        path.write_text(renamed(path.read_text(), names, suffix))
    return names


# ------------------------------------------------------------------------------ one fleet size


def run_size(args: argparse.Namespace, i: int, outputs: dict[str, Path], scratch: Path) -> dict:
    shape = shape_for(args, i)
    result: dict = {"shape": shape.summary(), "load_before": machine.load()}
    rule_files = [p for f in FORMS for p in sorted((outputs[f] / "rules").glob("*.rules.yaml"))]
    live = scratch / f"live-{i}"
    with loading.scraped(
        shape, rule_files, live, args.scrape_interval, [NATIVE_FLAG], args.live_minutes
    ) as loaded:
        result.update(loaded.facts)
        result["measured_at"] = at = loaded.at
        result["history"] = {f: history(loaded.prom, outputs[f] / "rules", at, loaded.start) for f in FORMS}
        result.update(measure(args, loaded.prom, outputs, at))
    result["load_after"] = machine.load()
    return result


def history(prom: LocalPrometheus, rules_dir: Path, at: float, start: float) -> dict:
    """Each record's span at `at`: the records whose first sample is later than the replayed hour's
    start plus 10 minutes (the native-histogram ones and those that read them) are listed."""
    short = {}
    for name in records(rules_dir):
        first = prom.query_value(f"min(min_over_time(timestamp({name})[{int(at - start) + 60}s:30s]))", at)
        if first is None:
            short[name] = None
        elif first > start + 600:
            short[name] = round((at - first) / 60, 1)
    return {"records": len(records(rules_dir)), "short": short}


def measure(args: argparse.Namespace, prom: LocalPrometheus, outputs: dict[str, Path], at: float) -> dict:
    groups = {f: rule_cost.rule_groups(outputs[f] / "rules") for f in FORMS}
    runner = Runner(Uncompressed(prom.url), args.repeats, args.warmup)
    cpu = CpuMeter(prom.pid, args.warmup + args.repeats)
    out: dict = {"rules": {}}
    # A-B-A: the side measured first pays for pages nothing has read yet
    for key, form in (("classic_first", "classic"), ("native", "native"), ("classic", "classic")):
        out["rules"][key] = cpu.add(rule_cost.measure(runner, groups[form], at), to="total")
        _log(f"rules {key}: {out['rules'][key]['total']}")
    once = Runner(Uncompressed(prom.url), 1, 0)
    out["floor"] = {f: rule_cost.floor(once, groups[f], at) for f in FORMS}
    if args.rules_only:
        return out
    cpu.mark = machine.cpu_seconds(prom.pid)
    window = Window(at - args.minutes * 60, at, SCRAPE_S, SCRAPE_S)
    model, namespace = pick_model(prom, None, at)
    out["dashboards"] = {}
    for form in FORMS:
        boards = [json.loads(p.read_text()) for p in sorted((outputs[form] / "dashboards").glob("*.json"))]
        out["dashboards"][form] = {
            d["uid"]: cpu.add(dashboard_cost.refresh(prom, runner, d, window), to="all_panels")
            for d in boards
        }
        _log(
            f"dashboards {form}: "
            f"{ {u: v['default_view']['samples'] for u, v in out['dashboards'][form].items()} }"
        )
    out["model"] = {"model_name": model, "namespace": namespace}
    return out


def _log(msg: str) -> None:
    print(f"[bench-native {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = started(
        args,
        {
            "replay_scrape_interval": args.scrape_interval,
            "live_minutes": args.live_minutes,
            "specs": str(args.specs),
            "renamed_suffix": SUFFIX,
        },
    )
    with tempfile.TemporaryDirectory(prefix="bench-native-specs-") as tmp:
        scratch = Path(tmp)
        outputs = {}
        for form in FORMS:
            outputs[form] = scratch / form
            generated(form_specs(args.specs, form, scratch / f"specs-{form}"), outputs[form])
        results["settings"]["renamed_records"] = len(rename_records(outputs["native"]))
        for i in range(len(args.gpus)):
            results["sizes"].append(run_size(args, i, outputs, scratch))
    path = finished(args, results)
    (args.out / f"{args.label}.md").write_text(native_report.render(results))
    _log(f"wrote {path} and {path.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
