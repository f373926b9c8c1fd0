"""From a synthetic incident to on-call, on 127.0.0.1: a real Prometheus 3.5 evaluates the generated rules
and sends to a real Alertmanager running the generated configuration, whose receivers post to a webhook
server in this test. Only the receivers' integrations and the timings (seconds instead of minutes)
differ from alertmanager/alertmanager.yaml; the routes and the inhibitions are the generated ones.

The incident, in the minutes before now (Prometheus evaluates rules at now, so the data ends there):
  llm-a  DeepSeek: every first token takes 3 s. All four TTFT burn-rate rows fire: the pages arrive
         together in one notification, the tickets are muted by them.
  llm-b  Qwen: 2% of requests fail (4x the 0.5% budget): the two availability ticket rows arrive.
  llm-c  Mixtral is as slow as DeepSeek, but the namespace's other vLLM pod, which served Mixtral
         until 8 minutes ago, is up without any vllm: metric since (VLLMMetricsAbsent, its `for`
         set to 0s here, the SLO rows' to SLO_FOR): it arrives, and silences the TTFT alerts of
         Mixtral in its namespace.
"""

from __future__ import annotations

import json
import time
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest
import yaml

from servewatch import generate
from servewatch.render import alertmanager
from servewatch_testkit.alertmanager import LocalAlertmanager
from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.servers import HttpStub
from servewatch_testkit.synth import RequestProfile, Series, to_openmetrics, up, vllm_engine, vllm_target

pytestmark = [pytest.mark.integration, pytest.mark.tools("promtool", "prometheus", "alertmanager")]

STEP, STEPS = 15.0, 41  # 10 minutes of data, the last sample just before now
SILENT_FROM = 8  # step from which mixtral-1 exports no vllm: metric (8 minutes before now)
SLOW = RequestProfile(1, 800, 200, 2.0, 1.0, 0.035)
FAST = RequestProfile(49, 800, 200, 0.05, 0.20, 0.035)
FAILED = RequestProfile(1, 800, 1, 0.05, 0.20, 0.035, finished_reason="error")
DEEPSEEK, QWEN, MIXTRAL = (
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3-235B-A22B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
)
PAGE, TICKET = "llm-serving-page", "llm-serving-ticket"
# seconds, not minutes: what orders the alerts is kept (a cause fires an SLO_FOR before its symptoms, a
# page waits less than a ticket), each step with a few evaluations (2 s) to spare. SLO_FOR is also what
# lets the cause reach Alertmanager first: Prometheus finds the Alertmanager about 5 s after it starts
# (service discovery sends its first targets after 5 s) and sends what fired before then one resend
# delay later, so with SLO_FOR at 5 s the cause and its symptoms arrive together, unmuted.
SLO_FOR, PAGE_WAIT, TICKET_WAIT = "10s", "1s", "3s"
RULE_EVAL = "2s"  # every group's interval here
SETTLE_S = 4  # after the expected notifications: longer than any group_wait, so a muted one would be here


def incident() -> list[Series]:
    kw = {"steps": STEPS, "step": STEP, "prior_steps": 100}
    out = vllm_engine("llm-a", "deepseek-0", DEEPSEEK, 0, requests=20, profiles=[SLOW], **kw)
    out += vllm_engine("llm-b", "qwen-0", QWEN, 0, requests=50, profiles=[FAST, FAILED], **kw)
    out += vllm_engine("llm-c", "mixtral-0", MIXTRAL, 0, requests=20, profiles=[SLOW], **kw)
    # the namespace's other pod served Mixtral for the first minutes, then stopped exporting vllm:
    # metrics while staying up (VLLMMetricsAbsent remembers what a target exported before)
    out += vllm_engine(
        "llm-c", "mixtral-1", MIXTRAL, 1, requests=20, profiles=[SLOW], active=(0, SILENT_FROM), **kw
    )
    out.append(up(vllm_target("llm-c", "mixtral-1"), 1, steps=STEPS))
    return out


