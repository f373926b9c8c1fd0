"""A load test's Prometheus history -> load steps.

Each step is a time range. Its measures are the whole step seen by the server: a latency percentile
is the histogram's quantile over the step (`rate(..._bucket[<step>])`), the error share on the
engines counts the finished requests that ended in a failure the availability SLO counts by default,
at the client the gateway's failed requests (every error code) over its requests. The load, the
requests, the engines' error share and the good tokens count each user request once: with prefill
and decode apart (config.role) on the engines the SLOs count on (spec.deployment.COUNTING_ROLES).
A measure is read where the alerts and SLOs on it read it (measures.side_of): the gateway's
histogram or counters where config.client_side measures it, else those same counting engines,
never the worse of prefill and decode (neither is the client's wait). Each alert's signal is
built by the same SignalBuilder as its rule, read from the raw series (the records may not be in the
history) and evaluated at the alert group's interval over the step: the worst series at each
evaluation, which is the fullest engine (DP rank) or GPU for a saturation signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

from ..model import Model
from ..promql import builders as b
from ..slo.exprs import GENERATED_TOKENS
from ..slo.kinds import kind_of, le_matcher
from ..spec.slos import AvailabilitySLI, client_errors, client_read
from ..spec.schema import seconds
from .measures import ERRORS, FINISHED, Measure, side_of, signal_alerts
from .targets import CalibrateError
from .steps import LoadStep, Trace

# what fails on the engines: the finished reasons an availability SLO counts as bad by default
FAILED = f'finished_reason=~"{"|".join(AvailabilitySLI.model_fields["bad"].default)}"'
# at the client: the configured source's counters of every request and of the failed ones, as
# signals name them (client_requests, client_errors)
AT_CLIENT = AvailabilitySLI(kind="availability", side="client")
WINDOWED = ("rate", "counter_ratio", "quantile", "bucket_rate")  # kinds computed over a window
DEFAULT_INTERVAL = "1m"
MODEL = (
    "model_name"  # vLLM's label of the served model  # Prometheus' evaluation_interval when a group sets none
)


@dataclass(frozen=True)
class Range:
    start: float
    end: float


def split(start: float, end: float, every_s: float | None, edges: list[float]) -> list[Range]:
    """Steps of `every_s` seconds from `start`, or between the explicit `edges` (inside the range)."""
    points = [start, *sorted(edges), end] if edges else []
    if every_s:
        n = max(1, math.floor((end - start) / every_s + 1e-9))
        points = [start + i * every_s for i in range(n + 1)]
    return [Range(a, z) for a, z in zip(points, points[1:], strict=False) if z > a]


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window(r: Range) -> str:
    return f"{int(round(r.end - r.start))}s"


def _value(result: list) -> tuple[float | None, dict]:
    """The largest value of an instant query's result and its labels."""
    best, labels = None, {}
    for row in result:
        v = float(row["value"][1])
        if not math.isnan(v) and (best is None or v > best):
            best, labels = v, row["metric"]
    return best, labels


