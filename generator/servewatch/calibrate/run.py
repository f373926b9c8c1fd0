"""`servewatch calibrate` run: read the sources, judge the steps, propose, print, write."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ..errors import ServewatchError
from ..investigate.cli import connect, parse_time
from ..model import Model
from ..promapi import PromApiError
from ..slo.exprs import quoted
from ..spec.schema import seconds
from . import bench, overrides, report, slo_file
from .history import MODEL, CalibrateHistory, split
from .measures import HISTOGRAMS, Measure, for_histogram, signal_alerts
from .propose import CalibrateResult, Proposer, check_steps, combine, mismatched_loads, sweep
from .targets import CalibrateError, from_slos, parse


def _measures(model, targets, served: str | None) -> list[Measure]:
    """What each step must report: the targets, the SLOs' percentiles and what each alert watches."""
    wanted = {t.measure.key: t.measure for t in targets}
    for t in from_slos(model.slos.slos, "specs", served, model.config.client_side)[0]:
        wanted.setdefault(t.measure.key, t.measure)
    for a in signal_alerts(model):
        signal = model.signal(a.spec.signal)
        if signal.kind == "quantile":
            m = for_histogram(signal.metric, a.spec.quantile)
            if m is not None:
                wanted.setdefault(m.key, m)
    return list(wanted.values())


def _conditions(goodput, served: str | None) -> list[bench.Condition] | None:
    """Per-request limits of a good token: each goodput latency SLO's threshold for the served model
    (a request a bench file can time: first token or end to end); None when one is on another
    histogram."""
    out = []
    for slo in goodput:
        histogram = getattr(slo.sli, "histogram", None)
        if histogram is None:
            continue  # availability: the request succeeded, which every good token needs anyway
        metric = next((k for k, v in HISTOGRAMS.items() if v == histogram), None)
        if metric not in ("ttft", "e2el"):
            return None
        out.append(bench.Condition(metric, float(slo.threshold_of(served))))
    return out


def _one_model(model, name: str):
    """The model with every vLLM selector narrowed to one served model, and the gateway's by its
    model label (GPU series are not: DCGM knows the pod a GPU serves, not the model)."""
    config = model.config
    vllm = ", ".join(m for m in (config.selectors["vllm"], f"{MODEL}={quoted(name)}") if m)
    update: dict = {"selectors": {**config.selectors, "vllm": vllm}}
    client = config.client_side
    if client is not None:
        narrowed = ", ".join(m for m in (client.selector, f"{client.label}={quoted(name)}") if m)
        update["client_side"] = client.model_copy(update={"selector": narrowed})
    return Model(replace(model.spec, config=config.model_copy(update=update)))


def _range(args) -> tuple[float, float, float | None, list[float]]:
    start, sep, end = (args.range or "").partition("..")
    if not sep:
        raise CalibrateError("--prometheus needs --range START..END (the load test's time range)")
    try:
        a, z = parse_time(start), parse_time(end)
        edges = [parse_time(t) for t in args.steps.split(",")] if args.steps else []
    except ServewatchError:
        raise CalibrateError(
            f"--range {args.range!r} / --steps {args.steps or ''!r}: want times as RFC 3339 "
            "(2026-11-30T12:00:00Z), Unix seconds or -30m (ago)"
        ) from None
    if z <= a:
        raise CalibrateError(f"--range {args.range}: the end is not after the start")
    if bool(args.step_every) == bool(args.steps):
        raise CalibrateError("--range needs either --step-every DURATION or --steps T,T,... (not both)")
    if any(not a < t < z for t in edges):
        raise CalibrateError(f"--steps: every boundary must lie inside --range {args.range}")
    every = seconds(args.step_every) if args.step_every else None
    return a, z, every, edges


