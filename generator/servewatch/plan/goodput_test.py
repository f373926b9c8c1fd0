"""The generated promtool test of the goodput record (slo/exprs.py `SloExprs.goodput`), written into
promtool/slo.test.yaml for any build: per model, the generated tokens of its counting engines added up
(a twice-scraped engine once, engines and pods summed), times 1 - the 5m error ratio of each SLO that
feeds goodput; nothing for a prefill engine where config.role is set (its one token per request is no
output), and models that differ in one identity label kept apart.

The SLOs' error ratios are input series here: no request reaches their own rules, which then record
nothing, so the test proves the composition alone (the SLIs have their scenarios). Not written where
an SLO that feeds goodput has a scope (outside it the share is 1, and no synthetic model lies there),
nor where config.selectors pins the role label, nor where an engine's identity adds no label to
its model's.
"""

from __future__ import annotations

import math

from ..model import Model
from ..slo.exprs import GENERATED_TOKENS
from ..spec.deployment import COUNTING_ROLES
from ..spec.schema import seconds
from .conform import Conform
from .rule_tests import record_checks
from .scenario_tests import series_with_selectors
from .synthetic import Synth, canary, series_text

INTERVAL_S = 30
PROMPT = "vllm:prompt_tokens_total"  # far more than output: a rule that read it would be far off


def goodput_test(model: Model, every_s: float) -> tuple[str, dict] | None:
    """(claim, promtool test) of the goodput record, checked at the first evaluation (every `every_s`)
    with the rate window filled; None where no SLO feeds goodput or one has a scope."""
    plan, x = model.slos, model.slos.x
    slos = {name: slo for name, slo in plan.slos.items() if slo.goodput}
    if not slos or any(x.scope(slo) for slo in slos.values()):
        return None
    role = model.config.role
    if role and role.label in {label for label, _, _ in Conform(model).matchers("vllm")}:
        return None  # config.selectors would give every engine the role it pins
    window_s = seconds(model.config.rate_window)
    at = every_s * math.ceil((window_s + 2 * INTERVAL_S) / every_s)
    steps = int(at // INTERVAL_S)
    made = _engines(model, Synth(model, INTERVAL_S, steps))
    if made is None:
        return None
    engines, keys = made
    series = [
        (series_with_selectors(model, series_text(metric, labels)), f"0+{rate * INTERVAL_S:g}x{steps}")
        for labels, per_second in engines
        for metric, rate in ((GENERATED_TOKENS, per_second), (PROMPT, 10 * per_second))
    ]
    errors = _errors(model, slos, keys)
    series += [
        (
            series_text(x.error_record(x.window), {"slo": name, **dict(key)}),
            f"{e:g}x{steps}",
        )
        for (name, key), e in errors.items()
    ]
    expected = []
    for key, tokens in keys.items():
        good = tokens
        for name, slo in slos.items():
            good *= 1 - errors[(name, _sli_key(model, slo, dict(key)))]
        expected.append((dict(key), good))
    test = {
        "name": f"record: {x.goodput_record()}",
        "interval": f"{INTERVAL_S}s",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": record_checks(x.goodput_record(), {}, expected, at),
    }
    claim = (
        f"{x.goodput_record()}: each model's counting engines' output tokens, a twice-scraped engine "
        f"once, times 1 - the {x.window} error ratio of "
        + " and of ".join(slos)
        + "; models one label apart kept apart"
    )
    return claim, test


def _engines(model: Model, synth: Synth):
    """([(engine labels, tokens per second)], {model key: the tokens per second it adds up to}), or
    None where an engine's identity adds no label to its model's (its engines could not be told apart).

    Per counting role value (one model where no role is set): three engines, the first scraped
    twice; a prefill engine beside them that counts for nothing; and one model per other identity
    label that differs from the first in that label alone."""
    grouping = model.slos.x.grouping
    own = [label for label in model.builder.labels.identity("engine") if label not in grouping]
    if not own:
        return None
    role, track = model.config.role, model.config.track
    # a second scrape of an engine differs in `instance`, unless that tells engines apart itself
    twice = "instance" not in model.builder.labels.identity("engine")
    engines: list[tuple[dict, float]] = []
    keys: dict[tuple, float] = {}

    def engine(labels: dict, n: int, per_second: float, scrapes: int = 1, counted: bool = True) -> None:
        labels = {**labels, **{label: f"{label.lower()}-{n}" for label in own}}
        for i in range(scrapes):
            engines.append(({**labels, "instance": f"10.0.0.{i + 1}:8000"} if twice else labels, per_second))
        if counted:
            key = tuple((k, labels[k]) for k in grouping)
            keys[key] = keys.get(key, 0.0) + per_second

    base = synth.identity("engine", "a")
    pinned = {label for label, _, _ in Conform(model).matchers("vllm")}  # config.selectors keeps them
    for scale, value in enumerate([role.values[r][0] for r in COUNTING_ROLES] if role else [None], 1):
        labels = {**base, **({role.label: value} if role else {})}
        engine(labels, 0, scale * 60, scrapes=2 if twice else 1)
        engine(labels, 1, scale * 30)
        engine(labels, 2, scale * 90)
    if role:
        engine({**base, role.label: role.values["prefill"][0]}, 3, 1000.0, counted=False)
    for label in grouping:
        if role and label == role.label:
            continue  # its values are the counting roles' above
        other = synth.identity("engine", "a", change=label)
        if track and label == track.label and label not in pinned:  # synth pins the stable track
            other = {**base, label: canary(track)}
        if other[label] != base[label]:  # a label config.selectors pins keeps its one value
            engine(other, 4, 20.0)
    return engines, keys


def _sli_key(model: Model, slo, key: dict) -> tuple:
    """The labels of an SLO's error ratio that a model's goodput reads: a client-side SLI's are the
    client's view of the model (no role or track)."""
    labels = model.builder.labels.client_identity() if slo.side == "client" else model.slos.x.grouping
    return tuple((k, key[k]) for k in labels)


def _errors(model: Model, slos: dict, keys: dict) -> dict:
    """{(SLO, its error ratio's labels): a 5m error ratio}, each SLO and model its own value."""
    out = {}
    for i, (name, slo) in enumerate(slos.items()):
        for j, key in enumerate(keys):
            sli = _sli_key(model, slo, dict(key))
            out.setdefault((name, sli), round(0.05 * (i + 1) + 0.01 * j, 4))
    return out
