"""The GPU context (info and workload memory): recorded every CONTEXT_EVERY, and not joined by an
alert whose own record carries the GPU's labels (docs/scale.md, issue 20)."""

from __future__ import annotations

from servewatch import generate
from servewatch.alert_context import CONTEXT_EVERY, GPU_INFO, GPU_WORKLOAD
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
