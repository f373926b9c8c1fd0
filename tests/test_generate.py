"""Generation: deterministic bytes, drift check, overrides, exporter profiles, promtool proof."""

import itertools
import re
import shutil

import partial_build
import pytest
import yaml
from conftest import REPO, run_servewatch

from servewatch import generate

# libyaml where it is there: the generated promtool files are megabytes, which PyYAML's pure Python
# loader takes seconds to read
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """An output folder `servewatch generate` wrote from the default specs, made once: tests that
    change it work on a generated_copy()."""
    out = tmp_path_factory.mktemp("generated") / "out"
    res = run_servewatch("generate", "--specs", REPO / "specs", "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def generated_copy(generated, dst):
    """What a first `generate --out dst` writes: a copy of `generated` (the specs lie outside both
    folders, so nothing in them depends on where they are)."""
    return shutil.copytree(generated, dst)


def test_same_input_same_bytes(repo, default_build):
    """A second build in the same process (its caches warm) writes the session's first build's bytes."""
    _, first = default_build
    _, second = generate.build(repo / "specs")
    assert first == second
    assert all(text.endswith("\n") for text in first.values())


def test_partial_builds_write_what_generate_writes(repo, default_build):
    """tests/partial_build.py, which tests of spec variants read rules, dashboards, runbooks and
    scenario tests from, renders generate's bytes and leaves none of those files out."""
    _, part = partial_build.build(repo / "specs", unit_test_files=True)
    full = default_build[1]
    assert part == {p: full.get(p) for p in part}
    assert {p for p in full if p.startswith(("rules/", "dashboards/", "runbooks/"))} <= set(part)
    assert any(p.startswith("promtool/") for p in part)


def test_committed_outputs_are_up_to_date(repo, servewatch):
    res = servewatch("generate", "--check")
    assert res.returncode == 0, res.stdout + res.stderr


def test_check_reports_a_hand_edit_and_a_stale_file(repo, specs_with, tmp_path, servewatch):
    out = tmp_path / "out"
    # a family that exists now and is dropped later leaves generated files behind
    group = "  - name: dcgm-exporter\n    family: "
    before = specs_with({"alerts/gpu.yaml": [(group + "gpu", group + "exporter")]})
    assert servewatch("generate", "--specs", before, "--out", out).returncode == 0
    assert (out / "rules" / "exporter.rules.yaml").is_file()
    specs = repo / "specs"
    rules = out / "rules" / "gpu.rules.yaml"
    rules.write_text(rules.read_text().replace("> 0.95", "> 0.9"))
    res = servewatch("generate", "--check", "--diff", "--specs", specs, "--out", out)
    assert res.returncode == 1
    verdict, *rest = res.stdout.splitlines()
    listed = list(itertools.takewhile(lambda line: re.match(r"  (changed|missing|stale)", line), rest))
    assert verdict.startswith(f"servewatch: {len(listed)} generated file(s) differ from the specs")
    assert "  stale (no longer generated): rules/exporter.rules.yaml" in listed
    assert any(line.startswith("  changed: rules/gpu.rules.yaml (+") for line in listed), listed
    assert re.search(r"^-.* > 0\.9$", res.stdout, re.M), res.stdout
    assert re.search(r"^\+.* > 0\.95$", res.stdout, re.M), res.stdout
    # generate repairs both
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    assert not (out / "rules" / "exporter.rules.yaml").exists()
    assert servewatch("generate", "--check", "--specs", specs, "--out", out).returncode == 0


def test_check_leads_with_its_verdict_and_cuts_a_long_diff_unless_asked(
    repo, tmp_path, servewatch, generated
):
    out, specs = generated_copy(generated, tmp_path / "out"), repo / "specs"
    board = next((out / "dashboards").glob("*.json"))
    board.write_text(board.read_text().replace('"', "'"))  # every line with a quote changes
    short = servewatch("generate", "--check", "--specs", specs, "--out", out)
    full = servewatch("generate", "--check", "--diff", "--specs", specs, "--out", out)
    assert short.returncode == full.returncode == 1
    rel = board.relative_to(out).as_posix()
    assert short.stdout.splitlines()[1].startswith(f"  changed: {rel} (+")
    whole = full.stdout.splitlines()
    assert f"--- {rel} (committed)" in whole and not any("the diff goes on" in x for x in whole)
    cut = short.stdout.splitlines()
    assert len(cut) < len(whole) and cut[-1].endswith("`servewatch generate --check --diff` shows all of it")
    assert cut[:-1] == whole[: len(cut) - 1], "the excerpt is the start of the whole diff"
    assert servewatch("generate", "--diff", "--specs", specs, "--out", out).returncode == 2


def test_hand_written_files_beside_generated_ones_are_never_removed(repo, tmp_path, servewatch, generated):
    out, specs = generated_copy(generated, tmp_path / "out"), repo / "specs"
    mine = out / "rules" / "team.rules.yaml"
    mine.write_text("groups: []\n")
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    assert servewatch("generate", "--check", "--specs", specs, "--out", out).returncode == 0
    assert mine.read_text() == "groups: []\n"


def _rules(files, family):
    groups = yaml.safe_load(files[f"rules/{family}.rules.yaml"])["groups"]
    return {r.get("alert") or r.get("record"): r for g in groups for r in g["rules"]}


def test_overrides_change_threshold_for_severity_labels_and_disable(specs_with):
    overrides = """
overrides:
  alerts:
    GPUFramebufferUsageHigh:
      {threshold: 0.97, for: 15m, keep_firing_for: 5m, severity: critical, labels: {team: inference}}
    VLLMRequestsWaitingHigh: {enabled: false}
  groups:
    vllm-latency: {enabled: false}
"""
    _, files = partial_build.build(specs_with({"overrides.yaml": overrides}), unit_test_files=True)
    gpu = _rules(files, "gpu")["GPUFramebufferUsageHigh"]
    assert "(gpu:dcgm_fb_used:ratio)" in gpu["expr"]
    assert gpu["expr"].endswith(" > 0.97")
    assert gpu["for"] == "15m" and gpu["keep_firing_for"] == "5m"
    assert gpu["labels"] == {"severity": "critical", "team": "inference"}
    vllm = _rules(files, "vllm")
    assert "VLLMRequestsWaitingHigh" not in vllm and "VLLMTimeToFirstTokenP95High" not in vllm
    assert "VLLMRequestsWaitingHigh" not in files["promtool/vllm.test.yaml"]
    manifest = yaml.safe_load(files["rules/kubernetes/gpu.prometheusrule.yaml"])
    assert (
        manifest["kind"] == "PrometheusRule"
        and manifest["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    )


def test_identity_labels_come_from_config(specs_with):
    edits = [
        ("cluster_label: null", "cluster_label: k8s_cluster"),
        ("workload_labels: exported", "workload_labels: plain"),
    ]
    _, files = partial_build.build(specs_with({"config.yaml": edits}))
    record = _rules(files, "gpu")["gpu:dcgm_fb_used:ratio"]["expr"]
    assert "max by (k8s_cluster, UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED)" in record
    assert "modelName, namespace, pod, host)" in record and "exported_pod" not in record
    # both host spellings ride along as context, so a fleet mid exporter upgrade keeps its host names
    assert "max by (k8s_cluster, UUID, GPU_I_ID, Hostname, hostname, gpu" in record


@pytest.mark.parametrize(
    "profile",
    [
        {},
        {"fb_units: mib": "fb_units: bytes"},
        {
            "hostname_label: Hostname": "hostname_label: hostname",
            "workload_labels: exported": "workload_labels: plain",
        },
        {"cluster_label: null": "cluster_label: cluster", "dcgm: ''": "dcgm: 'job=\"dcgm-exporter\"'"},
        # the SLO proofs under a cluster label (moved from test_slo_spec.py); its SLO and vLLM files are
        # the bytes of the profile above, whose verdicts `servewatch test` keeps: only the GPU's run again
        {"cluster_label: null": "cluster_label: cluster"},
    ],
)
@pytest.mark.tools("promtool")
def test_scenarios_hold_for_every_exporter_profile(specs_with, tmp_path, profile, servewatch):
    """The default scenarios use tokens, so they prove the rules whatever the exporter layout."""
    specs = specs_with({"config.yaml": list(profile.items())})
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    res = servewatch("test", "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr
    proofs = yaml.load((out / "promtool" / "slo.test.yaml").read_text(), Loader=LOADER)["tests"]
    slos = yaml.safe_load((specs / "slos.yaml").read_text())["slos"]
    names = {t["name"].split(":")[0] for t in proofs}
    assert names == set(slos) | {"record"}  # every SLO is proven, and the goodput record they make
    rules = (out / "rules" / "gpu.rules.yaml").read_text()
    if "fb_units: bytes" in (specs / "config.yaml").read_text():
        assert "DCGM_FI_DEV_FB_USED_BYTES" in rules and "DCGM_FI_DEV_FB_USED)" not in rules


@pytest.mark.tools("promtool")
def test_a_wrong_expectation_fails_promtool(specs_with, tmp_path, servewatch):
    """The generated tests can fail: a scenario that expects the full GPU on another index."""
    specs = specs_with(
        {
            "scenarios/gpu.yaml": [
                (
                    '- labels: {UUID: GPU-aaaa, gpu: "0", host: node-a',
                    '- labels: {UUID: GPU-aaaa, gpu: "9", host: node-a',
                )
            ]
        }
    )
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    res = servewatch("test", "--specs", specs, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 1
    assert "name: full GPU next to an empty one on the same host," in res.stdout


def test_every_alert_has_firing_and_silent_promtool_cases(default_build):
    model, files = default_build
    cases = {}
    for path, text in files.items():
        if path.startswith("promtool/") and path.endswith(".test.yaml"):
            for test in yaml.load(text, Loader=LOADER)["tests"]:
                for check in test.get("alert_rule_test", []):
                    cases.setdefault(check["alertname"], set()).add(
                        "firing" if check["exp_alerts"] else "silent"
                    )
    assert {a.alert: {"firing", "silent"} for a in model.alerts()} == cases


def test_alerts_carry_identity_runbook_and_dashboard(default_model):
    model = default_model
    for alert in model.alerts():
        ann = alert.annotations
        assert ann["summary"].endswith(".") and "{{" not in ann["summary"]
        assert ann["runbook_url"].endswith(f"/runbooks/{alert.alert}.md")
        assert "dashboard_url" in ann and alert.labels["severity"] in ("critical", "warning", "info")
        assert re.match(r"^[A-Z][A-Za-z0-9]+$", alert.alert)
    ttft = model.alert("VLLMTimeToFirstTokenP95High").annotations["description"]
    assert "$labels.model_name" in ttft and "$value" in ttft


def test_writer_is_atomic_and_leaves_no_temp_files(tmp_path):
    from servewatch import writer

    writer.write(tmp_path, {"rules/a.rules.yaml": "groups: []\n"})
    writer.write(tmp_path, {"rules/a.rules.yaml": "groups: []\n", "rules/b.rules.yaml": "x\n"})
    assert sorted(p.name for p in (tmp_path / "rules").iterdir()) == ["a.rules.yaml", "b.rules.yaml"]
    written, removed = writer.write(tmp_path, {"rules/b.rules.yaml": "x\n"})
    assert removed == ["rules/a.rules.yaml"] and written == [writer.MANIFEST]


def test_a_tampered_manifest_cannot_delete_outside_the_output(tmp_path):
    from servewatch import writer

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / writer.MANIFEST).write_text("../victim.txt\n/etc/hostname\n")
    writer.write(out, {"rules/a.rules.yaml": "x\n"})
    assert victim.read_text() == "keep"


@pytest.mark.tools("promtool")
def test_hand_written_promtool_tests_pass(repo):
    """The edge cases in tests/promtool/ check exact recording-rule values against the committed rules.
    `make test` runs `servewatch test` first, which proves these same bytes: their verdicts are reused
    (servewatch/verdicts.py), and anything that changed since is run."""
    from servewatch import verify

    files = sorted((repo / "tests" / "promtool").glob("*.yaml"))
    assert files, "hand-written edge cases live in tests/promtool/"
    failed = [r for r in verify.prove(files) if not r.passed]
    assert not failed, "\n".join(f"{r.job.label}: {r.output}" for r in failed)


def test_rule_outputs_fit_the_rulers(default_build):
    """Mimir rejects groups over 20 rules by default; the operator rejects objects over 512 KiB."""
    _, files = default_build
    for path, text in files.items():
        if path.startswith("rules/") and not path.endswith("/kustomization.yaml"):
            data = yaml.load(text, Loader=LOADER)
            # kube-prometheus-stack values hold one PrometheusRule's groups per key
            for ruler in data.get("additionalPrometheusRulesMap", {path: data}).values():
                groups = (ruler.get("spec") or ruler)["groups"]
                assert all(len(g["rules"]) <= 20 for g in groups), path
            assert len(text.encode()) < 512 * 1024, path
    mimir = yaml.safe_load(files["rules/mimir/gpu.yaml"])
    plain = yaml.safe_load(files["rules/gpu.rules.yaml"])
    assert mimir["namespace"] == "servewatch-gpu" and mimir["groups"] == plain["groups"]


def test_same_bytes_across_processes_and_hash_seeds(tmp_path, repo, generated):
    """Set iteration order differs between processes; the output must not. A process of its own with
    a fixed hash seed writes what this one (another seed) wrote into `generated`."""
    import os
    import subprocess
    import sys

    seed = "1" if os.environ.get("PYTHONHASHSEED") == "4242" else "4242"  # not this process' seed
    out = tmp_path / f"out-{seed}"
    res = subprocess.run(
        [sys.executable, "-m", "servewatch", "generate", "--out", out],
        cwd=repo,
        env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    outs = [
        {p.relative_to(o).as_posix(): p.read_bytes() for p in o.rglob("*") if p.is_file()}
        for o in (out, generated)
    ]
    assert outs[0] == outs[1]
    assert len(outs[0]) > 30
