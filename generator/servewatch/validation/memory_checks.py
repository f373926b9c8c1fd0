"""A memory (`promql.builders.remember`) reads its own previous value over MEMORY_GAP: a group that
records one must run more often than that, or the memory never finds its last value and forgets
everything the moment it goes (a down exporter's host, a vLLM target's model, a GPU's workload)."""

from __future__ import annotations

from ..errors import SpecError
from ..promql import builders as b
from ..spec.schema import seconds


def memory_problems(model) -> list[SpecError]:
    spec, out = model.spec, []
    overridden = {name for name, ov in spec.overrides.groups.items() if ov.interval}
    for group in model.groups:
        if not group.interval or seconds(group.interval) < seconds(b.MEMORY_GAP):
            continue
        memories = [r.record for r in group.records if b.unrolled(r.record, r.expr) is not None]
        if not memories:
            continue
        where = (
            ("override of group", group.name, "interval")
            if group.name in overridden
            else ("group", group.name, "interval")
        )
        out.append(
            SpecError(
                f"interval {group.interval} of group {group.name}: it records {', '.join(memories)}, which "
                f"reads its own last value of the past {b.MEMORY_GAP}; evaluated every {b.MEMORY_GAP} or "
                f"less often it never finds it and forgets what it remembers at once. Set an interval "
                f"below {b.MEMORY_GAP} (overrides.yaml: groups: {{{group.name}: {{interval: ...}}}})",
                spec.locate(*where),
            )
        )
    return out
