"""VLLMEngineStalled reads the recording rules of its `work` and `progress` signals: the spec says so
when they would not be recorded, instead of leaving a wedged engine unseen."""

from __future__ import annotations

import pytest

from servewatch.errors import SpecErrors
from servewatch.spec.loader import load
from servewatch.validation import validate


def _errors(specs) -> list[str]:
    with pytest.raises(SpecErrors) as err:
        validate(load(specs))
    return [str(e) for e in err.value.errors]


def test_disabling_the_group_that_records_progress_is_an_error(specs_with, line_of):
    specs = specs_with({"overrides.yaml": "overrides:\n  groups:\n    vllm-traffic: {enabled: false}\n"})
    line = line_of(specs / "alerts" / "vllm.yaml", "          progress: [")
    msgs = _errors(specs)
    assert any(
        m.startswith(f"{(specs / 'alerts' / 'vllm.yaml').as_posix()}:")
        and "absence.progress" in m
        and "'engine_generation_tokens_rate' is recorded by no enabled group" in m
        for m in msgs
    ), msgs
    assert any(f"vllm.yaml:{line}:" in m for m in msgs), (line, msgs)


def test_work_must_be_gauges(specs_with):
    specs = specs_with(
        {"alerts/vllm.yaml": [("work: [engine_requests_running,", "work: [engine_preemptions_rate,")]}
    )
    msgs = _errors(specs)
    assert any(
        "work signals must be gauge signals; 'engine_preemptions_rate' is a rate" in m for m in msgs
    ), msgs


def test_an_idle_rank_needs_the_rank_in_the_engine_identity(specs_with):
    """VLLMEngineIdle compares the ranks of one pod: without `engine` in the identity there are none."""
    specs = specs_with(
        {
            "config.yaml": [
                ("vllm: [namespace, pod, model_name, engine]", "vllm: [namespace, pod, model_name]")
            ]
        }
    )
    msgs = _errors(specs)
    assert any(
        "alerts/vllm.yaml:" in m and "absence.kind" in m and "config.identity.vllm needs 'engine'" in m
        for m in msgs
    ), msgs
