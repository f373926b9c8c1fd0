"""PromQL of the SLO rules, built on the SignalBuilder and promql.builders like every other rule.

Only the short recording reads event rates: good and valid event rates per grouping (the model
identity) over the configured rate window, from the rule set's recorded rates of the SLI's
counters where they are recorded (slo/kinds.py), else from the raw counters. Every longer window
and the SLO-window budget are averages of those recordings over the window, good and valid
separately, so a ratio is always traffic-weighted (never an average of ratios) and its cost is per
model, not per raw bucket series.
"""

from __future__ import annotations

import re

from ..promql import builders as b
from ..signals import SignalBuilder
from ..spec import slos as s
from ..spec.deployment import COUNTING_ROLES
from ..spec.schema import seconds
from .kinds import kind_of

MODEL = "model_name"  # vLLM's own model label: per-model overrides key on its values
GOOD = "slo:good_events:rate{w}"
VALID = "slo:valid_events:rate{w}"
OBJECTIVE = "slo:objective:ratio"
ERROR = "slo:sli_error:ratio_rate{w}"
REMAINING = "slo:period_error_budget_remaining:ratio"
GOODPUT = "model:vllm_goodput_tokens:rate{w}"
GENERATED_TOKENS = "vllm:generation_tokens_total"
REGEX_SPECIAL = re.compile(r"([.+*?()|\[\]{}^$\\])")
# What one event of a latency SLI measured at the client is, by the quantity of the gateway's
# histogram (catalog/gateway.yaml engine_twins): said in its burn alerts' descriptions.
CLIENT_EVENTS = {"ttft": "each request once", "itl": "every gap between two streamed tokens"}


