"""A prefill/decode deployment with a canary (servewatch_testkit.synth.disaggregated) on a real
Prometheus 3.5, under rules generated with config.role and config.track: healthy, nothing fires
(prefill's `length` finishes, its empty inter-token latency, each request seen twice, the NIXL
connector's series on both roles); a slow canary fires for the canary only, each alert on the side
that measured it; a degraded KV transfer path fires the KV-transfer alerts and the deferred alert for
the failing pools only; `servewatch detect` finds the role and track labels and suggests the config;
every panel of every generated board shows data on that fleet.

Each alert's expression is queried over the whole scenario on the evaluation grid, as in
tests/test_alerts_on_incidents.py: an alert fires at the last step only if it held at every
evaluation of its `for`."""

from __future__ import annotations

import json

import pytest

from servewatch import generate, writer
from servewatch.detect.runner import detect
from servewatch.spec.schema import seconds
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from test_dashboards_integration import ALL, all_panels, grafana_regex, interpolate, panel_problems
from servewatch_testkit.synth.disaggregated import (
    KV_FAILURE_TRACK,
    ROLE_LABEL,
    TRACK_LABEL,
    TRACKS,
    pd_healthy,
    pd_kv_failure,
    pd_slow_canary,
)

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus")]

CONFIG = [
    ("  role: null\n", f"  role: {{label: {ROLE_LABEL}}}\n"),
    ("  track: null\n", f"  track: {{label: {TRACK_LABEL}}}\n"),
]
# alert -> the (role, track) it names on the slow canary, and why
SLOW_CANARY_FIRES = {
    "VLLMTimeToFirstTokenP95High": ("prefill", "the canary prefills 4x slower: its prefill TTFT p95 4.17 s"),
    "VLLMCanaryTimeToFirstTokenWorse": ("prefill", "4.17 s against the stable prefill's 0.917 s"),
    "VLLMInterTokenLatencyP95High": ("decode", "the canary decodes 3x slower: ITL p95 0.1475 s"),
    "VLLMCanaryInterTokenLatencyWorse": ("decode", "0.1475 s against the stable decode's 0.04875 s"),
}
KV_TRANSFER_GROUP = "vllm-kv-transfer"
# alert -> the role it names on the failing track's pools in pd_kv_failure, and why
KV_FAILURE_FIRES = {
    "VLLMKVTransferFailures": ("decode", "the decode engine fails 3 NIXL transfers per step: 0.1/s"),
    "VLLMKVNotificationFailures": ("decode", "the decode engine fails 3 NIXL notifications per step: 0.1/s"),
    "VLLMKVTransferTimeP95High": ("decode", "every pull of the decode pool takes (0.3, 0.5] s"),
    "VLLMKVRequestsExpired": ("prefill", "counted where blocks are freed unpulled: 3 per step on prefill"),
    "VLLMDecodeRequestsDeferredHigh": ("decode", "30 requests deferred until their KV cache arrives"),
}


@pytest.fixture(scope="module")
def configured(specs_with, tmp_path_factory):
    specs = specs_with({"config.yaml": CONFIG})
    model, files = generate.build(specs)
    out = tmp_path_factory.mktemp("pd-rules")
    # the GPU and SLO rules too: the boards read their records (framebuffer, cost, SLO panels)
    written = ("rules/vllm.rules.yaml", "rules/gpu.rules.yaml", "rules/slo.rules.yaml")
    writer.write(out, {k: v for k, v in files.items() if k in written})
    return model, [out / name for name in written], files


