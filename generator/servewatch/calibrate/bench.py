"""`vllm bench serve --save-result` files -> load steps.

One file is one step (one `--request-rate` or `--max-concurrency`), or, for a ramped run
(`--ramp-up-strategy`), one step per request rate of its `rps_change_events`. The percentiles come
from the file's `p<P>_<metric>_ms` keys or, with `--save-detailed`, from its per-request lists,
which also give each request's outcome for the good tokens of the cost.

A ramp's events carry wall-clock times, its requests `start_times` on the client's monotonic clock:
both start with the run, so each request is placed by its offset from the first start.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .measures import ERRORS, HISTOGRAMS, Measure, percentile, percentile_word
from .steps import LoadStep
from .targets import CalibrateError

REQUIRED = ("completed", "duration")  # what every --save-result file has
DETAIL = ("ttfts", "itls", "output_lens")


@dataclass(frozen=True)
class Condition:
    """A per-request latency limit a good token's request must meet (a goodput SLO's threshold)."""

    metric: str  # a HISTOGRAMS key
    limit_s: float


def read(path: Path, needed: list[Measure], conditions: list[Condition] | None) -> list[LoadStep]:
    """The steps of one result file. `conditions`: the per-request limits of good tokens (None: a
    goodput SLO a load test cannot check, so no token count is claimed)."""
    data = _load(path)
    events = data.get("rps_change_events")
    if events:
        return _ramp_steps(path, data, events, needed, conditions)
    return [_step(path, data, _label(path, data), _load_of(data), needed, conditions)]


def _load(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrateError(f"{path}: cannot read it: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrateError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or any(k not in data for k in REQUIRED):
        got = f"keys {', '.join(sorted(data)[:5])}" if isinstance(data, dict) else type(data).__name__
        raise CalibrateError(
            f"{path}: not a `vllm bench serve --save-result` file (no {' or '.join(REQUIRED)}; found {got})"
        )
    return data


def _number(path: Path, data: dict, key: str, default=None) -> float:
    v = data.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise CalibrateError(f"{path}: field {key!r}: want a number, not {json.dumps(v)[:40]}")
    return float(v)


def _load_of(data: dict) -> float:
    rate = data.get("request_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        return float(rate)
    conc = data.get("max_concurrency")
    return float(conc) if isinstance(conc, (int, float)) else math.inf


def _label(path: Path, data: dict) -> str:
    rate = data.get("request_rate")
    if isinstance(rate, (int, float)) and math.isfinite(rate):
        return f"{rate:g} req/s"
    if isinstance(data.get("max_concurrency"), (int, float)):
        return f"concurrency {data['max_concurrency']:g}"
    return path.name


def _lists(path: Path, data: dict) -> dict | None:
    """The per-request lists, checked to be as long as each other; None without --save-detailed."""
    if not all(k in data for k in DETAIL):
        return None
    lists = {k: data[k] for k in (*DETAIL, "errors", "start_times", "latencies") if k in data}
    lengths = {k: len(v) for k, v in lists.items() if isinstance(v, list)}
    if len(lengths) != len(lists) or len(set(lengths.values())) != 1:
        raise CalibrateError(f"{path}: per-request fields have different lengths: {lengths}")
    return lists


def _requests(path: Path, lists: dict, idx: range | list[int]) -> list[dict]:
    out = []
    for i in idx:
        try:
            ttft, itls = float(lists["ttfts"][i]), [float(x) for x in lists["itls"][i]]
            error = str((lists.get("errors") or [""] * (i + 1))[i] or "")
            latency = (
                float(lists["latencies"][i])
                if "latencies" in lists
                else ttft + sum(itls)
                if not error
                else 0.0
            )
            out.append(
                {
                    "ttft": ttft,
                    "itls": itls,
                    "e2el": latency,
                    "out": int(lists["output_lens"][i] or 0),
                    "ok": not error,
                }
            )
        except (TypeError, ValueError):
            raise CalibrateError(f"{path}: request {i}: ttfts, itls, output_lens must be numbers") from None
    return out


def _per_request(reqs: list[dict], metric: str) -> list[float]:
    """vLLM bench's own definitions, over successful requests."""
    ok = [r for r in reqs if r["ok"]]
    if metric == "ttft":
        return [r["ttft"] for r in ok]
    if metric == "itl":
        return [x for r in ok for x in r["itls"]]
    if metric == "e2el":
        return [r["e2el"] for r in ok]
    return [(r["e2el"] - r["ttft"]) / (r["out"] - 1) for r in ok if r["out"] > 1]  # tpot


