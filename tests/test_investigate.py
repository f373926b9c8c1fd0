"""`servewatch investigate` pieces that need no server: verdicts, time parsing, credentials, progress,
argument errors. The end-to-end behaviour against a real Prometheus is in test_investigate_integration.py."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

from servewatch.cli import main
from servewatch.investigate import verdict as v
from servewatch.investigate.cli import Progress, parse_time
from servewatch.investigate.client import Auth, Client, InvestigateError
from servewatch.runbooks import book

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pages(default_model):
    return {p.name: p for p in book.pages(default_model)}


def rows(*values, label="engine"):
    return [v.ResultRow({label: str(i)}, float(x)) for i, x in enumerate(values)]


# -- verdicts ----------------------------------------------------------------------------------------


def test_threshold_verdicts(pages):
    kv = pages["VLLMKVCacheUsageHigh"].step("kv-usage")  # suspicious 0.85, unhealthy 0.95 (the alert's)
    assert v.judge(kv, rows(0.5, 0.6)).verdict == "healthy"
    assert v.judge(kv, rows(0.5, 0.9)).verdict == "suspicious"
    j = v.judge(kv, rows(0.5, 0.98, 0.9))
    assert j.verdict == "unhealthy" and j.worst.labels == {"engine": "1"}
    assert "98.0% at engine=1 (above 95.0%, VLLMKVCacheUsageHigh's threshold 0.95)" in j.detail
    assert v.judge(kv, rows(0.95)).verdict == "suspicious"  # at the threshold is not beyond it
    assert v.judge(kv, rows(0.95 + 1e-15)).verdict == "unhealthy"  # beyond, as the alert's `> 0.95` sees it
    assert v.judge(kv, []).verdict == "no-data"
    assert v.judge(kv, [v.ResultRow({}, math.nan)]).verdict == "no-data"


def test_a_verdict_names_the_tuned_threshold_it_was_judged_by(specs_with):
    """One fact, one place: a threshold tuned in overrides moves the step and is named with it."""
    from servewatch.model import Model
    from servewatch.spec.loader import load

    tuned = "overrides:\n  alerts:\n    GPUFramebufferUsageHigh: {threshold: 0.97}\n"
    model = Model(load(specs_with({"overrides.yaml": tuned})))
    page = {p.name: p for p in book.pages(model)}["GPUFramebufferUsageHigh"]
    full = page.step("fullest-gpus")
    j = v.judge(full, rows(0.96, 0.5, label="UUID"))
    assert j.verdict == "suspicious"  # above 0.97 x 0.97, not above the tuned 0.97
    assert j.detail.endswith(
        "(above 94.1%, 0.97 x GPUFramebufferUsageHigh's threshold 0.97, tuned in overrides)"
    )
    j = v.judge(full, rows(0.975, label="UUID"))
    assert j.detail.endswith("(above 97.0%, GPUFramebufferUsageHigh's threshold 0.97, tuned in overrides)")
    own = page.step("rank-imbalance")
    assert v.judge(own, rows(1.2)).detail.endswith("(above 1.15x, the runbook step's own threshold)")


def test_low_is_bad_for_up(pages):
    up = pages["DCGMExporterDown"].step("exporter-up")
    assert v.judge(up, rows(1, 1)).verdict == "healthy"
    j = v.judge(up, rows(1, 0))
    assert j.verdict == "unhealthy" and j.detail == "1 of 2 target(s) down: engine=1"
    assert v.judge(up, []).verdict == "unhealthy"  # no target matches at all


def test_present_and_empty_verdicts(pages):
    cond = pages["GPUFramebufferMetricsMissing"].step("partner-missing")
    assert v.judge(cond, []).verdict == "healthy"
    assert v.judge(cond, [v.ResultRow({"job": "dcgm", "instance": "a:9400"}, 1)]).verdict == "unhealthy"


def test_names_tell_a_rename(pages):
    names = pages["GPUFramebufferMetricsMissing"].step("fb-metric-names")
    ok = [
        v.ResultRow({"__name__": n}, 8)
        for n in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
    ]
    assert v.judge(names, ok).verdict == "healthy"
    renamed = [
        v.ResultRow({"__name__": n}, 8) for n in ("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_FREE_BYTES")
    ]
    j = v.judge(names, renamed)
    assert j.verdict == "unhealthy" and "(renamed)" in j.detail
    j = v.judge(names, [v.ResultRow({"__name__": "DCGM_FI_DEV_FB_USED"}, 8)])
    assert (
        j.verdict == "unhealthy"
        and j.detail.startswith("missing: DCGM_FI_DEV_FB_FREE")
        and "renamed" not in j.detail
    )
    assert v.judge(names, []).verdict == "unhealthy"


def test_labels_layout(pages):
    layout = pages["GPUFramebufferMetricsMissing"].step("label-layout")
    assert layout.expected_labels == ("Hostname", "UUID")
    assert v.judge(layout, [v.ResultRow({"Hostname": "n1", "UUID": "GPU-1"}, 3)]).verdict == "healthy"
    j = v.judge(layout, [v.ResultRow({"hostname": "n1", "UUID": "GPU-1"}, 3)])
    assert j.verdict == "unhealthy" and j.detail == "no series carries Hostname; found hostname instead"


def test_info_steps_summarise(pages):
    prefix = pages["VLLMKVCacheUsageHigh"].step("prefix-cache-hits")
    assert v.judge(prefix, rows(0.39, 0.39)).detail == "2 series, all 39.0%"
    assert v.judge(prefix, rows(0.2, 0.5)).detail == "2 series, from 20.0% to 50.0%"
    assert v.judge(prefix, rows(0.2)).detail == "value 20.0%"
    assert v.judge(prefix, rows(0.2)).verdict == "info"


def test_overall():
    assert v.overall(["healthy", "info", "no-data"]) == "healthy"
    assert v.overall(["healthy", "suspicious"]) == "suspicious"
    assert v.overall(["suspicious", "unhealthy", "healthy"]) == "unhealthy"
    assert v.overall(["info", "no-data"]) == "no-data"
    assert v.overall(["unhealthy", "error"]) == "error"


# -- time, credentials, progress --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1767225600", 1767225600.0),
        ("1767225600.5", 1767225600.5),
        ("2026-01-01T00:00:00Z", 1767225600.0),
        ("2026-01-01T01:00:00+01:00", 1767225600.0),
        ("2026-01-01 00:00:00", 1767225600.0),
        ("now", 1767225600.0),
        ("-30m", 1767225600.0 - 1800),
        ("-1h30m", 1767225600.0 - 5400),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text, now=1767225600.0) == expected


def test_parse_time_rejects_nonsense():
    with pytest.raises(InvestigateError, match="is not a time"):
        parse_time("yesterday")


def test_auth_from_env_never_shows_secrets():
    a = Auth.from_env({"SERVEWATCH_PROMETHEUS_TOKEN": "Zx9-secret"})
    assert a.kind == "bearer token" and "Zx9" not in repr(a)
    b = Auth.from_env({"SERVEWATCH_PROMETHEUS_USER": "u", "SERVEWATCH_PROMETHEUS_PASSWORD": "Qq7-secret"})
    assert b.kind == "basic auth" and "Qq7" not in repr(b)
    assert Auth.from_env({}).kind == "none"
    with pytest.raises(InvestigateError, match="not both"):
        Auth.from_env(
            {
                "SERVEWATCH_PROMETHEUS_TOKEN": "t",
                "SERVEWATCH_PROMETHEUS_USER": "u",
                "SERVEWATCH_PROMETHEUS_PASSWORD": "p",
            }
        )
    with pytest.raises(InvestigateError, match="PASSWORD is not"):
        Auth.from_env({"SERVEWATCH_PROMETHEUS_USER": "u"})


def test_url_credentials_are_not_shown():
    c = Client("http://user:secret@127.0.0.1:9/", Auth())
    assert c.shown == "http://127.0.0.1:9" and "secret" not in c.shown


def test_progress_on_a_terminal_rewrites_one_line():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    p = Progress(s)
    p(1, 2, "A", "first step")
    p(2, 2, "A", "second")
    p.done()
    text = s.getvalue()
    assert text.startswith("\rinvestigating A: [1/2] first step")
    assert "\rinvestigating A: [2/2] second" in text and text.endswith("\r") and "\n" not in text


def test_progress_elsewhere_is_terse_and_quiet_is_silent():
    s = io.StringIO()
    p = Progress(s)
    for i in range(3):
        p(i + 1, 3, "A", "x")
    p(1, 1, "B", "y")
    assert (
        s.getvalue() == "servewatch: investigating A (3 queries)\nservewatch: investigating B (1 queries)\n"
    )
    q = io.StringIO()
    Progress(q, quiet=True)(1, 1, "A", "x")
    assert q.getvalue() == ""


# -- argument errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (["NoSuchAlert", "--prometheus", "http://127.0.0.1:9"], "no enabled alert named 'NoSuchAlert'"),
        (["VLLMKVCacheUsageHigh"], "--prometheus URL is required (or set SERVEWATCH_PROMETHEUS_URL)"),
        (["VLLMKVCacheUsageHigh", "--prometheus", "127.0.0.1:9090"], "must be an http:// or https:// URL"),
        (
            ["VLLMKVCacheUsageHigh", "--prometheus", "http://x", "--label", "pod"],
            "label filter 'pod' is not LABEL=VALUE",
        ),
        (["VLLMKVCacheUsageHigh", "--prometheus", "http://x", "--at", "soon"], "--at 'soon' is not a time"),
        (
            ["VLLMKVCacheUsageHigh", "--prometheus", "http://x", "--ca-file", "/nonexistent.pem"],
            "--ca-file /nonexistent.pem does not exist",
        ),
    ],
)
def test_argument_errors(capsys, monkeypatch, argv, message):
    monkeypatch.delenv("SERVEWATCH_PROMETHEUS_URL", raising=False)
    code = main(["investigate", "--specs", str(REPO / "specs"), *argv])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("servewatch: error: ") and message in err, err
