"""The context join of target-level alerts: written once, and honest about the labels it copies."""

from __future__ import annotations

from servewatch.promql import builders as b
from servewatch.promql import labels


def test_a_left_join_writes_its_expression_once_and_falls_back_to_the_cover():
    expr = "max by (job, instance) (up) == 0"
    info = "group without () (topk by (job, instance) (1, seen))"
    cover = "group by (job, instance) (up)"
    joined = b.left_join(expr, info, ["job", "instance"], ["host"], cover)
    assert joined.count(expr) == 1
    assert joined.endswith(f"({info}\nor on (job, instance)\n  {cover})")


def test_a_label_a_join_copies_is_always_there_only_where_the_one_side_always_has_it():
    cover = "x * on (job) group_left (host) (group by (job, host) (seen) or on (job) group by (job) (up))"
    assert "host" in labels.returned(cover).known
    assert "host" not in labels.always(cover)
    assert "host" in labels.always("x * on (job) group_left (host) group by (job, host) (seen)")
    assert "host" in labels.always("group by (job, host) (seen) * on (job) group_right (host) x")