def quoted(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def regex_literal(value: str) -> str:
    """`value` as an RE2 pattern that matches only itself."""
    return REGEX_SPECIAL.sub(r"\\\1", value)


def sli_windows(slo: s.SLO, rate_window: str) -> list[str]:
    """Every window an SLI error ratio is recorded over: the short recording's, each alert window's
    and the SLO window, shortest first."""
    found = {rate_window, slo.window, *(w for row in slo.alerting.windows for w in (row.long, row.short))}
    return sorted(found, key=seconds)


class SloExprs:
    """The expressions of one spec's SLOs, per grouping (config identity.model, cluster included)."""

    def __init__(self, sb: SignalBuilder):
        self.sb = sb.counting()  # each user request once (config.role)
        self.window = sb.config.rate_window
        self.grouping = sb.labels.identity("model")

    def counted_where(self, slo: s.SLO) -> str:
        """Which side counts the events, said in burn alert descriptions (empty: the engines, with
        neither a role nor a client source configured, where there is no other side to name)."""
        client = self.sb.config.client_side
        if slo.side == "client":
            source = self.sb.labels.client.name
            if slo.sli.kind == "availability":
                return (
                    f"Measured at the client: each request once, as the {source} in front of the engines "
                    "counted it (config.client_side), the requests it failed before any engine saw them "
                    "included. "
                )
            quantity = self.sb.catalog.client_quantity(slo.sli.histogram)
            return (
                f"Measured at the client: {CLIENT_EVENTS.get(quantity, 'each event')}, as the {source} "
                "in front of the engines saw it (config.client_side), gateway and transfer time included. "
            )
        role = self.sb.config.role
        if role is None:
            if client is None:
                return ""
            return f"Measured on the engines (the instance side), not at the {client.source}. "
        return (
            f"Each request is counted once, on the {'/'.join(COUNTING_ROLES)} engines ({role.label}), "
            "as those engines measure it, not at the client. "
        )

    # -- names ------------------------------------------------------------------------------------
    def good_record(self) -> str:
        return GOOD.format(w=self.window)

    def valid_record(self) -> str:
        return VALID.format(w=self.window)

    def error_record(self, window: str) -> str:
        return ERROR.format(w=window)

    def goodput_record(self) -> str:
        return GOODPUT.format(w=self.window)

    def recorded(self, record: str, slo: str, *matchers: str) -> str:
        return b.selector(record, f'slo="{slo}"', *matchers)

    def windows(self, slo: s.SLO) -> list[str]:
        return sli_windows(slo, self.window)

    # -- the scope: where the SLO counts events ----------------------------------------------------
    def scope(self, slo: s.SLO) -> tuple[str, ...]:
        """The matchers of the deployments the SLO covers (none: every model). They narrow its event
        rates and its inputs-missing alerts; every other rule reads those records, so it follows."""
        if slo.scope is None:
            return ()
        out = []
        if slo.scope.models:
            models = slo.scope.models
            if len(models) == 1:
                out.append(f"{MODEL}={quoted(models[0])}")
            else:
                out.append(f"{MODEL}=~{quoted('|'.join(regex_literal(m) for m in models))}")
        if slo.scope.matchers:
            out.append(slo.scope.matchers)
        return tuple(out)

    # -- per-model overrides -----------------------------------------------------------------------
    def branches(self, slo: s.SLO, param: str) -> list[tuple[str, float]]:
        """(model matcher, value) per value of `param` ("objective" or "threshold"): the SLO's own
        value for every model without an override, then one branch per model with one."""
        default = slo.objective if param == "objective" else getattr(slo.sli, param)
        own = {m: getattr(o, param) for m, o in slo.per_model.items() if getattr(o, param) is not None}
        if not own:
            return [("", default)]
        others = "|".join(regex_literal(m) for m in sorted(own))
        return [(f"{MODEL}!~{quoted(others)}", default)] + [
            (f"{MODEL}={quoted(m)}", v) for m, v in sorted(own.items())
        ]

    # -- the short recording: the only SLO rules that read event rates ----------------------------
    def events(self, slo: s.SLO, value, *matchers: str):
        """(good and valid selectors, whether they are of a record): the rule set's recorded rate
        of the SLI's counters where one is recorded (its raw series are then read once per
        evaluation, by that record, which the bucket quantiles and error ratios read too), else
        the raw counters."""
        kind = kind_of(slo.sli)
        record = kind.recording(self.sb, slo.sli, self.window)
        matchers = (*matchers, *self.scope(slo))
        if record is None:
            return kind.events(self.sb, slo.sli, value, *matchers), False
        matchers = (*matchers, *self.sb.record_narrowing(record))  # a record of every role
        if kind.subtracts:  # the bad events have their own record (a gateway's errors)
            bad = kind.bad_recording(self.sb, slo.sli, self.window)
            if bad is None:
                return kind.events(self.sb, slo.sli, value, *matchers), False
            return kind.recorded_events(record, slo.sli, value, *matchers, bad_record=bad), True
        return kind.recorded_events(record, slo.sli, value, *matchers), True

    def records_read(self, slo: s.SLO) -> tuple[str, ...]:
        """The rule set's records the SLO's event rates read (none: they read raw counters)."""
        kind = kind_of(slo.sli)
        if kind.subtracts:
            return kind.records(self.sb, slo.sli, self.window)
        record = kind.recording(self.sb, slo.sli, self.window)
        return (record,) if record else ()

    def _rate(self, selector: str, from_record: bool, keep: tuple[str, ...]) -> str:
        if from_record:
            return b.agg("sum", self.grouping, selector)
        return self.sb.model_rate(selector, self.window, keep)

    def valid_rate(self, name: str, slo: s.SLO) -> str:
        events, from_record = self.events(slo, self._param(slo, slo.sli))
        return self._rate(events.valid, from_record, events.keep)

    def good_rate(self, name: str, slo: s.SLO) -> str:
        """Good events per second per grouping. Where the kind says an absent good counter means no
        good event (availability), 0 where there are valid events, so a model that fails every
        request has an error ratio of 1, not none; a latency SLI whose bucket is not scraped stays
        absent instead (its good events are unknown)."""
        kind = kind_of(slo.sli)
        if kind.subtracts:  # valid less bad: every request the gateway did not fail
            events, from_record = self.events(slo, None)
            valid = self._rate(events.valid, from_record, events.keep)
            return b.less(valid, self._rate(events.bad, from_record, events.keep), self.grouping)
        parts = []
        for matcher, value in self.branches(slo, kind.param) if kind.param else [("", None)]:
            events, from_record = self.events(slo, value, matcher)
            parts.append(self._rate(events.good, from_record, events.keep))
        if not kind.absent_good_is_zero:
            return b.any_of(*parts)
        return b.otherwise(b.any_of(*parts), f"0 * {self.recorded(self.valid_record(), name)}", self.grouping)

    def missing_inputs(self, name: str, slo: s.SLO, *matchers: str) -> list[tuple[str, dict]]:
        """(condition, labels) per input whose absence leaves the SLI absent: a model served (its
        count scraped) whose good-events bucket is not, for each threshold in use; `matchers`
        narrow both sides (a dashboard's cluster)."""
        kind = kind_of(slo.sli)
        out = []
        for matcher, value in self.branches(slo, kind.param) if kind.param else [("", None)]:
            found = kind.missing(self.sb, slo.sli, value, matcher, *self.scope(slo), *matchers)
            if found is None:
                continue
            served, labels = found
            good = self.recorded(self.good_record(), name, matcher, *matchers)
            out.append((b.unless(b.agg("group", self.grouping, served), good, self.grouping), labels))
        return out

    def _param(self, slo: s.SLO, sli):
        kind = kind_of(sli)
        return getattr(sli, kind.param) if kind.param else None

    # -- derived from the short recording ----------------------------------------------------------
    def objective(self, name: str, slo: s.SLO) -> str:
        """The objective per grouping (overrides applied), present wherever the SLO has traffic data."""
        return b.any_of(
            *(
                f"0 * {self.recorded(self.valid_record(), name, matcher)} + {value!r}"
                for matcher, value in self.branches(slo, "objective")
            )
        )

    def error_ratio(self, name: str, window: str) -> str:
        """1 - good / valid over `window`: the short recording itself, or both of its rates averaged
        over the window (the ratio of the averages is the ratio of the event counts)."""
        good, valid = self.recorded(self.good_record(), name), self.recorded(self.valid_record(), name)
        if window != self.window:
            good, valid = f"avg_over_time({good}[{window}])", f"avg_over_time({valid}[{window}])"
        return f"1 - {b.guarded_div(good, valid, self.grouping)}"

    def budget(self, name: str) -> str:
        """The error budget per grouping: 1 - objective."""
        return f"1 - {self.recorded(OBJECTIVE, name)}"

    def burn_rate(self, name: str, window: str, *matchers: str) -> str:
        """How many times faster than the objective allows the budget burns over `window`."""
        error = self.recorded(self.error_record(window), name, *matchers)
        return b.guarded_div(error, f"1 - {self.recorded(OBJECTIVE, name, *matchers)}", self.grouping)

    def remaining(self, name: str, slo: s.SLO) -> str:
        """The share of the SLO window's error budget not yet spent (negative when overspent)."""
        error = self.recorded(self.error_record(slo.window), name)
        return f"1 - {b.guarded_div(error, self.budget(name), self.grouping)}"

    def events_in(self, name: str, window: str, *matchers: str) -> str:
        """Valid events in `window`: the average rate over the window x its length (while a model has
        less history than the window, its traffic so far stands for the whole window)."""
        valid = self.recorded(self.valid_record(), name, *matchers)
        return f"avg_over_time({valid}[{window}]) * {seconds(window):g}"

    def unjudged_in(self, name: str, window: str, *matchers: str) -> str:
        """Valid events in `window` of the groupings whose good events are not recorded now (an input
        of theirs is missing: the requests the SLO cannot judge), and 0 for the groupings whose good
        events are; nothing where the SLO records no valid events (its rules are not evaluated)."""
        events = self.events_in(name, window, *matchers)
        good = self.recorded(self.good_record(), name, *matchers)
        return b.otherwise(b.unless(events, good, self.grouping), f"0 * {events}", self.grouping)

    def burn_alert(self, name: str, slo: s.SLO, row: s.BurnWindow, *matchers: str) -> str:
        """Both windows of the row burn faster than its rate, and the long one saw enough events."""
        fast = b.only_where(
            b.compare(self.burn_rate(name, row.long, *matchers), ">", row.burn_rate),
            b.compare(self.burn_rate(name, row.short, *matchers), ">", row.burn_rate),
            self.grouping,
        )
        if not slo.alerting.min_events:
            return fast
        guard = f"{self.events_in(name, row.long, *matchers)} >= {slo.alerting.min_events}"
        return b.only_where(fast, guard, self.grouping)

    def time_to_exhaustion(self, name: str, slo: s.SLO, window: str, *matchers: str) -> str:
        """Seconds until the SLO window's remaining budget is spent at the burn rate over `window`."""
        left = f"clamp_min({self.recorded(REMAINING, name, *matchers)}, 0) * {seconds(slo.window):g}"
        return b.guarded_div(left, self.burn_rate(name, window, *matchers), self.grouping)

    # -- goodput -----------------------------------------------------------------------------------
    def goodput(self, slos: dict[str, s.SLO]) -> str:
        """Generated tokens per second x the share of requests good under every SLO that covers the
        model (5m window). Outside an SLO's scope its share is 1: the SLO does not judge them."""
        tokens = self.tokens()
        shares = []
        for name in sorted(slos):
            share = f"1 - {self.recorded(self.error_record(self.window), name)}"
            if slos[name].side == "client" and self.sb.labels.deployment():
                # recorded per model as the client sees it: the same share for each role and track
                share = b.join(f"0 * {tokens} + 1", f"({share})", self.sb.labels.client_identity(), ())
            scope = self.scope(slos[name])
            if scope:
                outside = b.unless(tokens, self.tokens(*scope), self.grouping)
                share = b.otherwise(share, f"0 * {outside} + 1", self.grouping)
            shares.append(share)
        return b.product([tokens, *shares], self.grouping)

    def tokens(self, *matchers: str) -> str:
        """Generated tokens per second per grouping."""
        rec = self.sb.recorded_source("rate", GENERATED_TOKENS, "model", (), self.window)
        if rec is not None:  # the rule set's own record of the counter: read once per evaluation
            return b.agg("sum", self.grouping, self.sb.recorded_selector(rec, *matchers))
        return self.sb.model_rate(self.sb.select(GENERATED_TOKENS, *matchers), self.window)
