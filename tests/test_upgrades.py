"""Upgrades that keep a team's edits: a specs folder over the installed defaults (`extends:
servewatch`) holds only what the team changed; a full copy (`init --full`) can see per file what a
release changed (`servewatch defaults diff`) and take it (`defaults take`)."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import run_servewatch
from servewatch import generate
from servewatch.errors import SpecErrors
from servewatch.spec.loader import load

EXTENDS = "extends: servewatch\n"


def _team(tmp_path, files: dict[str, str]):
    specs = tmp_path / "team" / "specs"
    for rel, text in files.items():
        (specs / rel).parent.mkdir(parents=True, exist_ok=True)
        (specs / rel).write_text(text)
    return specs


def _outputs(files: dict[str, str]) -> dict[str, str]:
    return {p: t for p, t in files.items() if not p.startswith("specs/")}


def test_a_folder_of_only_config_and_overrides_generates_what_the_defaults_do(tmp_path, repo, default_build):
    specs = _team(
        tmp_path,
        {
            "config.yaml": EXTENDS + (repo / "specs" / "config.yaml").read_text(),
            "overrides.yaml": (repo / "specs" / "overrides.yaml").read_text(),
        },
    )
    _, files = generate.build(specs)
    assert _outputs(files) == _outputs(default_build[1])


def test_config_fields_merge_over_the_defaults_one_by_one(tmp_path, specs_with):
    team = load(_team(tmp_path, {"config.yaml": EXTENDS + "config:\n  cluster_label: k8s_cluster\n"}))
    edited = load(specs_with({"config.yaml": [("cluster_label: null", "cluster_label: k8s_cluster")]}))
    assert team.config == edited.config
    _, mine = generate.build(team_root := tmp_path / "team" / "specs")
    _, theirs = generate.build(
        specs_with({"config.yaml": [("cluster_label: null", "cluster_label: k8s_cluster")]})
    )
    assert _outputs(mine) == _outputs(theirs), team_root


def test_an_alert_of_the_teams_replaces_the_default_of_that_name(tmp_path, default_model):
    default = default_model.alert("VLLMRequestsWaitingHigh")
    assert default is not None
    group = f"""{EXTENDS}groups:
  - name: team-queue
    family: team
    records: [engine_requests_waiting]
    alerts:
      - alert: VLLMRequestsWaitingHigh
        signal: engine_requests_waiting
        threshold: 500
        for: 15m
        severity: warning
        summary: Requests wait.
        description: "{{{{ $labels.model_name }}}} has {{{{ $value | humanize }}}} waiting."
