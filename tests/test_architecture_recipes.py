"""The recipes of docs/architecture.md, each followed once as written: an alert, a panel, an output
format. The exporter-profile recipe is followed by tests/test_exporter_profiles.py; the last test here
checks the doc sends the reader there and that test still exists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import servewatch
from servewatch import generate, verify, writer
from servewatch.errors import SpecErrors

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def recipe(title: str) -> str:
    """The text of one recipe in docs/architecture.md."""
    text = DOC.read_text()
    start = text.index(f"### {title}\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end > 0 else len(text)]


def write_out(files: dict[str, str], out: Path) -> Path:
    written, _ = writer.write(out, files)
    assert written, "nothing written"
    return out


# -- add an alert ------------------------------------------------------------------------------------
ALERT = """\
      - alert: VLLMRequestsRunningHigh
        signal: engine_requests_running
        threshold: 200
        for: 5m
        severity: info
        summary: A vLLM engine runs an unusually large batch.
        description: >-
          Engine {{ $labels.engine }} of {{ $labels.model_name }}
          in pod {{ $labels.namespace }}/{{ $labels.pod }} runs {{ $value | humanize }} requests at once.
        dashboard: *serving
"""
SERIES = (
    'vllm:num_requests_running{namespace="llm", pod="deepseek-v3-0", '
    'model_name="deepseek-ai/DeepSeek-V3", engine="ENGINE"}'
)
SCENARIOS = f"""
  - name: a large batch on one engine
    alert: VLLMRequestsRunningHigh
    series:
      - {{series: '{SERIES.replace("ENGINE", "0")}', values: '${{above}}x${{span}}'}}
      - {{series: '{SERIES.replace("ENGINE", "1")}', values: '${{below}}x${{span}}'}}
    expect:
      - {{at: 'for - eval_interval', firing: []}}
      - at: 'for + 5m'
        firing:
          - labels: {{namespace: llm, pod: deepseek-v3-0, model_name: deepseek-ai/DeepSeek-V3, engine: "0"}}
            value: '${{above}}'

  - name: a normal batch stays silent
    alert: VLLMRequestsRunningHigh
    series:
      - {{series: '{SERIES.replace("ENGINE", "0")}', values: '${{below}}x${{span}}'}}
    expect:
      - {{at: 'for + 5m', firing: []}}
"""
RUNBOOK = """\
  VLLMRequestsRunningHigh:
    meaning: |
      One engine runs more requests at once than the threshold: recipe-test meaning.
    steps:
      - id: running
        title: Requests running per engine
        query: {kind: signal, signal: engine_requests_running}
        unit: requests
        unhealthy: {alert: 1, of: VLLMRequestsRunningHigh}
        cause: the running batch is large
"""
NEXT_ALERT = "      - alert: VLLMPreemptionsHigh\n"


def alert_edits(scenarios: bool = True, runbook: bool = True) -> dict:
    scenarios_file = (Path(servewatch.__file__).parents[2] / "specs/scenarios/vllm.yaml").read_text()
    edits = {"alerts/vllm.yaml": [(NEXT_ALERT, ALERT + NEXT_ALERT)]}  # in the group recording the signal
    if scenarios:
        edits["scenarios/vllm.yaml"] = scenarios_file.rstrip("\n") + "\n" + SCENARIOS
    if runbook:
        edits["runbooks.yaml"] = [("  VLLMRequestsWaitingHigh:\n", RUNBOOK + "  VLLMRequestsWaitingHigh:\n")]
    return edits


def test_the_alert_recipe_names_the_files_the_test_edits():
    text = recipe("Add an alert")
    for place in ("specs/alerts/<family>.yaml", "specs/scenarios/<family>.yaml", "specs/runbooks.yaml"):
        assert place in text
    assert "servewatch generate" in text and "servewatch test" in text


@pytest.mark.tools("promtool")
def test_an_alert_added_as_the_recipe_says_is_ruled_proven_and_paged(specs_with, tmp_path):
    specs = specs_with(alert_edits())
    model, files = generate.build(specs)
    alert = model.alert("VLLMRequestsRunningHigh")
    assert alert is not None and alert.group == "vllm-saturation"
    rules = yaml.safe_load(files["rules/vllm.rules.yaml"])
    [rule] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "VLLMRequestsRunningHigh"]
    assert rule["expr"] == "engine:vllm_num_requests_running:max > 200"
    assert rule["for"] == "5m"
    assert "a large batch on one engine" in files["promtool/vllm.test.yaml"]
    page = files["runbooks/VLLMRequestsRunningHigh.md"]
    assert "recipe-test meaning" in page and "Requests running per engine" in page
    said: list[str] = []
    assert verify.run(write_out(files, tmp_path / "out"), echo=said.append, specs=specs), "\n".join(said)


def test_an_alert_without_its_scenarios_is_refused(specs_with):
    with pytest.raises(SpecErrors) as exc:
        generate.build(specs_with(alert_edits(scenarios=False)))
    assert any("VLLMRequestsRunningHigh" in str(e) for e in exc.value.errors)


def test_an_alert_without_a_runbook_entry_gets_only_the_default_page(specs_with):
    _, files = generate.build(specs_with(alert_edits(runbook=False)))
    assert "recipe-test meaning" not in files["runbooks/VLLMRequestsRunningHigh.md"]


# -- add a panel -------------------------------------------------------------------------------------
PANEL_KEY = "running_per_rank"
PANEL_TITLE = "Requests running per engine"
PANEL_METHOD = """
    def running_per_rank(self) -> None:
        self.add(
            timeseries(
                "Requests running per engine",
                grafana.Target(self.engine("engine_requests_running"), self.ctx.engine_legend()),
                w=8,
                description="Requests each rank runs at once.",
            ),
            optional="running_per_rank",
        )
