"""`servewatch detect` probe by probe, each called on its own against a real Prometheus 3.5 holding a
small hand-built layout that exercises its decisions (ties, old names, MIG, duplicate scrapes).

tests/test_detect.py runs the whole command on the synthetic fleet and incidents.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servewatch import catalog
from servewatch.detect import PROBES, probes
from servewatch.detect.runner import current_config
from servewatch.investigate.client import Auth, Client
from servewatch.spec.loader import load
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.synth import Series, dcgm_gpu, dcgm_target, to_openmetrics, up

REPO = Path(__file__).resolve().parents[1]
STEPS, STEP = 10, 30


def _layout() -> list[Series]:
    """One node mid-upgrade: GPU 0 from exporter 4.8 (Hostname, MiB names), GPU 1 from 4.9 (hostname,
    byte names), one MIG instance of GPU 2 (4.8) scraped by two jobs, and a 1.x-named exporter (-o)."""
    old, second = dcgm_target("node", job="dcgm"), dcgm_target("node", job="dcgm-again")
    kw = dict(steps=STEPS, step=STEP)
    s = [up(old, 1, steps=STEPS), up(second, 1, steps=STEPS)]
    s += dcgm_gpu("node", 0, "GPU-0", 100, 900, targets=[old], **kw)
    s += dcgm_gpu(
        "node", 1, "GPU-1", 100, 900, targets=[old], hostname_label="hostname", profile="bytes", **kw
    )
    s += dcgm_gpu("node", 2, "GPU-2", 100, 900, targets=[old, second], mig_instance=(1, "3g.40gb"), **kw)
    s.append(
        Series("dcgm_fb_used", {"uuid": "GPU-9", "job": "old", "instance": "10.9.9.9:9400"}, [1.0] * STEPS)
    )
    return s


def _asked(series):
    """probes.Ask on a real Prometheus holding `series`, at their last sample."""
    start = backfill_start(STEPS, STEP)
    with LocalPrometheus(to_openmetrics(series, start, STEP)) as prom:
        with Client(prom.url, Auth.from_env()) as client:
            yield probes.Ask(client, start + (STEPS - 1) * STEP)


@pytest.fixture(scope="module")
def asked():
    yield from _asked(_layout())


TIE = 'UUID=~"GPU-0|GPU-1"'  # selectors.dcgm that leaves one 4.8 and one 4.9 GPU


def context(ask, dcgm_selector: str = "", **dcgm) -> probes.ProbeContext:
    config = load(REPO / "specs").config
    config = config.model_copy(
        update={
            "dcgm": config.dcgm.model_copy(update=dcgm),
            "selectors": {**config.selectors, "dcgm": dcgm_selector},
        }
    )
    return probes.ProbeContext(ask, config, catalog.load(), current_config(config))


def test_the_probe_table():
    topics = [p.topic for p in PROBES]
    assert len(topics) == len(set(topics)) == 15
    assert all(p.question for p in PROBES)
    documented = (REPO / "docs" / "detect.md").read_text()
    assert [t for t in topics if f"`{t}`" not in documented] == []


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_fb_units_counts_each_profile_and_suggests_the_majority(asked):
    out = probes.fb_units(context(asked))
    # GPU 0 and the two scrapes of the MIG instance are MiB (3 series); GPU 1 is bytes (1)
    assert out.counts["dcgm"] == {
        "fb_used_mib_series": 3,
        "fb_used_bytes_series": 1,
        "old_namespace_series": 1,
    }
    assert out.suggested == {"dcgm.fb_units": "mib"}  # the majority
    warn = {f.topic: f.message for f in out.findings if f.level == "warning"}
    assert warn["dcgm.fb_units"].startswith("mid-upgrade: 3 series named DCGM_FI_DEV_FB_USED (MiB, exporter")
    assert "1 named DCGM_FI_DEV_FB_USED_BYTES (bytes, exporter 4.9+)" in warn["dcgm.fb_units"]
    assert warn["dcgm.names"].startswith("1 series named dcgm_fb_used: an exporter runs with -o")


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_fb_units_tie_prefers_the_newer_profile(asked):
    out = probes.fb_units(context(asked, TIE, fb_units="mib"))
    assert out.counts["dcgm"]["fb_used_mib_series"] == out.counts["dcgm"]["fb_used_bytes_series"] == 1
    assert out.suggested == {"dcgm.fb_units": "bytes"}


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
@pytest.mark.parametrize("configured", ["Hostname", "hostname"])
def test_hostname_label_suggests_the_majority_and_keeps_the_configured_one_on_a_tie(asked, configured):
    out = probes.hostname_label(context(asked, hostname_label=configured))
    assert out.counts["dcgm"] == {"hostname_label_Hostname": 3, "hostname_label_hostname": 1}
    assert out.suggested == {"dcgm.hostname_label": "Hostname"}  # 3 to 1 whatever is configured
    [mixed] = out.findings
    assert mixed.message.startswith(
        "mixed spellings (mid-upgrade): 3 FB series carry Hostname (exporter <= 4.8.2), "
        "1 carry hostname (>= 4.8.3);"
    )
    tie = probes.hostname_label(context(asked, TIE, hostname_label=configured))
    assert tie.suggested == {"dcgm.hostname_label": configured}


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_mig_and_duplicate_scrapes(asked):
    ctx = context(asked)
    mig = probes.mig(ctx)
    assert mig.counts == {"dcgm": {"mig_instance_series": 2}}  # one instance, scraped twice
    dup = probes.duplicates(ctx)
    assert dup.counts == {"dcgm": {"gpus_scraped_twice": 1}}
    [finding] = dup.findings
    assert finding.message.startswith("GPU-2 GPU_I_ID 1 is scraped by 2 targets: dcgm-again/")
    narrow = ctx.config.model_copy(
        update={"identity": ctx.config.identity.model_copy(update={"dcgm": ("UUID",)})}
    )
    ctx = probes.ProbeContext(asked, narrow, catalog.load(), current_config(narrow))
    assert [f.topic for f in probes.mig(ctx).findings] == ["dcgm.mig", "identity.dcgm"]


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_workload_labels_unknown_when_no_pod_holds_a_gpu(asked):
    out = probes.workload_labels(context(asked))
    assert out.suggested == {} and "unknown" in out.findings[0].message


# -- profiles that name the framebuffer alike: exporter 4.9 (bytes) and 4.10 (bytes-4.10) ----------------
def _twins_layout() -> list[Series]:
    """One node mid-upgrade from exporter 4.9 to 4.10: GPU A from 4.9, GPUs B and C from 4.10, GPU D
    from 4.10 without the PCIe fields (a counters CSV that leaves them out), GPU E from 4.10 without
    the PCIe fields but with the NVLink ones (a CSV that swaps them)."""
    tgt = dcgm_target("node", job="dcgm")
    kw = dict(steps=STEPS, step=STEP, targets=[tgt], hostname_label="hostname")
    s = [up(tgt, 1, steps=STEPS)]
    s += dcgm_gpu("node", 0, "GPU-A", 100, 900, profile="bytes", **kw)
    s += dcgm_gpu("node", 1, "GPU-B", 100, 900, profile="bytes-4.10", **kw)
    s += dcgm_gpu("node", 2, "GPU-C", 100, 900, profile="bytes-4.10", **kw)
    s += dcgm_gpu("node", 3, "GPU-D", 100, 900, profile="bytes-4.10", drop=("pcie_tx", "pcie_rx"), **kw)
    s += dcgm_gpu(
        "node",
        4,
        "GPU-E",
        100,
        900,
        profile="bytes-4.10",
        drop=("pcie_tx", "pcie_rx"),
        nvlink_links=True,
        **kw,
    )
    return s


@pytest.fixture(scope="module")
def twins_asked():
    yield from _asked(_twins_layout())


def _own(profile: str, field: str) -> str:
    return catalog.load().dcgm.profile(profile).metric(field)


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_fb_units_tells_profiles_that_share_the_fb_name_apart_by_their_own_names(twins_asked):
    """4.9 and 4.10 name the framebuffer alike: the PCIe names only one of them uses decide."""
    out = probes.fb_units(context(twins_asked))
    assert out.counts["dcgm"]["fb_used_bytes_series"] == 5  # one FB name for both profiles
    # per GPU a TX and an RX series: A under 4.9's names, B and C (PCIe) and E (NVLink) under 4.10's
    assert (
        out.counts["dcgm"]["bytes_only_name_series"],
        out.counts["dcgm"]["bytes-4.10_only_name_series"],
    ) == (
        2,
        6,
    )
    assert out.suggested == {"dcgm.fb_units": "bytes-4.10"}  # the majority
    [warn] = [f.message for f in out.findings if f.level == "warning"]
    assert warn.startswith(
        f"mid-upgrade: 2 series named {_own('bytes', 'pcie_rx')}, {_own('bytes', 'pcie_tx')} (bytes"
    )
    ten = ", ".join(sorted(_own("bytes-4.10", f) for f in ("nvlink_rx", "nvlink_tx", "pcie_rx", "pcie_tx")))
    assert f"6 series named {ten} (bytes-4.10" in warn, warn
    assert warn.endswith("suggesting the majority, bytes-4.10")


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
@pytest.mark.parametrize(
    ("gpus", "configured", "suggested"),
    [
        ('UUID=~"GPU-A|GPU-B"', "bytes", "bytes-4.10"),  # a tie: the newer
        ('UUID="GPU-A"', "bytes-4.10", "bytes"),  # 4.9 alone, whatever is configured
        ('UUID="GPU-B"', "mib", "bytes-4.10"),  # 4.10 alone
        ('UUID="GPU-E"', "bytes", "bytes-4.10"),  # 4.10 told by its NVLink names alone
        ('UUID="GPU-D"', "mib", "bytes"),  # nothing tells them apart: the first
        ('UUID="GPU-D"', "bytes-4.10", "bytes-4.10"),  # ... or the configured one of them
    ],
)
def test_fb_units_between_profiles_that_share_the_fb_name(twins_asked, gpus, configured, suggested):
    out = probes.fb_units(context(twins_asked, gpus, fb_units=configured))
    assert out.suggested == {"dcgm.fb_units": suggested}
    tie = "|" in gpus  # two profiles' own names: a mid-upgrade warning
    assert [f.level for f in out.findings] == ["info", "warning" if tie else "info"]  # FB, what decided
    if gpus == 'UUID="GPU-D"':
        assert "no " in out.findings[1].message and out.findings[1].message.endswith(
            f"suggesting {suggested}"
        )


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_a_profile_whose_fb_name_no_other_shares_asks_nothing_more(asked):
    """The 4.8 names are mib's alone: no query for twins, no count of their names."""
    out = probes.fb_units(context(asked, 'UUID="GPU-0"'))
    assert out.suggested == {"dcgm.fb_units": "mib"}
    assert not [k for k in out.counts["dcgm"] if k.endswith("_only_name_series")]