def _good_tokens(reqs: list[dict], conditions: list[Condition] | None) -> float | None:
    if conditions is None:
        return None
    good = 0
    for r in reqs:
        values = {"ttft": r["ttft"], "e2el": r["e2el"]}
        if r["ok"] and all(values[c.metric] <= c.limit_s for c in conditions):
            good += r["out"]
    return float(good)


def _step(
    path: Path,
    data: dict,
    label: str,
    load: float,
    needed: list[Measure],
    conditions: list[Condition] | None,
    reqs: list[dict] | None = None,
    seconds: float | None = None,
) -> LoadStep:
    lists = _lists(path, data)
    if reqs is None and lists is not None:
        reqs = _requests(path, lists, range(len(lists["ttfts"])))
    measures, unmeasured = {}, {}
    if reqs is not None:
        n = len(reqs)
        failed = sum(not r["ok"] for r in reqs)
        good = _good_tokens(reqs, conditions)
    else:
        n = int(_number(path, data, "completed") + _number(path, data, "failed", 0))
        failed = int(_number(path, data, "failed", 0))
        good = None
    for m in needed:
        if m.side == "instance":  # a bench file is the client's view
            unmeasured[m.key] = f"{path.name} is the client's view, not the engines': add --prometheus"
            continue
        if m.metric == ERRORS:  # every request the client saw fail, wherever it failed
            measures[m.key] = failed / n if n else math.nan
            continue
        key = f"p{percentile_word(m.percentile)}_{m.metric}_ms"
        if reqs is not None:
            measures[m.key] = percentile(_per_request(reqs, m.metric), m.percentile)
        elif key in data and data[key] is not None:
            measures[m.key] = _number(path, data, key) / 1000
        else:
            have = sorted(k for k in data if k.startswith("p") and k.endswith(f"_{m.metric}_ms"))
            unmeasured[m.key] = (
                f"{path.name} has no {key} (it has {', '.join(have) or 'no percentile of ' + m.metric}); "
                f"rerun with --metric-percentiles {percentile_word(m.percentile)} or --save-detailed"
            )
    return LoadStep(
        source=str(path),
        label=label,
        load=load,
        requests=n,
        seconds=seconds if seconds is not None else _number(path, data, "duration"),
        measures=measures,
        good_tokens=good if conditions is not None else None,
        unmeasured=unmeasured,
    )


def _ramp_steps(path, data, events, needed, conditions) -> list[LoadStep]:
    lists = _lists(path, data)
    if lists is None or "start_times" not in lists:
        raise CalibrateError(
            f"{path}: a ramped run (rps_change_events) is split into its request rates by each request's "
            "start time: rerun with --save-detailed (vLLM writes start_times with it)"
        )
    try:
        times = [(datetime.fromisoformat(e["timestamp"]).timestamp(), float(e["rps"])) for e in events]
        starts = [float(t) for t in lists["start_times"]]
    except (KeyError, TypeError, ValueError):
        raise CalibrateError(f"{path}: rps_change_events: want a list of {{rps, timestamp}}") from None
    t0, s0 = times[0][0], min(starts)
    # several events at one time (the rate jumped by more than 1): the last one is the rate
    bounds: dict[float, float] = {}
    for t, rps in times:
        bounds[t - t0] = rps
    edges = sorted(bounds)
    duration = _number(path, data, "duration")
    steps = []
    for k, at in enumerate(edges):
        end = edges[k + 1] if k + 1 < len(edges) else duration
        idx = [i for i, s in enumerate(starts) if at <= s - s0 < end]
        reqs = _requests(path, lists, idx)
        rps = bounds[at]
        steps.append(_step(path, data, f"{rps:g} req/s (ramp)", rps, needed, conditions, reqs, end - at))
    return steps


__all__ = ["read", "Condition", "HISTOGRAMS"]