class Served:
    def __init__(self, scenario, rules):
        self.scenario = scenario
        self.start = backfill_start(scenario.steps, scenario.step)
        self.prom = LocalPrometheus(scenario.openmetrics(self.start), rule_files=rules).start()
        self.t = scenario.time_at(self.start, scenario.eval_step)

    def fired(self, alert) -> list[dict]:
        """Label sets that held the alert's expression at every evaluation of its `for` up to now."""
        step = self.scenario.step
        window = [
            self.t - seconds(alert.for_) + i * step for i in range(int(seconds(alert.for_) // step) + 1)
        ]
        history = self.prom.query_range(alert.expr, self.scenario.time_at(self.start, 0), self.t, step)
        return [r["metric"] for r in history if set(window) <= {float(ts) for ts, _ in r["values"]}]

    def ever(self, alert) -> list[dict]:
        history = self.prom.query_range(
            alert.expr, self.scenario.time_at(self.start, 0), self.t, self.scenario.step
        )
        return [r["metric"] for r in history]


@pytest.fixture(scope="module")
def served(configured):
    _, rules, _ = configured
    made = {
        name: Served(build(), rules)
        for name, build in (("healthy", pd_healthy), ("slow", pd_slow_canary), ("kv_failure", pd_kv_failure))
    }
    yield made
    for s in made.values():
        s.prom.close()


def _vllm_alerts(model):
    return [a for a in model.alerts() if a.family == "vllm"]


def test_a_healthy_pd_deployment_with_a_canary_fires_nothing(configured, served):
    model, _, _ = configured
    s = served["healthy"]
    for alert in _vllm_alerts(model):
        assert not s.ever(alert), (alert.alert, s.ever(alert))


def test_the_healthy_kv_transfer_alerts_are_quiet_on_data(configured, served):
    """Quiet because every transfer succeeds, not because no series exists: each KV-transfer alert's
    record has a value for every track, on the role that counts it."""
    model, _, _ = configured
    s = served["healthy"]
    kv = [a for a in _vllm_alerts(model) if a.group == KV_TRANSFER_GROUP]
    assert {a.alert for a in kv} <= set(KV_FAILURE_FIRES), "a KV-transfer alert the incident does not prove"
    for alert in kv:
        result = s.prom.query(model.record_for(alert.spec.signal, alert.spec.quantile), s.t)
        role = KV_FAILURE_FIRES[alert.alert][0]
        assert {(r["metric"][ROLE_LABEL], r["metric"][TRACK_LABEL]) for r in result} == {
            (role, track) for track in TRACKS
        }, (alert.alert, result)


def test_each_request_counts_once_on_the_decode_series_of_the_request_rate(configured, served):
    """The request rate per model keeps each role apart (the error and abort ratios read it per role):
    its decode series count each user request once; its prefill series are the prefill legs, every
    one finished with `length`, which whatever counts user requests leaves out."""
    s = served["healthy"]
    decode = s.prom.query(
        f'sum by ({TRACK_LABEL}) (model:vllm_request_success:rate5m{{{ROLE_LABEL}="decode"}})', s.t
    )
    want = s.scenario.truth["requests_per_s"] / 2  # per track
    assert {r["metric"][TRACK_LABEL]: float(r["value"][1]) for r in decode} == {
        "stable": pytest.approx(want),
        "canary": pytest.approx(want),
    }
    prefill = s.prom.query(
        f'sum by (finished_reason) (model:vllm_request_success:rate5m{{{ROLE_LABEL}="prefill"}})', s.t
    )
    finished = {r["metric"]["finished_reason"]: float(r["value"][1]) for r in prefill}
    assert {reason: rate for reason, rate in finished.items() if rate} == {"length": pytest.approx(2 * want)}


def test_prefill_engines_have_no_inter_token_latency_and_their_length_finishes_are_no_error(
    configured, served
):
    s = served["healthy"]
    itl = s.prom.query(
        'model:vllm_inter_token_latency_seconds:histogram_quantile_rate5m{quantile="0.95"}', s.t
    )
    assert {r["metric"][ROLE_LABEL] for r in itl} == {"decode"}
    assert all(float(r["value"][1]) == pytest.approx(s.scenario.truth["itl_p95"]) for r in itl)
    errors = s.prom.query("model:vllm_request_engine_errors:ratio_rate5m", s.t)
    assert {r["metric"][ROLE_LABEL] for r in errors} == {"prefill", "decode"}
    assert all(float(r["value"][1]) == 0 for r in errors)


def _fires_only(model, s, fires: dict[str, tuple[str, str]], track: str) -> None:
    """Each alert of `fires` fires for its role's pool on `track` only (the deployment's namespace and
    model, the engine's pod where the alert is per engine); no other vLLM alert ever holds."""
    truth = s.scenario.truth
    pods = {(e[ROLE_LABEL], e[TRACK_LABEL]): e["pod"] for e in truth["engines"]}
    for alert in _vllm_alerts(model):
        if alert.alert not in fires:
            assert not s.ever(alert), (alert.alert, s.ever(alert))
            continue
        role, why = fires[alert.alert]
        fired = s.fired(alert)
        named = {(m["namespace"], m["model_name"], m[ROLE_LABEL], m[TRACK_LABEL]) for m in fired}
        assert named == {(truth["namespace"], truth["model_name"], role, track)}, (alert.alert, why, fired)
        assert {m.get("pod", pods[role, track]) for m in fired} == {pods[role, track]}, (alert.alert, fired)
        assert all(m[TRACK_LABEL] == track for m in s.ever(alert)), (alert.alert, "named another track")


def test_a_slow_canary_fires_for_the_canary_only(configured, served):
    model, _, _ = configured
    _fires_only(model, served["slow"], SLOW_CANARY_FIRES, "canary")


def test_a_kv_transfer_failure_fires_for_the_failing_pools_only(configured, served):
    """The stable track's transfer path degrades: the decode pool's failures, transfer time and
    deferred requests, and its prefill pool's blocks expired unpulled, each alert naming its pool."""
    model, _, _ = configured
    _fires_only(model, served["kv_failure"], KV_FAILURE_FIRES, KV_FAILURE_TRACK)


def test_detect_suggests_the_role_and_track(served, default_model):
    s = served["healthy"]
    found = detect(s.prom.client, default_model.config, s.t)
    assert found.suggested["role"] == {
        "label": ROLE_LABEL,
        "values": {"decode": ["decode"], "prefill": ["prefill"]},
    }
    assert found.suggested["track"] == {"label": TRACK_LABEL, "stable": "stable"}
    topics = {f.topic for f in found.findings if f.level == "differs"}
    assert {"role", "track"} <= topics


def test_detect_reports_a_configured_label_no_series_carries(served, configured):
    model, _, _ = configured
    s = served["healthy"]
    missing = model.config.model_copy(
        update={"role": model.config.role.model_copy(update={"label": "worker_type"})}
    )
    found = detect(s.prom.client, missing, s.t)
    warned = [f.message for f in found.findings if f.topic == "role" and f.level == "warning"]
    assert warned and "no vllm:num_requests_running series carries it" in warned[0]


def _warned(found, topic: str) -> list[str]:
    return [f.message for f in found.findings if f.topic == topic and f.level == "warning"]


def test_detect_warns_of_role_values_the_config_maps_to_no_role(served, configured):
    """The fleet's decode engines say `decode`; a config that calls decode `generate` leaves them out
    of every role-scoped signal, and detect names the value."""
    model, _, _ = configured
    s = served["healthy"]
    role = model.config.role
    renamed = role.model_copy(update={"values": {**role.values, "decode": ("generate",)}})
    found = detect(s.prom.client, model.config.model_copy(update={"role": renamed}), s.t)
    [warned] = _warned(found, "role")
    assert warned.startswith(f"{role.label} values decode (") and "name no role in role.values" in warned
    assert _warned(detect(s.prom.client, model.config, s.t), "role") == []


def test_detect_warns_when_no_engine_is_on_the_stable_track(served, configured):
    """A stable value no engine carries leaves the canary alerts nothing to compare with."""
    model, _, _ = configured
    s = served["healthy"]
    track = model.config.track.model_copy(update={"stable": "v1"})
    found = detect(s.prom.client, model.config.model_copy(update={"track": track}), s.t)
    [warned] = _warned(found, "track")
    assert "no engine is on the stable track 'v1'" in warned
    assert _warned(detect(s.prom.client, model.config, s.t), "track") == []


# the rows that exist only with role or track set, each panel on the P/D fleet: data, legend labels
ROWS = {"vllm-serving": "Tracks side by side", "moe-deployment": "Prefill and decode pools side by side"}
KV_TRANSFER_ROW = "KV transfer"  # the MoE board's row of the NIXL transfer time and failures


def _row_problems(files, s, board: str, title: str) -> list[str]:
    """Each panel of the board's row whose title starts with `title`, on scenario server `s`: no data
    or legend labels its results lack."""
    dashboard = json.loads(files[f"dashboards/{board}.json"])
    [row] = [p for p in dashboard["panels"] if p["type"] == "row" and p["title"].startswith(title)]
    assert row["panels"], (board, title)
    values = {"datasource": "prometheus", "pod": ".*", "engine": ".*", "role": ".*", "track": ".*"}
    values |= {"namespace": grafana_regex(s.scenario.truth["namespace"])}
    values |= {"model": grafana_regex(s.scenario.truth["model_name"])}
    only_row = {"uid": dashboard["uid"], "panels": row["panels"]}
    return panel_problems(lambda e: s.prom.query(e, s.t), only_row, values, set())


@pytest.mark.parametrize("board", sorted(ROWS))
def test_the_side_by_side_rows_show_every_panel_with_data(configured, served, board):
    _, _, files = configured
    dashboard = json.loads(files[f"dashboards/{board}.json"])
    [row] = [p for p in dashboard["panels"] if p["type"] == "row" and p["title"].startswith(ROWS[board])]
    assert len(row["panels"]) >= 3
    assert _row_problems(files, served["slow"], board, ROWS[board]) == []
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"role", "track"} <= variables


@pytest.mark.parametrize("scenario", ["healthy", "kv_failure"])
def test_the_kv_transfer_row_shows_every_panel_with_data(configured, served, scenario):
    """The NIXL series of both roles feed the MoE board's transfer time and failure panels, healthy
    (every failure rate at 0) and failing."""
    _, _, files = configured
    assert _row_problems(files, served[scenario], "moe-deployment", KV_TRANSFER_ROW) == []


def test_the_default_boards_have_no_role_or_track(default_build):
    _, files = default_build
    for board in ROWS:
        dashboard = json.loads(files[f"dashboards/{board}.json"])
        assert not [p for p in dashboard["panels"] if p["title"].startswith(ROWS[board])]
        assert not {"role", "track"} & {v["name"] for v in dashboard["templating"]["list"]}


# the panels that count a deployment's requests and tokens: board -> titles (each request once)
COUNTING_PANELS = {
    "vllm-serving": (
        "Requests per second",
        "Finished requests by reason",
        "Generated tokens per second",
        "Token throughput",
        "Generation length: $model",
    ),
    "slo": ("Goodput: good output tokens per second",),
}
# of them, the panels of finished requests: their results add up to the fleet's user request rate
REQUEST_PANELS = ("Requests per second", "Finished requests by reason")


def _panel(files, board: str, title: str) -> dict:
    dashboard = json.loads(files[f"dashboards/{board}.json"])
    return next(
        p for row in dashboard["panels"] for p in [row, *row.get("panels", [])] if p["title"] == title
    )


def _board_values(scenario) -> dict[str, str]:
    truth = scenario.truth
    return {
        "datasource": "prometheus",
        "pod": ".*",
        "engine": ".*",
        "role": ".*",
        "track": ".*",
        "namespace": grafana_regex(truth["namespace"]),
        "model": grafana_regex(truth["model_name"]),
        "model:raw": truth["model_name"],
    }


def test_the_generated_tokens_stat_counts_the_decode_side_only(configured, served):
    """Every prefill leg generates one token: summed over roles, the stat would count it as output."""
    _, _, files = configured
    s = served["healthy"]
    [target] = _panel(files, "vllm-serving", "Generated tokens per second")["targets"]
    [result] = s.prom.query(interpolate(target["expr"], _board_values(s.scenario)), s.t)
    truth = s.scenario.truth
    assert truth["prefill_tokens_per_s"] > 0, "the fleet's prefill legs generate tokens: the test can fail"
    assert float(result["value"][1]) == pytest.approx(truth["generated_tokens_per_s"])


@pytest.mark.parametrize("board, title", [(b, t) for b, titles in COUNTING_PANELS.items() for t in titles])
def test_the_per_model_token_panels_read_the_counting_roles_only(configured, served, board, title):
    model, _, files = configured
    s = served["healthy"]
    counting = set(model.config.role.values["decode"]) | set(model.config.role.values["both"])
    for target in _panel(files, board, title)["targets"]:
        result = s.prom.query(interpolate(target["expr"], _board_values(s.scenario)), s.t)
        assert result, (title, target["expr"])
        roles = {r["metric"].get(ROLE_LABEL) for r in result}
        assert roles <= counting | {None}, (title, roles)
        if title.startswith("Generation length"):  # one request per observation: each counted once
            total = max(float(r["value"][1]) for r in result)  # the +Inf bucket
            assert total == pytest.approx(s.scenario.truth["requests_per_s"])
        if title in REQUEST_PANELS:  # every reason, role and track added up: each user request once
            total = sum(float(r["value"][1]) for r in result)
            assert total == pytest.approx(s.scenario.truth["requests_per_s"]), (title, total)


def test_the_fleet_finishes_each_request_on_both_roles(served):
    """What makes the request panels' test able to fail: the fleet's engines finish each user request
    twice (its prefill leg with `length`, then on decode), so a panel that added up every role would
    show twice the user request rate."""
    s = served["healthy"]
    truth = s.scenario.truth
    finished = s.prom.query(
        f'sum(rate(vllm:request_success_total{{namespace="{truth["namespace"]}"}}[5m]))', s.t
    )
    roles = {e[ROLE_LABEL] for e in truth["engines"]}
    assert float(finished[0]["value"][1]) == pytest.approx(len(roles) * truth["requests_per_s"])


def _boards(files) -> dict[str, dict]:
    """{board: dashboard} of every generated board."""
    return {
        path.removeprefix("dashboards/").removesuffix(".json"): json.loads(text)
        for path, text in files.items()
        if path.startswith("dashboards/") and path.endswith(".json") and path.count("/") == 1
    }


def _says_what_empty_means(dashboard: dict) -> set[str]:
    """Titles of the stats that show a text when they have no data (e.g. "not burning")."""
    return {p["title"] for p in all_panels(dashboard) if p["fieldConfig"]["defaults"].get("noValue")}


@pytest.mark.parametrize("scenario", ["healthy", "slow"])
def test_every_panel_of_every_board_shows_data_on_the_pd_fleet(configured, served, scenario):
    """Every board as generated for role and track, on the P/D fleet with a canary: every panel
    returns data with the labels its legend names, each per-model copy for the fleet's model. A
    stat that says what no data means (`noValue`: "not burning") may be empty. On the slow canary
    the TTFT budget is not spent: the SLO counts each request on its decode engine, whose first
    token waits for the KV transfer only; the 4x slower prefill legs are the TTFT alerts' (per role)
    and, behind a gateway, the client-side SLO's."""
    _, _, files = configured
    s = served[scenario]
    values = {**ALL, "role": ".*", "track": ".*"}
    values |= {"namespace": grafana_regex(s.scenario.truth["namespace"])}
    values |= {"model": grafana_regex(s.scenario.truth["model_name"])}
    boards = _boards(files)
    assert set(ROWS) | {"slo", "gpu-fleet"} <= set(boards)
    problems = []
    for dashboard in boards.values():
        found = panel_problems(
            lambda e: s.prom.query(e, s.t), dashboard, values, None, [s.scenario.truth["model_name"]]
        )
        may_be_empty = [f"{dashboard['uid']} / {title} /" for title in _says_what_empty_means(dashboard)]
        problems += [p for p in found if not p.startswith(tuple(may_be_empty))]
        if scenario == "slow" and dashboard["uid"] == "servewatch-slo":
            assert [p for p in found if "vllm-ttft: budget spent in" in p], found
    assert not problems, "\n".join(problems)