class CalibrateHistory:
    """A load test's Prometheus history, measured one load step (a time range) at a time."""

    def __init__(self, client, model: Model, shown: str, served: str | None = None):
        self.client = client
        self.model = model
        self.served = served  # --model: its per-model SLO thresholds count its good tokens
        self.sb = model.builder
        # the finished requests and generated tokens of the engines each user request is counted
        # once on: with prefill and decode apart (config.role) a request finishes on both
        self.counted = model.builder.counting()
        self.shown = shown
        self.ident = self.sb.labels.identity("model")

    def alerts(self):
        return signal_alerts(self.model)

    def interval_s(self, group: str) -> float:
        g = next(g for g in self.model.groups if g.name == group)
        return seconds(g.interval or DEFAULT_INTERVAL)

    def step(self, k: int, r: Range, needed: list[Measure], goodput: list) -> LoadStep:
        win = _window(r)
        measures, unmeasured, bounds, totals = {}, {}, {}, {}
        for m in needed:
            if m.metric == ERRORS and side_of(m, self.sb.config.client_side) == "client":
                measures[m.key], totals[m.key] = self._client_errors(m, win, r)
                continue
            v = self._measure(m, win, r.end)
            if v is None:
                read = self.sb.metric_name(self._reads(m)[1]) if m.histogram else FINISHED
                unmeasured[m.key] = f"no {read} from {_utc(r.start)} to {_utc(r.end)}"
            else:
                measures[m.key] = v
            if m.histogram and side_of(m, self.sb.config.client_side) == "client":
                bounds[m.key] = self._bounds(m, win, r.end)
        finished = self.counted.model_rate(self.counted.select(FINISHED), win, ("finished_reason",))
        models = sorted(
            row["metric"].get(MODEL, "")
            for row in self.client.query(f"group by ({MODEL}) ({finished})", r.end)
        )
        if len(models) > 1:  # the worst of several models would be no model's threshold
            raise CalibrateError(
                f"{self.shown} holds {len(models)} models from {_utc(r.start)} to {_utc(r.end)} "
                f"({', '.join(models)}): calibrate one at a time with --model NAME"
            )
        rate, _ = _value(self.client.query(f"sum({finished})", r.end))
        seconds_ = r.end - r.start
        requests = int(round((rate or 0) * seconds_))
        observed, traces = {}, {}
        for alert in self.alerts():
            traces[alert.alert] = self._trace(alert, r)
            observed[alert.alert] = self._observed(alert, win, r.end, traces[alert.alert])
        return LoadStep(
            source=f"{self.shown} {_utc(r.start)}..{_utc(r.end)}",
            label=f"#{k + 1} at {(rate or 0):.3g} req/s",
            load=rate or 0.0,
            requests=requests,
            seconds=seconds_,
            measures=measures,
            good_tokens=self._good_tokens(win, r.end, seconds_, goodput),
            observed={k: v for k, v in observed.items() if v is not None},
            traces=traces,
            unmeasured=unmeasured,
            bounds=bounds,
            totals=totals,
        )

    def _measure(self, m: Measure, win: str, at: float) -> float | None:
        if m.metric == ERRORS:
            keep = ("finished_reason",)
            sb = self.counted
            every = sb.model_rate(sb.select(FINISHED), win, keep)
            if _value(self.client.query(every, at))[0] is None:
                return None
            bad = sb.model_rate(sb.select(FINISHED, FAILED), win, keep)
            return _value(self.client.query(b.guarded_div(bad, every, self.ident), at))[0] or 0.0
        sb, histogram = self._reads(m)
        return _value(self.client.query(sb.histogram_quantile(histogram, m.quantile, win, "model"), at))[0]

    def _client_rates(self, win: str) -> tuple[str, str]:
        """The gateway's valid and failed requests (every cause) per second per model, as the
        client-errors records count them (the source's outcome: catalog/gateway.yaml), from the raw
        series."""
        sb = self.sb
        reads = (AT_CLIENT.reads, AT_CLIENT.errors)
        return tuple(sb.client_rate(sb.metric_name(m), win, *sb.labels.client_matchers(m)) for m in reads)

    def _client_errors(self, m: Measure, win: str, r: Range) -> tuple[float, int]:
        """The error share at the client and the requests it is over: the gateway's failures over
        its requests (a model it never failed has no error series: no failure). A history without
        the gateway's request counter is refused: the SLI would read nothing there either."""
        if not client_errors(self.sb.config.client_side):
            raise CalibrateError(
                f"{m.key}: config.client_side names no source that counts requests and failed "
                "requests (docs/disaggregated.md): the client's error share cannot be read"
            )
        requests, errors = self._client_rates(win)
        rate, _ = _value(self.client.query(f"sum({requests})", r.end))
        if rate is None:
            counter = self.sb.metric_name(AT_CLIENT.reads)
            raise CalibrateError(
                f"{self.shown} has no {counter} from {_utc(r.start)} to {_utc(r.end)}: the error share "
                f"at the client is the {self.sb.labels.client.name}'s failed requests "
                f"({self.sb.metric_name(AT_CLIENT.errors)}) over its requests ({counter}), which the "
                "availability SLO reads (config.client_side); scrape them, or calibrate the engines' "
                "share with sli.side: instance"
            )
        ident = self.sb.labels.client_identity()
        share = _value(self.client.query(b.guarded_div(errors, requests, ident), r.end))[0] or 0.0
        return share, int(round(rate * (r.end - r.start)))

    def _client_share(self, slo, tokens: str, win: str) -> str:
        """The share of requests good under a client-side SLO, per model as the gateway counts
        them, on every series of `tokens` (the same share for each role and track): its requests
        less those it failed, or its first tokens within the threshold, over all of them."""
        sb, client = self.sb, self.sb.labels.client_identity()
        if kind_of(slo.sli).subtracts:
            valid, bad = self._client_rates(win)
            good = f"({b.less(valid, bad, client)})"  # a difference: bracketed under the division
        else:
            h = sb.metric_name(slo.sli.reads)
            good = sb.client_rate(f"{h}_bucket", win, le_matcher(slo.threshold_of(self.served)))
            valid = sb.client_rate(f"{h}_count", win)
        share = b.guarded_div(good, valid, client)
        return b.join(f"0 * {tokens} + 1", f"({share})", client, ())

    def _reads(self, m: Measure):
        """(the builder, the histogram as signals name it) a latency measure is read with: the
        client-side quantity at the client, else the engine histogram on the counting engines."""
        if side_of(m, self.sb.config.client_side) == "client":
            return self.sb, client_read(m.histogram, self.sb.config.client_side)
        return self.counted, m.histogram

    def _bounds(self, m: Measure, win: str, at: float) -> tuple[float, ...]:
        """The bucket bounds the client's histogram has in the step (an SLO threshold at the client
        must be one it exports; the catalog lists them only where the source's code fixes them)."""
        bucket = self.sb.select(f"{self.sb.metric_name(self._reads(m)[1])}_bucket")
        rows = self.client.query(f"group by (le) (last_over_time({bucket}[{win}]))", at)
        return tuple(sorted(float(row["metric"]["le"]) for row in rows if row["metric"].get("le") != "+Inf"))

    def _expr(self, alert, window: str | None = None) -> str:
        signal = self.model.signal(alert.spec.signal)
        return self.sb.expr(signal, window=window, quantile=alert.spec.quantile)

    def _trace(self, alert, r: Range) -> Trace:
        """The alert's signal as its rule sees it, from when its rate window lies inside the step."""
        every = self.interval_s(alert.group)
        settle = seconds(self.sb.config.rate_window)
        signal = self.model.signal(alert.spec.signal)
        start = r.start + settle if signal.kind in WINDOWED and r.end - r.start > 2 * settle else r.start
        rows = self.client.query_range(f"max({self._expr(alert)})", start, r.end, every)
        values = tuple(float(v) for row in rows for _, v in row["values"] if not math.isnan(float(v)))
        worst = self.client.query(
            f"topk(1, max_over_time(({self._expr(alert)})[{_window(r)}:{every:g}s]))", r.end
        )
        return Trace(every, values, _value(worst)[1])

    def _observed(self, alert, win: str, at: float, trace: Trace) -> float | None:
        """A windowed signal over the whole step; an instantaneous one's median over the step."""
        if self.model.signal(alert.spec.signal).kind in WINDOWED:
            return _value(self.client.query(self._expr(alert, win), at))[0]
        return trace.median()

    def _good_tokens(self, win: str, at: float, seconds_: float, goodput: list) -> float | None:
        """Generated tokens x the share good under each goodput SLO, as the goodput record counts them."""
        sb = self.counted
        tokens = sb.model_rate(sb.select(GENERATED_TOKENS), win)
        shares = []
        for slo in goodput:
            kind = kind_of(slo.sli)
            if slo.side == "client":
                shares.append(self._client_share(slo, tokens, win))
                continue
            events = kind.events(sb, slo.sli, slo.threshold_of(self.served) if kind.param else None)
            good = sb.model_rate(events.good, win, events.keep)
            valid = sb.model_rate(events.valid, win, events.keep)
            shares.append(b.guarded_div(good, valid, self.ident))
        rate, _ = _value(self.client.query(f"sum({b.product([tokens, *shares], self.ident)})", at))
        return None if rate is None else rate * seconds_
