"""Exporter profiles: every dcgm-exporter fact comes from catalog/dcgm.yaml, and what a profile changes
changes everywhere (rules, dashboards, runbooks, promtool tests)."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
from pathlib import Path

import partial_build
import pytest
import yaml

from servewatch import catalog, generate, verify, writer, yamlio
from servewatch.cli import main
from servewatch.errors import SpecErrors
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch_testkit import synth
from servewatch_testkit.localprom import LocalPrometheus, backfill_start
from servewatch_testkit.slo_proof import SLO_TEST


SPECS = Path(__file__).resolve().parents[1] / "specs"


def specs_edited(specs_with, edits: dict | None = None, config: dict | None = None, **dcgm) -> Path:
    """A copy of the default specs with `config.dcgm` changed by `dcgm`, other `config` keys replaced,
    and other files edited (specs_with's `edits`)."""
    doc = yaml.safe_load((SPECS / "config.yaml").read_text())
    doc["config"] = {**doc["config"], **(config or {}), "dcgm": {**doc["config"]["dcgm"], **dcgm}}
    return specs_with({"config.yaml": yaml.safe_dump(doc), **(edits or {})})


def build_with(specs_with, edits: dict | None = None, config: dict | None = None, **dcgm):
    """Model and generated files from specs_edited(...)."""
    return generate.build(specs_edited(specs_with, edits, config, **dcgm))


def generate_with(
    specs_with, edits: dict | None = None, config: dict | None = None, **dcgm
) -> dict[str, str]:
    return build_with(specs_with, edits, config, **dcgm)[1]


@pytest.fixture(scope="module")
def profile_build(specs_with):
    """``profile_build(fb_units)``: (model, rules, dashboards and runbooks) of the specs with that
    profile (tests/partial_build.py), made once per module: several tests read the same profile's
    output, none changes it."""
    made: dict[str, tuple] = {}

    def get(profile: str) -> tuple:
        if profile not in made:
            made[profile] = partial_build.build(specs_edited(specs_with, fb_units=profile))
        return made[profile]

    return get


def panel(files: dict[str, str], board: str, title: str) -> dict:
    panels = json.loads(files[f"dashboards/{board}.json"])["panels"]
    nested = [q for p in panels for q in [p, *p.get("panels", [])]]  # collapsed rows carry their panels
    return next(p for p in nested if p["title"] == title and p["type"] != "row")


@pytest.mark.parametrize(("profile", "unit"), [("mib", "MBs"), ("bytes", "Bps"), ("bytes-4.10", "Bps")])
def test_nvlink_throughput_is_read_as_the_rate_it_already_is(profile_build, profile, unit):
    """DCGM's NVLink field is a throughput (MB/s up to exporter 4.8, bytes/s in 4.9), though the
    exporter's CSV types it counter: rate() over it would chart the change of a speed."""
    files = profile_build(profile)[1]
    nvlink = panel(files, "gpu-fleet", "NVLink throughput")
    [target] = nvlink["targets"]
    name = catalog.load().dcgm.profile(profile).metric("nvlink_throughput")
    assert name in target["expr"] and "rate(" not in target["expr"]
    assert nvlink["fieldConfig"]["defaults"]["unit"] == unit


# -- what a profile changes, it changes everywhere ----------------------------------------------------
FENCE_RE = re.compile(r"```.*?```", re.S)


def only_in(a: str, b: str) -> dict[str, str]:
    """Names profile `a` gives a field that profile `b` does not use: name -> b's name for the field."""
    dcgm = catalog.load().dcgm
    pa, pb = dcgm.profile(a), dcgm.profile(b)
    used = {n.name for n in pb.metrics.values()}
    return {n.name: pb.metric(f) for f, n in pa.metrics.items() if n.name not in used and pb.has(f)}


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def stray_names(files: dict[str, str], wrong: dict[str, str], prose: bool = True) -> list[str]:
    """Where another profile's names appear. Rules and dashboards may name none; runbooks none in a
    query, and in prose (if checked) only beside the configured name: a sentence explaining a rename."""
    problems = []
    for path, text in sorted(files.items()):
        if path.startswith(("rules/", "dashboards/")):
            problems += [f"{path}: {name}" for name in wrong if _mentions(text, name)]
        elif path.startswith("runbooks/"):
            for block in FENCE_RE.findall(text):
                problems += [f"{path}: {name} in a query" for name in wrong if _mentions(block, name)]
            for para in FENCE_RE.sub("", text).split("\n\n") if prose else ():
                problems += [
                    f"{path}: {name} without {ours}: {para.strip()[:100]}"
                    for name, ours in wrong.items()
                    if _mentions(para, name) and not _mentions(para, ours)
                ]
    return problems


def test_the_4_9_profile_leaves_no_pre_4_9_name_in_rules_dashboards_or_runbooks(profile_build):
    old = only_in("mib", "bytes")
    # the fields the issue names: FB, utilization, power, temperature, XID, NVLink, profiling
    for name in (
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    ):
        assert name in old
    files = profile_build("bytes")[1]
    assert stray_names(files, old) == []
    fleet = files["dashboards/gpu-fleet.json"]
    for name in ("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_XID_ERROR"):
        assert _mentions(fleet, name)
    util = panel(files, "gpu-fleet", "GPU utilization (full GPUs)")["fieldConfig"]["defaults"]
    assert (util["unit"], util["min"], util["max"]) == ("percentunit", 0, 1)  # 4.9: a 0-1 ratio
    assert "DCGM_FI_DEV_FB_USED_BYTES" in files["rules/gpu.rules.yaml"]


def test_the_default_profile_names_no_4_9_only_metric(repo):
    """The committed output (profile mib) queries no name an exporter <= 4.8 lacks (runbook prose may
    explain what 4.9 calls the fields)."""
    files = {
        p.relative_to(repo).as_posix(): p.read_text()
        for d in ("rules", "dashboards", "runbooks")
        for p in (repo / d).rglob("*")
        if p.is_file()
    }
    assert stray_names(files, only_in("bytes", "mib"), prose=False) == []
    gpu_util = panel(files, "gpu-fleet", "GPU utilization (full GPUs)")["fieldConfig"]["defaults"]
    assert (gpu_util["unit"], gpu_util["max"]) == ("percent", 100)


# -- exporter 4.10: bytes-4.10 -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def build_4_10(specs_with) -> tuple[Path, dict[str, str]]:
    """(specs, every generated file) with fb_units: bytes-4.10, made once for the tests that read them."""
    specs = specs_edited(specs_with, fb_units="bytes-4.10")
    return specs, generate.build(specs)[1]


def test_the_4_10_profile_reads_the_4_10_names_and_no_older_one(build_4_10):
    files = build_4_10[1]
    older = {**only_in("mib", "bytes-4.10"), **only_in("bytes", "bytes-4.10")}
    assert set(only_in("bytes", "bytes-4.10")) >= set(synth.field_names("bytes", "pcie_tx", "pcie_rx"))
    assert stray_names(files, older) == []
    pcie = panel(files, "gpu-fleet", "PCIe throughput")
    read = {
        name
        for t in pcie["targets"]
        for name in synth.field_names("bytes-4.10", "pcie_tx", "pcie_rx")
        if name in t["expr"]
    }
    assert read == set(synth.field_names("bytes-4.10", "pcie_tx", "pcie_rx"))
    assert all("rate(" not in t["expr"] for t in pcie["targets"])  # a throughput already
    assert pcie["fieldConfig"]["defaults"]["unit"] == "Bps"


def _passes_its_generated_tests_and_lint(build, servewatch, tmp_path, proven_elsewhere=()) -> None:
    """A profile's whole build: its generated promtool tests pass and lint finds nothing. The test
    files `proven_elsewhere` are left out of the run (the caller says where their proof lives)."""
    specs, files = build
    out = tmp_path / "out"
    writer.write(out, {path: text for path, text in files.items() if path not in proven_elsewhere})
    said: list[str] = []
    assert verify.run(out, echo=said.append), "\n".join(said)
    run = servewatch("lint", "--specs", specs, "--fail-on", "warning", "rules", "dashboards", cwd=out)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.tools("promtool")
def test_the_4_10_profile_passes_its_generated_tests_and_lint(build_4_10, servewatch, tmp_path):
    _passes_its_generated_tests_and_lint(build_4_10, servewatch, tmp_path)


# -- a new profile is a catalog edit ------------------------------------------------------------------
NEXT = {  # a hypothetical next exporter generation: the 4.9 names with the framebuffer fields renamed
    "exporter": "5.0+",
    "about": "test profile",
    "driver_label": "DCGM_FI_SYSTEM_DRIVER_VERSION",
}
NEXT_FB = {"fb_used": "DCGM_FI_DEV_MEMORY_USED_BYTES", "fb_free": "DCGM_FI_DEV_MEMORY_FREE_BYTES"}


@pytest.fixture
def scratch_catalog(tmp_path, monkeypatch):
    """A copy of the catalog the test may edit, read by every module instead of the packaged one."""
    src = Path(catalog.__file__).parent
    dst = tmp_path / "catalog"
    dst.mkdir()
    for p in src.glob("*.yaml"):
        shutil.copy(p, dst / p.name)
    monkeypatch.setattr(catalog, "DIRECTORY", dst)
    catalog.load.cache_clear()
    yield dst
    catalog.load.cache_clear()  # the next load() reads the packaged catalog once monkeypatch restores it


def add_profile(directory: Path, name: str, profile: dict) -> None:
    path = directory / "dcgm.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["profiles"][name] = profile
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.tools("promtool")
def test_a_profile_added_to_the_catalog_drives_rules_dashboards_runbooks_and_tests(
    scratch_catalog, specs_with, tmp_path
):
    bytes_ = yaml.safe_load((scratch_catalog / "dcgm.yaml").read_text())["profiles"]["bytes"]
    metrics = {**bytes_["metrics"], **{f: {"name": n, "unit": "bytes"} for f, n in NEXT_FB.items()}}
    add_profile(scratch_catalog, "next", {**NEXT, "metrics": metrics})

    files = generate_with(specs_with, fb_units="next")
    rules = files["rules/gpu.rules.yaml"]
    assert "max by (UUID, GPU_I_ID) (DCGM_FI_DEV_MEMORY_USED_BYTES)" in rules
    assert "DCGM_FI_DEV_FB_USED" not in rules
    fb = panel(files, "gpu-fleet", "Framebuffer used")
    assert "DCGM_FI_DEV_MEMORY_USED_BYTES" in fb["targets"][0]["expr"]
    assert fb["fieldConfig"]["defaults"]["unit"] == "bytes"
    missing = files["runbooks/GPUFramebufferMetricsMissing.md"]
    assert "`DCGM_FI_DEV_MEMORY_USED_BYTES` and `DCGM_FI_DEV_MEMORY_FREE_BYTES` present" in missing
    # the spec's scenarios are written with tokens: promtool proves the alerts under the new names too
    assert "DCGM_FI_DEV_MEMORY_FREE_BYTES{" in files["promtool/gpu.test.yaml"]
    out = tmp_path / "out"
    writer.write(out, files)
    said: list[str] = []
    assert verify.run(out, echo=said.append), "\n".join(said)
    # and the synthetic data speaks it
    gpu = synth.dcgm_gpu("h", 0, "GPU-1", 1000, 3000, steps=1, profile="next")
    assert synth.truth.one(gpu, "DCGM_FI_DEV_MEMORY_USED_BYTES").values == (1000 * 2**20,)


def test_a_spec_file_read_before_is_checked_again_under_another_catalog(
    scratch_catalog, specs_with, monkeypatch
):
    """The loader keeps a valid file's document by its text (spec/loader.py): a config valid under a
    catalog that has its exporter profile is refused, at the field, once the catalog has it no more."""
    bytes_ = yaml.safe_load((scratch_catalog / "dcgm.yaml").read_text())["profiles"]["bytes"]
    add_profile(scratch_catalog, "next", {**NEXT, "metrics": bytes_["metrics"]})
    specs = specs_with({"config.yaml": [("fb_units: mib", "fb_units: next")]})
    assert load(specs).config.dcgm.fb_units == "next"
    monkeypatch.setattr(catalog, "DIRECTORY", Path(catalog.__file__).parent)
    catalog.load.cache_clear()
    with pytest.raises(SpecErrors) as refused:
        load(specs)
    assert any("config.yaml:" in str(e) and "fb_units" in str(e) for e in refused.value.errors), refused.value


def test_an_inconsistent_profile_is_refused_with_the_place(scratch_catalog):
    add_profile(scratch_catalog, "broken", {**NEXT, "metrics": {"fb_usd": {"name": "X_USED"}}})
    with pytest.raises(catalog.CatalogError, match=r"profiles\.broken\.metrics\.fb_usd: no such field"):
        catalog.load()


@pytest.mark.parametrize(
    ("only", "refusal"),
    [
        (
            {"ttft": {"stream": "true"}},
            r"clients\.llm-d-epp\.only\.ttft: llm_d_epp_request_ttft_seconds has no label 'stream'",
        ),
        ({"ttfb": {"streaming": "true"}}, r"clients\.llm-d-epp\.only\.ttfb: llm-d-epp has no field 'ttfb'"),
    ],
)
def test_a_client_series_filter_the_histogram_cannot_have_is_refused(scratch_catalog, only, refusal):
    """`only:` says which series of a client histogram measure its quantity: a label the histogram
    lacks would select none of them (an SLO on no data), a field it lacks filters nothing."""
    path = scratch_catalog / "gateway.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["clients"]["llm-d-epp"]["only"] = only
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(catalog.CatalogError, match=refusal):
        catalog.load()


def test_a_misspelt_profile_is_a_spec_error_with_a_suggestion(specs_with):
    with pytest.raises(SpecErrors) as exc:
        generate_with(specs_with, fb_units="byte")
    [err] = exc.value.errors
    assert re.match(r".*/specs/config\.yaml:\d+: ", str(err.location) + ": ")
    assert "did you mean 'bytes'?" in err.message


# -- config.dcgm.metric_names -------------------------------------------------------------------------
def test_a_configured_name_replaces_the_profile_name_everywhere(specs_with):
    """For a 4.9 name the catalog marks unconfirmed: the user names what the exporter really exports."""
    assert catalog.load().dcgm.profile("bytes").metrics["fb_used"].unconfirmed
    # the GPU operator's job name: config.targets.dcgm (job=~".*dcgm.*") matches its `up` series
    selectors = {"dcgm": 'job="nvidia-dcgm-exporter"', "vllm": ""}
    names = {"fb_used": "DCGM_FI_DEV_FB_USED_B"}
    specs = specs_edited(specs_with, config={"selectors": selectors}, fb_units="bytes", metric_names=names)
    files = partial_build.build(specs, unit_test_files=True)[1]
    rules = files["rules/gpu.rules.yaml"]
    # a configured name is a DCGM series: it carries the dcgm selector like the profile's names
    assert 'DCGM_FI_DEV_FB_USED_B{job="nvidia-dcgm-exporter"}' in rules
    assert 'DCGM_FI_DEV_FB_FREE_BYTES{job="nvidia-dcgm-exporter"}' in rules
    assert "DCGM_FI_DEV_FB_USED_BYTES" not in rules
    fb = panel(files, "gpu-fleet", "Framebuffer used")
    assert "DCGM_FI_DEV_FB_USED_B{" in fb["targets"][0]["expr"]
    assert fb["fieldConfig"]["defaults"]["unit"] == "bytes"  # the profile's unit stays
    assert "DCGM_FI_DEV_FB_USED_B" in files["promtool/gpu.test.yaml"]


def test_a_renamed_profile_finds_each_field_by_its_new_name():
    """A profile keeps its answers (signals ask one for every selector): the renamed copy must not
    inherit them."""
    profile = catalog.load().dcgm.profile("bytes")
    assert profile.field_of("DCGM_FI_DEV_FB_USED_B") is None
    renamed = profile.with_names({"fb_used": "DCGM_FI_DEV_FB_USED_B"})
    assert renamed.field_of("DCGM_FI_DEV_FB_USED_B") == "fb_used"
    assert renamed.field_of(profile.metric("fb_used")) is None
    assert profile.field_of("DCGM_FI_DEV_FB_USED_B") is None


def test_a_field_the_profile_cannot_name_is_a_spec_error_that_says_how_to_name_it(specs_with):
    doc = yaml.safe_load((SPECS / "signals.yaml").read_text())
    doc["signals"]["gpu_mem_clock"] = {
        "kind": "gauge",
        "level": "gpu",
        "metric": "mem_clock",  # exporter 4.9 renamed it, to a name the reference does not know
        "record": "gpu:dcgm_mem_clock:max",
    }
    signals = {"signals.yaml": yaml.safe_dump(doc)}
    with pytest.raises(SpecErrors) as exc:
        generate_with(specs_with, signals, fb_units="bytes")
    [err] = exc.value.errors
    assert "signals.yaml:" in str(err.location) and "metric" in str(err.location)
    assert "'bytes' has no name for DCGM field 'mem_clock'" in err.message
    assert "config.dcgm.metric_names" in err.message
    # the model is what the fix changes: load and validate, no rendering
    model = validate(
        load(
            specs_edited(
                specs_with, signals, fb_units="bytes", metric_names={"mem_clock": "DCGM_FI_DEV_MEM_CLOCK_HZ"}
            )
        )
    ).model
    assert model.builder.select("mem_clock") == "DCGM_FI_DEV_MEM_CLOCK_HZ"


def test_a_misspelt_field_in_metric_names_is_a_spec_error_with_a_suggestion(specs_with):
    with pytest.raises(SpecErrors) as exc:
        generate_with(specs_with, metric_names={"fb_usd": "X"})
    [err] = exc.value.errors
    assert "metric_names" in str(err.location) and "did you mean 'fb_used'?" in err.message


# -- live: exporter 4.9 and 4.10 fleets on a real Prometheus ----------------------------------------
BYTE_PROFILES = ("bytes", "bytes-4.10")


@pytest.fixture(scope="module", params=BYTE_PROFILES)
def fleet_as(request, tmp_path_factory, profile_build):
    """The dashboard-test fleet (and its extras) as an exporter of the profile (4.9, 4.10) exposes
    it, the rules of that profile loaded."""
    import test_dashboards_integration as live  # the 4.8 version of this test: its fleet and helpers

    profile = request.param
    scenario = synth.fleet()
    extra = live._extra_series(scenario)
    series = synth.as_profile(list(scenario) + extra, profile)
    start = backfill_start(scenario.steps, scenario.step)
    _, files = profile_build(profile)
    rules = tmp_path_factory.mktemp("rules")
    for path, text in files.items():
        if re.fullmatch(r"rules/[^/]+\.rules\.yaml", path):
            (rules / Path(path).name).write_text(text)
    om = synth.to_openmetrics(series, start, scenario.step)
    # the rule files whose records the boards read, as the 4.8 fleet's server has them (no SLO records)
    read = live._rule_files_read(
        sorted(rules.iterdir()), [json.loads(files[f"dashboards/{b}.json"]) for b in live.NAMES]
    )
    with LocalPrometheus(om, rule_files=read) as prom:
        yield profile, live, prom, scenario.time_at(start, scenario.eval_step), files, series, scenario


def other_profiles_names(profile: str) -> set[str]:
    """Names other profiles give a field that `profile` names otherwise."""
    return {
        name for other in catalog.load().dcgm.profiles if other != profile for name in only_in(other, profile)
    }


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
@pytest.mark.parametrize("board", ["vllm-serving", "gpu-fleet", "moe-deployment"])
def test_every_panel_returns_data_on_a_byte_named_fleet(fleet_as, board):
    profile, live, prom, t, files, series, _ = fleet_as
    assert not {s.name for s in series} & other_profiles_names(profile), f"the fleet is not {profile}"
    values = live.moe_values() if board == "moe-deployment" else live.ALL
    dashboard = json.loads(files[f"dashboards/{board}.json"])
    problems = live.panel_problems(lambda expr: prom.query(expr, t), dashboard, values, problem_lists=None)
    assert not problems, "\n".join(problems)


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_byte_named_values_arrive_in_the_panels_units(fleet_as):
    """Bytes on the framebuffer panel, a 0-1 ratio on utilization, bytes/s on NVLink and PCIe: the
    values the exporter wrote, shown as they are (no rate() over a throughput)."""
    profile, live, prom, t, files, series, scenario = fleet_as
    a0 = scenario.truth["gpus"]["a0"]
    values = {**live.ALL, "uuid": a0["UUID"]}

    def query(target: dict) -> float:
        [row] = prom.query(live.interpolate(target["expr"], values), t)
        return float(row["value"][1])

    def one(title: str) -> float:
        [target] = panel(files, "gpu-fleet", title)["targets"]
        return query(target)

    assert one("Framebuffer used") == a0["fb_used_mib"] * 2**20
    assert one("GPU utilization (full GPUs)") == 0.93  # the fleet runs a0 at util 0.93
    assert one("NVLink throughput") == round(1.5e5 * 0.93) * 1e6  # synth: 150 000 MB/s at full load
    pcie = panel(files, "gpu-fleet", "PCIe throughput")["targets"]
    wrote = [
        next(s for s in series if s.name == name and s.label("UUID") == a0["UUID"]).values[scenario.eval_step]
        for name in synth.field_names(profile, "pcie_tx", "pcie_rx")
    ]
    assert [query(target) for target in pcie] == wrote


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_detect_suggests_the_profile_a_byte_named_fleet_speaks(fleet_as, capsys):
    """4.9 and 4.10 name the framebuffer alike: detect tells them apart by the PCIe names."""
    profile, _, prom, t, _, _, _ = fleet_as
    rc = main(["detect", "--prometheus", prom.url, "--at", str(t), "--format", "json"])
    res = json.loads(capsys.readouterr().out)
    assert res["config"]["dcgm"]["fb_units"] == profile, res["findings"]
    assert {"field": "dcgm.fb_units", "current": "mib", "suggested": profile} in res["differences"]
    assert [p for p in BYTE_PROFILES if res["counts"]["dcgm"][f"{p}_only_name_series"]] == [profile]
    assert rc == 3


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_detect_recognises_a_profile_added_to_the_catalog(scratch_catalog, capsys):
    """The probes read the FB names from the catalog profiles: no code knows the new profile."""
    add_profile(
        scratch_catalog,
        "next",
        {**NEXT, "metrics": {f: {"name": n, "unit": "bytes"} for f, n in NEXT_FB.items()}},
    )
    tgt = synth.dcgm_target("gpu-node-n", job="dcgm")
    series = [synth.up(tgt, 1, steps=10)]
    series += synth.dcgm_gpu("gpu-node-n", 0, "GPU-n", 1000, 3000, steps=10, targets=[tgt], profile="next")
    start = backfill_start(10, 30)
    with LocalPrometheus(synth.to_openmetrics(series, start, 30)) as prom:
        rc = main(["detect", "--prometheus", prom.url, "--at", str(start + 9 * 30), "--format", "json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 3 and res["config"]["dcgm"]["fb_units"] == "next"
    assert res["counts"]["dcgm"]["fb_used_next_series"] == 1
    assert {"field": "dcgm.fb_units", "current": "mib", "suggested": "next"} in res["differences"]
    info = [f["message"] for f in res["findings"] if f["topic"] == "dcgm.fb_units" and f["level"] == "info"]
    assert info == ["1 series named DCGM_FI_DEV_MEMORY_USED_BYTES (bytes, exporter 5.0+)"]


# -- docs ---------------------------------------------------------------------------------------------
def fields_table() -> str:
    """The field table of docs/exporters.md, as the catalog says it should read."""
    dcgm = catalog.load().dcgm
    profiles = list(dcgm.profiles.values())
    head = " | ".join(f"`{p.name}` (exporter {p.exporter})" for p in profiles)
    lines = [f"| field | type | {head} |", "|---|---|" + "---|" * len(profiles)]
    for name, field in dcgm.fields.items():
        cells = []
        for p in profiles:
            n = p.metrics.get(name)
            unit = f" ({n.unit})" if n and n.unit else ""
            cells.append(
                "—" if n is None else f"`{n.name}`{unit}" + (" *unconfirmed*" if n.unconfirmed else "")
            )
        kind = field.type + (", whole GPU" if field.scope == "gpu" else "")
        lines.append(f"| `{name}` | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_docs_list_every_field_of_every_profile_and_mark_unconfirmed_names(repo):
    doc = (repo / "docs" / "exporters.md").read_text()
    assert fields_table() in doc
    assert "`DCGM_FI_DEV_FB_USED_BYTES` (bytes) *unconfirmed*" in doc


# -- vLLM's names: config.vllm_profile ------------------------------------------------------------------
# a vLLM name read as a series: not the `metric` label VLLMSignalMetricsMissing gives vLLM's own name
BARE_VLLM = re.compile(r'(?<!metric", ")(?<!metric\\", \\")\bvllm:[a-z_]+')


@pytest.fixture(scope="module")
def kserve(specs_with) -> tuple[Path, dict[str, str]]:
    """(specs, generated files) with vllm_profile: kserve, made once for the tests that read them."""
    doc = yaml.safe_load((SPECS / "config.yaml").read_text())
    doc["config"]["vllm_profile"] = "kserve"
    specs = specs_with({"config.yaml": yaml.safe_dump(doc)})
    return specs, generate.build(specs)[1]


def as_kserve(series: list) -> list:
    """Series as KServe's LLMInferenceService stores them: every vLLM name behind kserve_."""
    return [
        synth.Series("kserve_" + s.name, s.labels, s.values, s.kind) if s.name.startswith("vllm:") else s
        for s in series
    ]


def test_the_kserve_profile_reads_every_vllm_series_by_its_kserve_name(kserve):
    files = kserve[1]
    read = {p: BARE_VLLM.findall(t) for p, t in files.items() if p.startswith(("rules/", "dashboards/"))}
    assert {p: names for p, names in read.items() if names} == {}
    rules = files["rules/vllm.rules.yaml"]
    assert "max by (namespace, pod, model_name, engine) (kserve_vllm:num_requests_running)" in rules
    assert "engine:vllm_num_requests_running:max" in rules  # record names stay
    # the scenarios name vLLM's own names; their generated tests read KServe's
    tests = files["promtool/vllm.test.yaml"]
    assert "kserve_vllm:kv_cache_usage_perc{" in tests and "series: 'vllm:" not in tests
    assert 'metric", "vllm:kv_cache_usage_perc"' in rules  # the absence label keeps vLLM's name


def test_the_default_vllm_profile_adds_no_prefix(default_build):
    assert "kserve_" not in "".join(default_build[1].values())


def test_a_misspelt_vllm_profile_is_a_spec_error_with_a_suggestion(specs_with):
    with pytest.raises(SpecErrors) as exc:
        generate_with(specs_with, config={"vllm_profile": "kserv"})
    [err] = exc.value.errors
    assert "config.yaml" in str(err.location) and "did you mean 'kserve'?" in err.message


def named_as(profile: str, text: str) -> str:
    """`text` with every vLLM series name as the vLLM profile `profile` names it."""
    cat = catalog.load()

    def one(found: re.Match) -> str:
        entry = cat.lookup(found[0])
        return cat.vllm_profiles[profile].metric(found[0]) if entry and entry.source == "vllm" else found[0]

    return re.sub(r"(?<![\w:])vllm:\w+", one, text)


@pytest.mark.tools("promtool")
def test_the_kserve_profile_passes_its_generated_tests_and_lint(kserve, default_build, servewatch, tmp_path):
    """Every generated test file runs but the SLO proof: it and the rule files it loads are the
    default build's with every vLLM name renamed (asserted here), which `servewatch test` (make test)
    and test_generate's default exporter profile prove. promtool's verdict cannot change when every
    name a rule selects and every series a test writes or expects is renamed alike and no matcher
    reads __name__, so the kserve copy of the proof (most of this test's time) is not run again."""
    files = kserve[1]
    loaded = yamlio.load(files[SLO_TEST])["rule_files"]
    proof = [SLO_TEST, *(posixpath.normpath(posixpath.join(posixpath.dirname(SLO_TEST), f)) for f in loaded)]
    for path in proof:
        assert files[path] == named_as("kserve", default_build[1][path]), path
        assert "__name__" not in files[path], path
    assert "kserve_vllm:" in files[SLO_TEST]  # the renaming took hold
    _passes_its_generated_tests_and_lint(kserve, servewatch, tmp_path, proven_elsewhere={SLO_TEST})


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_kserve_named_engines_are_recorded_and_detected(kserve, tmp_path, capsys):
    """On a real Prometheus, an engine stored under KServe's names feeds the rules generated with
    vllm_profile: kserve (and no absence alert fires), and detect suggests the profile."""
    files = kserve[1]
    (tmp_path / "vllm.rules.yaml").write_text(files["rules/vllm.rules.yaml"])
    steps, step = 40, 30
    tgt = synth.vllm_target("llm", "kimi-0")
    series = [synth.up(tgt, 1, steps=steps)]
    series += as_kserve(synth.vllm_engine("llm", "kimi-0", "moonshotai/Kimi-K2", 0, steps=steps, target=tgt))
    start = backfill_start(steps, step)
    at = start + (steps - 1) * step
    with LocalPrometheus(
        synth.to_openmetrics(series, start, step), rule_files=[tmp_path / "vllm.rules.yaml"]
    ) as prom:
        rate = prom.query("sum(model:vllm_request_success:rate5m)", at)
        assert rate and float(rate[0]["value"][1]) == pytest.approx(20 / step)
        groups = yaml.safe_load(files["rules/vllm.rules.yaml"])["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        for alert in ("VLLMMetricsAbsent", "VLLMSignalMetricsMissing"):
            [expr] = [rule["expr"] for rule in rules if rule.get("alert") == alert]
            assert prom.query(expr, at) == [], alert
        rc = main(["detect", "--prometheus", prom.url, "--at", str(at), "--format", "json"])
    res = json.loads(capsys.readouterr().out)
    assert res["config"]["vllm_profile"] == "kserve", res
    assert {"field": "vllm_profile", "current": "vllm", "suggested": "kserve"} in res["differences"]
    assert res["counts"]["vllm"]["liveness_kserve_series"] == 1
    assert rc == 3
