"""The GPU context (info and workload memory): recorded every CONTEXT_EVERY, and not joined by an
alert whose own record carries the GPU's labels (docs/scale.md, issue 20). The presence fields
are selected once for the memories beside them, which read the fields record only in its group."""

from __future__ import annotations

import re

import pytest

from servewatch import generate, rule_slices
from servewatch.alert_context import CONTEXT_EVERY, DCGM_TARGET_HOST, GPU_INFO, GPU_WORKLOAD
from servewatch.spec.schema import seconds

CONTEXT = (GPU_INFO, GPU_WORKLOAD)


def _holders(model) -> dict[str, list]:
    """The groups that record each context memory."""
    out: dict[str, list] = {record: [] for record in CONTEXT}
    for group in model.groups:
        for rule in group.records:
            if rule.record in out:
                out[rule.record].append(group)
    return out


def _every_context_memory_once_at_its_cadence(model) -> dict[str, str]:
    """{record: group name}, checked: once each, in a group evaluated every CONTEXT_EVERY."""
    placed = {}
    for record, groups in _holders(model).items():
        assert len(groups) == 1, (record, [g.name for g in groups])
        (group,) = groups
        assert group.interval and seconds(group.interval) == seconds(CONTEXT_EVERY), (record, group)
        placed[record] = group.name
    return placed


def test_context_memories_are_recorded_every_minute(default_model):
    placed = _every_context_memory_once_at_its_cadence(default_model)
    # the info joins its first reader, gpu-inputs, which runs at that cadence already; the workload
    # memory's reader, gpu-memory, runs every minute, so the memory gets a group of its own
    assert placed == {GPU_INFO: "gpu-inputs", GPU_WORKLOAD: "gpu-memory-context"}


def test_the_framebuffer_alert_keeps_its_records_labels_without_the_info(default_model):
    """Its record carries the GPU's labels; an alert on a record without them still joins the info,
    and both carry the same labels besides the identity."""
    high, xid = default_model.alert("GPUFramebufferUsageHigh"), default_model.alert("GPUXidErrors")
    assert GPU_INFO not in high.expr, high.expr
    assert GPU_INFO in xid.expr, xid.expr
    context = default_model.context
    carried = f"({', '.join(context.gpu_id + context.gpu_labels())})"
    assert carried in high.expr, high.expr
    assert f"group_left ({', '.join(context.gpu_labels())})" in xid.expr, xid.expr


def test_memories_of_groups_at_another_cadence_get_context_groups(specs_with):
    """Without gpu-inputs and with gpu-memory every 30 s, neither memory has a group at its cadence."""
    specs = specs_with(
        {
            "overrides.yaml": [
                (
                    "overrides: {}",
                    "overrides: {groups: {gpu-inputs: {enabled: false}, gpu-memory: {interval: 30s}}}",
                )
            ]
        }
    )
    model, _ = generate.build(specs)
    placed = _every_context_memory_once_at_its_cadence(model)
    assert placed == {GPU_INFO: "gpu-errors-context", GPU_WORKLOAD: "gpu-memory-context"}


# -- the presence fields, selected once ----------------------------------------------------------------
OFF_CADENCE = {"gpu-inputs": {"interval": "1m"}}  # the pair records' group off the context cadence
WITHOUT_INPUTS = {"gpu-inputs": {"enabled": False}, "gpu-memory": {"interval": "30s"}}


def _overridden(specs_with, groups: dict):
    specs = specs_with({"overrides.yaml": [("overrides: {}", f"overrides: {{groups: {groups}}}")]})
    return generate.build(specs)[0], specs


def _readers_of_the_fields_record(model) -> dict[str, tuple[str, int]]:
    """{rule: (group, position)} of every rule that reads the fields record, and the record's own
    (group, position) under its name, checked: recorded once."""
    (shared,) = model.context.shared_records()
    out = {}
    for group in model.groups:
        for i, rule in enumerate([*group.records, *group.alerts]):
            name = getattr(rule, "record", None) or rule.alert
            if name == shared:
                assert shared not in out, f"{shared} recorded twice"
                out[name] = (group.name, i)
            elif shared in rule_slices.read_names(rule.expr):
                out[name] = (group.name, i)
    return out


def _raw_field_reads(group) -> int:
    """How often the rules of `group` select a presence field (not counting the names in strings)."""
    fields = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP")
    exprs = [re.sub(r'"[^"]*"', '""', rule.expr) for rule in [*group.records, *group.alerts]]
    return sum(expr.count(f) for expr in exprs for f in fields)


def test_the_inputs_group_selects_each_presence_field_once_for_its_memories(default_model):
    """The info, the exporters' hosts and the pair records read the fields record, recorded before
    them in their group; the alert itself still reads the raw fields (an exporter's pair raw: a
    missing record must not name every exporter)."""
    readers = _readers_of_the_fields_record(default_model)
    (shared,) = default_model.context.shared_records()
    group, at = readers.pop(shared)
    assert group == "gpu-inputs"
    pair = {"gpu:dcgm_fb_used_fb_free:exported", "target:dcgm_fb_used_fb_free:exported"}
    assert set(readers) == {GPU_INFO, DCGM_TARGET_HOST, *pair}
    assert all(g == group and i > at for g, i in readers.values()), readers
    (inputs,) = [g for g in default_model.groups if g.name == group]
    # the fields record's three and the alert's own three (its exporters' pair, and the temperature
    # of GPUs with neither of the pair): 13 before the fields record
    assert _raw_field_reads(inputs) == 6


@pytest.mark.parametrize("groups", [OFF_CADENCE, WITHOUT_INPUTS], ids=["off-cadence", "without-inputs"])
def test_a_memory_reads_the_fields_record_only_beside_it(specs_with, groups):
    """Off the context cadence, the pair records and the exporters' hosts sit in a group without the
    fields record: they select the raw fields, and the record goes where the info is."""
    model, _ = _overridden(specs_with, groups)
    readers = _readers_of_the_fields_record(model)
    (shared,) = model.context.shared_records()
    group, at = readers.pop(shared)
    assert readers == {GPU_INFO: (group, at + 1)}, readers
    assert group == _every_context_memory_once_at_its_cadence(model)[GPU_INFO]
    for rule in model.records():
        if rule.record in (DCGM_TARGET_HOST, "gpu:dcgm_fb_used_fb_free:exported"):
            assert "DCGM_FI_DEV_FB_USED" in rule.expr, rule.expr


@pytest.mark.tools("promtool")
def test_the_raw_fallbacks_pass_their_generated_tests(specs_with, tmp_path, servewatch):
    _, specs = _overridden(specs_with, OFF_CADENCE)
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs, "--out", out).returncode == 0
    res = servewatch("test", "--specs", specs, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr
