"""A memory reads its own last value over MEMORY_GAP (promql.builders.remember): its group must run
more often than that. Prometheus 3's ranges leave their start out, so at an interval of MEMORY_GAP
the last value is never in range and the memory forgets at once; servewatch refuses such an
interval, naming the override that set it."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from servewatch import tools
from servewatch.errors import SpecErrors
from servewatch.promql import builders as b
from servewatch.spec.loader import load
from servewatch.spec.schema import seconds
from servewatch.validation import validate

GAP_S = int(seconds(b.MEMORY_GAP))


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("interval_s, found", [(GAP_S - 60, True), (GAP_S, False)])
def test_a_memory_finds_its_last_value_only_when_recorded_more_often_than_its_gap(
    tmp_path, interval_s, found
):
    """A record written every `interval_s` (as its group writes it), read as `remember` reads it at the
    group's next evaluation. promtool evaluates every group at its evaluation_interval, whatever the
    group's own, so the record's samples are given here at the group's cadence."""
    record = "job:seen:last"
    # what a memory reads of itself, as `remember` writes it
    assert f"last_over_time({record}[{b.MEMORY_GAP}])" in b.remember("seen_gauge", ["job"], record, 3600)
    (tmp_path / "none.rules.yaml").write_text("groups: []\n")
    expected = [{"labels": "{}", "value": 1}] if found else []
    test = {
        "rule_files": ["none.rules.yaml"],
        "evaluation_interval": f"{interval_s}s",
        "tests": [
            {
                "interval": f"{interval_s}s",
                "input_series": [{"series": f'{record}{{job="a"}}', "values": "1x3"}],
                "promql_expr_test": [
                    {
                        "expr": f"count(last_over_time({record}[{b.MEMORY_GAP}]))",
                        "eval_time": f"{4 * interval_s}s",
                        "exp_samples": expected,
                    }
                ],
            }
        ],
    }
    (tmp_path / "memory.test.yaml").write_text(yaml.safe_dump(test))
    run = subprocess.run(
        [tools.find("promtool"), "test", "rules", "memory.test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_interval_a_memory_cannot_keep_up_with_is_refused_at_its_override(specs_with, line_of):
    slowed = f"overrides:\n  groups:\n    gpu-inputs: {{interval: {b.MEMORY_GAP}}}\n"
    specs = specs_with({"overrides.yaml": slowed})
    with pytest.raises(SpecErrors) as info:
        validate(load(specs))
    [msg] = [str(e) for e in info.value.errors]
    assert f"overrides.yaml:{line_of(specs / 'overrides.yaml', 'gpu-inputs')}" in msg
    assert "target:dcgm_host:last_seen" in msg and f"below {b.MEMORY_GAP}" in msg


def test_a_slow_group_whose_memory_runs_apart_is_left_alone(specs_with):
    """gpu-memory's memory (the GPU's workload) is recorded every 2 minutes in a group of its own."""
    slowed = f"overrides:\n  groups:\n    gpu-memory: {{interval: {b.MEMORY_GAP}}}\n"
    validate(load(specs_with({"overrides.yaml": slowed})))