def calibrate(args) -> int:
    """`servewatch calibrate` with parsed arguments: its exit status."""
    from ..spec.loader import load
    from ..validation import validate

    if not args.bench and not args.prometheus:
        raise CalibrateError("give --bench FILE... and/or --prometheus URL --range START..END")
    spec = load(Path(args.specs))
    model = validate(spec).model
    if args.model:
        model = _one_model(model, args.model)
    targets = [parse(t) for t in args.target]
    notes = []
    if not targets:
        where = f"{args.specs}/slos.yaml"
        targets, skipped = from_slos(spec.slos, where, args.model, spec.config.client_side)
        notes += skipped
        if not targets:
            raise CalibrateError("no targets: give --target MEASURE=LIMIT or SLOs in specs/slos.yaml")
    needed = _measures(model, targets, args.model)
    goodput = [
        slo for slo in spec.slos.values() if slo.goodput and (not args.model or slo.covers_model(args.model))
    ]
    sweeps = []
    if args.bench:
        steps = [s for f in args.bench for s in bench.read(Path(f), needed, _conditions(goodput, args.model))]
        check_steps("bench", steps, targets, args.min_requests)
        sweeps.append(sweep("bench", steps, targets))
    if args.prometheus:
        a, z, every, edges = _range(args)
        try:
            with connect(args) as client:
                hist = CalibrateHistory(client, model, client.shown, args.model)
                steps = [hist.step(k, r, needed, goodput) for k, r in enumerate(split(a, z, every, edges))]
        except PromApiError as exc:
            print(f"servewatch: error: {exc}; nothing was written", file=sys.stderr)
            return 1
        check_steps("prometheus", steps, targets, args.min_requests)
        sweeps.append(sweep("prometheus", steps, targets))
    result = CalibrateResult(
        targets,
        sweeps,
        combine(sweeps),
        notes=notes + mismatched_loads(sweeps),
        slos_file=f"{args.specs}/slos.yaml",
        served=args.model,
    )
    result.proposals = Proposer(model, result).run()
    cost = spec.dashboards.defaults.cost
    costs = {}
    if args.gpus and cost.by_type and args.price_per_gpu_hour is None:
        raise CalibrateError(
            "the specs price each GPU by its model or MIG profile (dashboards.defaults.cost), which a "
            "load test does not say: give --price-per-gpu-hour for the GPUs that served it"
        )
    if args.gpus:
        costs = {
            sw.name: [
                None
                if s.good_tokens is None
                else cost.per_million(args.gpus, s.seconds, s.good_tokens, args.price_per_gpu_hour)
                for s in sw.steps
            ]
            for sw in sweeps
        }
    edits, notes = _edits(Path(args.specs), spec, result.proposals)
    result.notes += notes
    changed = {path: new for path, (old, new) in edits.items() if new != old}
    if changed:  # refused: nothing printed as if it could be applied
        root = Path(args.specs).resolve()
        overrides.check(Path(args.specs), {str(p.resolve().relative_to(root)): t for p, t in changed.items()})
    diff = "".join(overrides.diff(path, edits[path][0], new) for path, new in changed.items())
    if args.format == "json":
        sys.stdout.write(report.as_json(result, costs, cost.currency, diff))
    else:
        sys.stdout.write(report.text(result, costs, cost.currency))
        sys.stdout.write("\n" + (diff or "no change to the overrides or the SLOs\n"))
    if args.write and changed:
        for path, new in changed.items():
            overrides.write(path, new)
        wrote = ", ".join(str(p) for p in changed)
        print(f"servewatch: wrote {wrote}; run `servewatch generate` and `servewatch test`", file=sys.stderr)
    return 0


def _edits(specs: Path, spec, proposals) -> tuple[dict[Path, tuple[str, str]], list[str]]:
    """Each file the proposals change -> (its text, the text proposed): the overrides for the alerts,
    the file defining each SLO for its threshold. Also what cannot be written, as notes."""
    path = specs / overrides.FILE
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    edits = {path: (old, overrides.apply(old, proposals))}
    notes: list[str] = []
    by_file: dict[Path, list] = {}
    for p in proposals:
        if not p.slo or p.value is None or p.proposed == p.current or p.field != "threshold":
            continue
        doc = spec.sources.get(("slo", p.slo), (None,))[0]
        file = Path(doc.file) if doc is not None else None
        if (
            file is None
            or file.suffix not in (".yaml", ".yml")
            or not file.resolve().is_relative_to(specs.resolve())
        ):
            notes.append(
                f"SLO {p.slo} is defined in {file or 'the default specs'}, which calibrate does not edit: "
                f"set its {p.field} to {p.proposed} there by hand"
            )
            continue
        by_file.setdefault(file, []).append(p)
    for file, mine in sorted(by_file.items()):
        # an SLO defined in the overrides file itself: its edit goes on top of the alerts'
        same = next((k for k in edits if k.resolve() == file.resolve()), file)
        old, base = edits.get(same) or (file.read_text(encoding="utf-8"),) * 2
        new, more = slo_file.apply(base, str(file), mine)
        edits[same] = (old, new)
        notes += more
    return edits, notes
