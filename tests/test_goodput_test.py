"""The generated test of the goodput record (plan/goodput_test.py), in promtool/slo.test.yaml of every
build: passed by the rules as generated, failed by each way the record breaks: a prefill engine's
tokens counted where a role is configured, a model's engines not added up, another SLO's error ratio
read, a model's identity label dropped. Run by a real promtool."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servewatch import generate, yamlio
from servewatch.render import yamlout

REPO = Path(__file__).resolve().parent.parent
GOODPUT = "model:vllm_goodput_tokens:rate5m"
ROLE, TRACK = "llm_d_ai_role", "track"
BUILDS = {
    "default": None,
    "role and track": [
        ("  role: null\n", f"  role: {{label: {ROLE}}}\n"),
        ("  track: null\n", f"  track: {{label: {TRACK}}}\n"),
    ],
    "role, track and a gateway": "bench/mutation/specs",  # the mutation run's configured build
}
BREAKS = {  # how the goodput record breaks -> its expression instead
    "a prefill engine's tokens counted": lambda e: re.sub(r"\{" + ROLE + r'=~"[^"]*"\}', "", e),
    "a model's engines not added up": lambda e: e.replace("sum by", "max by", 1),
    "the availability SLO's errors read for the TTFT SLO's": lambda e: e.replace(
        'slo="vllm-ttft"', 'slo="vllm-availability"'
    ),
    "the namespace dropped from the tokens' sum": lambda e: e.replace("namespace, ", "", 1),
}


@pytest.fixture(scope="module", params=BUILDS)
def build(request, specs_with):
    how = BUILDS[request.param]
    specs = REPO / how if isinstance(how, str) else specs_with({"config.yaml": how} if how else {})
    _, files = generate.build(specs)
    return request.param, files


def _written(folder: Path, files: dict[str, str], goodput_expr=None) -> Path:
    """The build's rule files and its goodput test alone (the SLO proofs beside it take promtool far
    longer) under `folder`, the goodput rule's expression replaced by `goodput_expr(expr)` if given."""
    for path, text in files.items():
        if path.startswith("rules/") and path.count("/") == 1 or path == "promtool/slo.inputs.rules.yaml":
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
    if goodput_expr is not None:
        doc = yamlio.load(files["rules/slo.rules.yaml"])
        rule = next(r for g in doc["groups"] for r in g["rules"] if r.get("record") == GOODPUT)
        broken = goodput_expr(rule["expr"])
        assert broken != rule["expr"], "the break changes nothing: the test would prove nothing"
        rule["expr"] = broken
        (folder / "rules" / "slo.rules.yaml").write_text(yamlout.dump(doc))
    doc = yamlio.load(files["promtool/slo.test.yaml"])
    doc["tests"] = [t for t in doc["tests"] if t["name"] == f"record: {GOODPUT}"]
    path = folder / "promtool" / "slo.goodput.test.yaml"
    path.write_text(yamlout.dump(doc))
    return path


@pytest.mark.tools("promtool")
def test_the_generated_goodput_test_passes_on_the_rules_as_generated(build, tmp_path, prove):
    name, files = build
    result = prove(_written(tmp_path, files))
    assert result.returncode == 0, (name, result.stdout)


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("why", BREAKS)
def test_a_broken_goodput_record_fails_the_generated_test(build, tmp_path, prove, why):
    name, files = build
    if why.startswith("a prefill") and name != "role, track and a gateway":
        # without a role every engine counts; with one, an engine-side SLO's error ratio is of
        # decode alone, so its join leaves a prefill engine's tokens out anyway. A client-side
        # SLO's is per model, joined to every role: there the role matcher is what keeps it out
        pytest.skip("the SLOs' own joins keep a prefill engine out in this build")
    result = prove(_written(tmp_path, files, BREAKS[why]))
    assert result.returncode == 1, (name, why)
    assert GOODPUT in result.stdout, (name, why, result.stdout)