"""
    specs = _team(tmp_path, {"alerts.yaml": group})
    model, files = generate.build(specs)
    mine = [a for a in model.alerts() if a.alert == "VLLMRequestsWaitingHigh"]
    assert len(mine) == 1 and "> 500" in mine[0].expr
    assert (
        "rules/team.rules.yaml" in files and "VLLMRequestsWaitingHigh" not in files["rules/vllm.rules.yaml"]
    )


def test_a_mistake_in_the_teams_file_names_the_teams_file_and_line(tmp_path):
    specs = _team(tmp_path, {"config.yaml": EXTENDS + "config:\n  scrape_intervall: 30s\n"})
    with pytest.raises(SpecErrors) as caught:
        load(specs)
    [err] = caught.value.errors
    assert str(err).startswith(f"{specs / 'config.yaml'}:3:") and "scrape_intervall" in str(err)


def test_a_cross_field_rule_is_checked_on_the_merged_config_at_the_teams_section(tmp_path, repo):
    # cluster_label must not be an identity label (the defaults' identity holds namespace)
    specs = _team(tmp_path, {"config.yaml": EXTENDS + "config:\n  cluster_label: namespace\n"})
    with pytest.raises(SpecErrors) as caught:
        load(specs)
    [err] = caught.value.errors
    assert f"{specs / 'config.yaml'}:" in str(err) and "cluster_label" in str(err), str(err)


def test_a_client_source_in_the_teams_config_moves_the_default_slos_as_in_a_full_copy(
    tmp_path, specs_with, default_model
):
    """The defaults' SLIs and client-error signals are resolved against the merged config: a team's
    client_side moves the default TTFT and availability SLOs to the client as the same line in a
    full copy does, and a default SLO that config makes wrong is refused at its line in the defaults,
    with what the team can do (replace it by name), nothing written."""
    client = "  client_side: {source: llm-d-epp}\n"
    team = _team(tmp_path, {"config.yaml": f"{EXTENDS}config:\n{client}"})
    copy = specs_with({"config.yaml": [("  client_side: null\n", client)]})
    mine, theirs = load(team), load(copy)
    assert {n: s.sli.side for n, s in mine.slos.items()} == {n: s.sli.side for n, s in theirs.slos.items()}
    assert {s.sli.side for s in mine.slos.values()} == {"client"}
    assert mine.slos == theirs.slos and mine.signals == theirs.signals
    out = tmp_path / "out"
    done = run_servewatch("generate", "--specs", team, "--out", out)
    assert done.returncode == 2 and "Traceback" not in done.stderr and not out.exists(), done.stderr
    threshold = default_model.slos.slos["vllm-ttft"].sli.threshold
    assert f"slos.vllm-ttft.sli.threshold: {threshold:g} s is not a bucket bound" in done.stderr, done.stderr
    assert "replaces the default by name" in done.stderr, done.stderr


# -- a full copy: defaults diff and take ---------------------------------------------------------------
def _full_copy_of_an_older_release(tmp_path, servewatch):
    """init --full, then made to look as if copied from a release whose alerts/gpu.yaml had 0.9 (and
    never touched by the team), with the team's own edit of overrides.yaml."""
    assert servewatch("init", "--full", tmp_path).returncode == 0
    specs = tmp_path / "specs"
    gpu = specs / "alerts" / "gpu.yaml"
    older = gpu.read_text().replace("threshold: 0.95", "threshold: 0.9", 1)
    assert older != gpu.read_text()
    gpu.write_text(older)
    record = json.loads((specs / ".servewatch-defaults.json").read_text())
    record["files"]["alerts/gpu.yaml"] = hashlib.sha256(older.encode()).hexdigest()
    (specs / ".servewatch-defaults.json").write_text(json.dumps(record))
    (specs / "overrides.yaml").write_text((specs / "overrides.yaml").read_text() + "# ours\n")
    return specs


def test_diff_says_per_file_who_changed_it_and_shows_the_release_change(tmp_path, servewatch, repo):
    specs = _full_copy_of_an_older_release(tmp_path, servewatch)
    res = servewatch("defaults", "diff", "--specs", specs)
    assert res.returncode == 1, res.stderr
    assert "  alerts/gpu.yaml: changed by the release, not by you: take it" in res.stdout
    assert "  overrides.yaml: changed by you, not by the release: nothing to take" in res.stdout
    assert "-        threshold: 0.9\n" in res.stdout and "+        threshold: 0.95\n" in res.stdout


def test_take_writes_only_what_the_team_did_not_change(tmp_path, servewatch, repo):
    specs = _full_copy_of_an_older_release(tmp_path, servewatch)
    ours = (specs / "overrides.yaml").read_text()
    refused = servewatch("defaults", "take", "--specs", specs, "specs/overrides.yaml")
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert (specs / "overrides.yaml").read_text() == ours, "nothing written"
    assert servewatch("defaults", "take", "--specs", specs).returncode == 0
    assert (
        (specs / "alerts" / "gpu.yaml")
        .read_text()
        .endswith((repo / "specs" / "alerts" / "gpu.yaml").read_text())
    )
    assert (specs / "overrides.yaml").read_text() == ours
    res = servewatch("defaults", "diff", "--stat", "--specs", specs)
    assert res.returncode == 0 and "alerts/gpu.yaml" not in res.stdout


def test_diff_on_a_folder_over_the_defaults_lists_what_it_replaces(tmp_path, servewatch):
    assert servewatch("init", tmp_path).returncode == 0
    res = servewatch("defaults", "diff", "--specs", tmp_path / "specs")
    assert res.returncode == 0 and "extends the default specs" in res.stdout
    assert "you replace" not in res.stdout