class Webhook:
    """An HTTP server that keeps every notification Alertmanager posts, by receiver (the URL path)."""

    def __init__(self):
        self.posts: list[tuple[str, dict]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts.append((self.path.strip("/"), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.stub = HttpStub(Handler)
        self.url = self.stub.url

    def close(self):
        self.stub.close()


def webhook_config(generated: str, hook: Webhook) -> str:
    """The generated configuration with webhook receivers and timings in seconds: pages wait
    PAGE_WAIT, tickets TICKET_WAIT, as in production a page waits less than a ticket (the page that
    mutes a ticket reaches Alertmanager before the ticket's group is first sent)."""
    conf = yaml.safe_load(generated)
    for r in conf["receivers"]:
        r["webhook_configs"] = [{"url": f"{hook.url}/{r['name']}", "send_resolved": False}]

    def fast(route):
        if "group_wait" in route:
            route["group_wait"] = PAGE_WAIT if route.get("receiver") == PAGE else TICKET_WAIT
            route["group_interval"] = "1s"
        for child in route.get("routes", []):
            fast(child)

    fast(conf["route"])
    return yaml.safe_dump(conf)


class AlertingPrometheus(LocalPrometheus):
    """LocalPrometheus that sends its alerts to an Alertmanager."""

    def __init__(self, *args, alertmanager_url: str, **kw):
        super().__init__(*args, **kw)
        self.alertmanager = alertmanager_url.removeprefix("http://")

    def _write_config(self, rule_files):
        path = super()._write_config(rule_files)
        cfg = json.loads(path.read_text())
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        path.write_text(json.dumps(cfg, indent=2) + "\n")
        return path


@pytest.fixture(scope="module")
def oncall(tmp_path_factory, specs_with):
    # Causes fire before their symptoms, as they would in production: VLLMMetricsAbsent at once, the
    # SLO rows SLO_FOR later. Inhibition mutes what reaches Alertmanager after its cause, not before.
    specs = specs_with(
        {
            "overrides.yaml": [("overrides: {}", "overrides: {alerts: {VLLMMetricsAbsent: {for: 0s}}}")],
            "slos.yaml": [
                (f"alert: {name}\n", f"alert: {name}\n      for: {SLO_FOR}\n")
                for name in ("VLLMTTFTErrorBudgetBurn", "VLLMAvailabilityErrorBudgetBurn")
            ],
        }
    )
    _, files = generate.build(specs)
    rules_dir = tmp_path_factory.mktemp("rules")
    rule_files = []
    for name in ("vllm", "slo"):
        rule_files.append(rules_dir / f"{name}.rules.yaml")
        rule_files[-1].write_text(_on_one_clock(files[f"rules/{name}.rules.yaml"]))
    hook = Webhook()
    start = time.time() - 5 - (STEPS - 1) * STEP
    with LocalAlertmanager(webhook_config(files[alertmanager.PATH], hook)) as am:
        om = to_openmetrics(incident(), start, STEP)
        # Prometheus drops what fires before it has found the Alertmanager and resends only after the
        # resend delay (1m by default): 2s here, so every firing alert is there within seconds
        prom = AlertingPrometheus(
            om,
            rule_files=rule_files,
            # the recording rules over the data too: VLLMMetricsAbsent reads what each target
            # exported in the past, and the burn rates their windows' history
            rule_eval_interval=RULE_EVAL,
            alertmanager_url=am.url,
            extra_args=["--rules.alert.resend-delay=2s"],
        )
        with prom:
            yield {"hook": hook, "am": am, "prom": prom, **_wait_for(hook)}
    hook.close()


def _on_one_clock(rules: str) -> str:
    """The rules with every group evaluated at the global interval (RULE_EVAL): the test's durations
    are seconds, and a group's own interval in minutes (docs/scale.md, "Cadence") would let a cause
    fire after the symptoms it mutes."""
    doc = yaml.safe_load(rules)
    for group in doc["groups"]:
        group.pop("interval", None)
    return yaml.safe_dump(doc, sort_keys=False, width=1000)


EXPECTED = {
    (PAGE, "VLLMTTFTErrorBudgetBurn", "llm-a"): {("page", "1h"), ("page", "6h")},
    (TICKET, "VLLMAvailabilityErrorBudgetBurn", "llm-b"): {("ticket", "1d"), ("ticket", "3d")},
    (TICKET, "VLLMMetricsAbsent", "llm-c"): {(None, None)},
}


def _groups(hook: Webhook) -> dict[tuple, set]:
    """(receiver, alertname, namespace) -> {(tier, long)} of every alert notified so far."""
    out: dict[tuple, set] = {}
    for receiver, body in list(hook.posts):
        g = body["groupLabels"]
        key = (receiver, g.get("alertname"), g.get("namespace"))
        out.setdefault(key, set()).update(
            (a["labels"].get("tier"), a["labels"].get("long")) for a in body["alerts"]
        )
    return out


def _wait_for(hook: Webhook, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _groups(hook) != EXPECTED:
        time.sleep(0.5)
    time.sleep(SETTLE_S)
    return {"groups": _groups(hook), "posts": list(hook.posts)}


def test_the_expected_notifications_arrive_grouped_by_deployment(oncall):
    assert oncall["groups"] == EXPECTED


def test_each_notification_is_one_group_with_common_labels(oncall):
    pages = [body for receiver, body in oncall["posts"] if receiver == PAGE]
    assert len(pages) == 1, pages  # both page rows of DeepSeek in one notification
    [page] = pages
    assert page["version"] == "4" and page["status"] == "firing"
    assert page["groupLabels"] == {
        "alertname": "VLLMTTFTErrorBudgetBurn",
        "namespace": "llm-a",
        "model_name": DEEPSEEK,
    }
    common = page["commonLabels"]
    assert common["slo"] == "vllm-ttft" and common["tier"] == "page" and common["severity"] == "critical"
    assert common["team"] == "llm-serving"
    for alert in page["alerts"]:
        assert "of the 28d error budget is left" in alert["annotations"]["description"]
        assert alert["annotations"]["runbook_url"].endswith("/runbooks/VLLMTTFTErrorBudgetBurn.md")
        assert "var-model=" in alert["annotations"]["dashboard_url"]


def test_inhibited_alerts_fire_but_are_never_notified(oncall):
    """Alertmanager holds the muted alerts as inhibited: the tickets under DeepSeek's page, and every
    TTFT row of Mixtral under its namespace's VLLMMetricsAbsent."""
    with urllib.request.urlopen(oncall["am"].url + "/api/v2/alerts?inhibited=true&active=false") as r:
        alerts = json.load(r)
    muted = {
        (a["labels"]["alertname"], a["labels"]["namespace"], a["labels"].get("tier"), a["labels"].get("long"))
        for a in alerts
        if a["status"]["inhibitedBy"]
    }
    assert {
        ("VLLMTTFTErrorBudgetBurn", "llm-a", "ticket", "1d"),
        ("VLLMTTFTErrorBudgetBurn", "llm-a", "ticket", "3d"),
    } <= muted
    assert {(n, ns, t, w) for n, ns, t, w in muted if ns == "llm-c"} >= {
        ("VLLMTTFTErrorBudgetBurn", "llm-c", tier, long)
        for tier, long in (("page", "1h"), ("page", "6h"), ("ticket", "1d"), ("ticket", "3d"))
    }
    notified = {
        (a["labels"]["alertname"], a["labels"]["namespace"])
        for _, body in oncall["posts"]
        for a in body["alerts"]
    }
    assert ("VLLMTTFTErrorBudgetBurn", "llm-c") not in notified
