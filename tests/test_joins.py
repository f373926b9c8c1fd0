"""The context join of target-level alerts: written once, and honest about the labels it copies."""

from __future__ import annotations

from servewatch.promql import builders as b
from servewatch.promql import labels


def test_a_left_join_with_a_cover_writes_its_expression_once():
    expr = "max by (job, instance) (up) == 0"
    info = "group without () (topk by (job, instance) (1, seen))"
    cover = "group by (job, instance) (up)"
    plain = b.left_join(expr, info, ["job", "instance"], ["host"])
    once = b.left_join(expr, info, ["job", "instance"], ["host"], cover)
    assert plain.count(expr) == 2
    assert once.count(expr) == 1 and cover in once


def test_a_label_a_join_copies_is_always_there_only_where_the_one_side_always_has_it():
    cover = "x * on (job) group_left (host) (group by (job, host) (seen) or on (job) group by (job) (up))"
    assert "host" in labels.returned(cover).known
    assert "host" not in labels.always(cover)
    assert "host" in labels.always("x * on (job) group_left (host) group by (job, host) (seen)")
    assert "host" in labels.always("group by (job, host) (seen) * on (job) group_right (host) x")