"""


def scratch_package(tmp_path: Path, declare: bool) -> Path:
    """A copy of the servewatch package with the panel recipe's code edits (a scratch branch)."""
    root = tmp_path / "pkg"
    shutil.copytree(Path(servewatch.__file__).parent, root / "servewatch")
    board = root / "servewatch/plan/dashboards/moe_deployment.py"
    text = board.read_text()
    assert "        self.alerts()\n" in text
    text = text.replace(
        "        self.alerts()\n", "        self.running_per_rank()\n        self.alerts()\n", 1
    )
    board.write_text(
        text.replace("    def alerts(self) -> None:\n", PANEL_METHOD + "\n    def alerts(self) -> None:\n", 1)
    )
    if declare:
        spec = root / "servewatch/spec/dashboards.py"
        anchor = '        "tokens_per_rank": "generated tokens per rank (and its imbalance)",\n'
        assert anchor in spec.read_text()
        spec.write_text(
            spec.read_text().replace(anchor, anchor + f'        "{PANEL_KEY}": "{PANEL_TITLE}",\n')
        )
    return root


def generate_with_package(package: Path, specs: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """`servewatch generate` run from the scratch package into the folder that holds `specs`."""
    out = specs.parent
    env = {**os.environ, "PYTHONPATH": str(package)}
    code = (
        "import sys, servewatch; from servewatch.cli import main;"
        f"assert servewatch.__file__.startswith({str(package)!r}), servewatch.__file__;"
        "sys.exit(main(sys.argv[1:]))"
    )
    cmd = [sys.executable, "-c", code, "generate", "--specs", str(specs), "--out", str(out)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300), out


def moe_titles(out: Path) -> list[str]:
    panels = json.loads((out / "dashboards/moe-deployment.json").read_text())["panels"]
    return [q["title"] for p in panels for q in [p, *p.get("panels", [])]]


def test_the_panel_recipe_names_the_places_the_test_edits():
    text = recipe("Add a panel")
    for place in ("plan/dashboards/", "selection.py", "OPTIONAL_PANELS", "spec/dashboards.py", "panels:"):
        assert place in text


def test_a_panel_added_as_the_recipe_says_is_drawn_and_switched(tmp_path, specs_with):
    package = scratch_package(tmp_path, declare=True)
    on, out = generate_with_package(package, specs_with())
    assert on.returncode == 0, on.stderr
    assert PANEL_TITLE in moe_titles(out)
    panel = next(
        q
        for p in json.loads((out / "dashboards/moe-deployment.json").read_text())["panels"]
        for q in [p, *p.get("panels", [])]
        if q["title"] == PANEL_TITLE
    )
    # the Selection read the recording rule, and the frame said so in the description
    assert panel["targets"][0]["expr"].startswith("engine:vllm_num_requests_running:max{")
    assert "`engine:vllm_num_requests_running:max` (recording rule)" in panel["description"]
    schema = json.loads((out / "specs/servewatch.schema.json").read_text())
    assert PANEL_KEY in json.dumps(schema)

    switch = [
        (
            "panels: {alerts: true, tokens_per_rank: true, kv_transfer: true}",
            f"panels: {{alerts: true, {PANEL_KEY}: false}}",
        )
    ]
    off, out = generate_with_package(package, specs_with({"dashboards.yaml": switch}))
    assert off.returncode == 0, off.stderr
    titles = moe_titles(out)
    assert PANEL_TITLE not in titles and "Alerts firing for this deployment" in titles


def test_an_optional_panel_not_declared_in_optional_panels_is_refused(tmp_path, specs_with):
    res, _ = generate_with_package(scratch_package(tmp_path, declare=False), specs_with())
    assert res.returncode != 0
    assert f"declares no optional panel '{PANEL_KEY}'" in res.stderr


# -- add an output format ----------------------------------------------------------------------------
def csv_of_alerts(model) -> dict[str, str]:
    """A tiny output format: one line per alert."""
    lines = [f"{a.alert},{a.labels['severity']}" for a in model.alerts()]
    return {"alerts/alerts.csv": "alert,severity\n" + "\n".join(sorted(lines)) + "\n"}


def test_the_output_format_recipe_names_the_registration_point():
    text = recipe("Add an output format")
    assert "RENDERERS" in text and "generate.py" in text
    assert hasattr(generate, "RENDERERS")


def test_an_output_format_registered_as_the_recipe_says_is_written_with_the_manifest(
    monkeypatch, tmp_path, repo
):
    monkeypatch.setattr(generate, "RENDERERS", (*generate.RENDERERS, csv_of_alerts))
    model, files = generate.build(repo / "specs")
    out = write_out(files, tmp_path / "out")
    csv = (out / "alerts/alerts.csv").read_text().splitlines()
    assert csv[0] == "alert,severity" and len(csv) == 1 + len(model.alerts())
    assert "VLLMEngineStalled,critical" in csv
    assert "alerts/alerts.csv" in (out / writer.MANIFEST).read_text().splitlines()
    # no longer registered: the next run removes it, since the manifest lists it
    monkeypatch.setattr(generate, "RENDERERS", generate.RENDERERS[:-1])
    _, removed = writer.write(out, generate.build(repo / "specs")[1])
    assert removed == ["alerts/alerts.csv"] and not (out / "alerts/alerts.csv").exists()


def test_two_renderers_claiming_one_path_are_refused(monkeypatch, repo):
    monkeypatch.setattr(generate, "RENDERERS", (*generate.RENDERERS, lambda m: {"rules/vllm.rules.yaml": ""}))
    with pytest.raises(RuntimeError, match="two renderers produce rules/vllm.rules.yaml"):
        generate.build(repo / "specs")


# -- add an exporter profile -------------------------------------------------------------------------
def test_the_exporter_profile_recipe_points_at_the_test_that_follows_it(repo):
    text = recipe("Add an exporter profile")
    assert (
        "exporters.md#adding-a-profile" in text
        and "## Adding a profile" in (repo / "docs/exporters.md").read_text()
    )
    [name] = re.findall(r"`(test_a_profile_added_[a-z_]+)`", text)
    test = (repo / "tests/test_exporter_profiles.py").read_text()
    body = test[test.index(f"def {name}(") :]
    body = body[: body.index("\ndef ")]
    # the doc's steps: a profiles: block, fb_units set in a copy of the specs, promtool, synth data
    assert "add_profile(" in body and "fb_units=" in body and "verify.run(" in body
    assert "synth.dcgm_gpu(" in body and 'profile="next"' in body
    assert "catalog/dcgm.yaml" in text and "profiles:" in text


# -- the map -----------------------------------------------------------------------------------------
def packages(repo: Path) -> list[str]:
    """Every package under generator/servewatch/ and generator/servewatch_testkit/, one level deep."""
    return sorted(
        f"`{d.name}/`"
        for top in ("servewatch", "servewatch_testkit")
        for d in (repo / "generator" / top).iterdir()
        if d.is_dir() and any(d.glob("*.py"))
    )


def test_the_readme_layout_and_the_architecture_rooms_list_every_package(repo):
    readme = (repo / "README.md").read_text()
    layout = readme[readme.index("- Layout") :]
    rooms = DOC.read_text()
    rooms = rooms[rooms.index("## Rooms") : rooms.index("## Invariants")]
    assert len(packages(repo)) >= 15
    assert [p for p in packages(repo) if p not in layout] == []
    assert [p for p in packages(repo) if p not in rooms] == []
    assert "docs/architecture.md" in layout
