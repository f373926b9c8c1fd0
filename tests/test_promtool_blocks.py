"""promtool's rule backfill, one run per 2 h block: run over a range that starts just before a block
boundary, promtool 3.5 writes no history at all for a group with no evaluation before the boundary."""

from __future__ import annotations

import math
import textwrap
import time

import pytest

from servewatch_testkit.localprom import BLOCK_S, LocalPrometheus, block_windows
from servewatch_testkit.synth import Series, to_openmetrics

B = 10 * BLOCK_S  # a block boundary


def test_a_range_is_cut_before_each_block_boundary_as_promtool_cuts_it():
    assert block_windows(B + 10, B + 600) == [(B + 10, B + 600)]
    assert block_windows(B - 20, B + 600) == [(B - 20, B - 1), (B, B + 600)]
    assert block_windows(B - 20, B + BLOCK_S + 5) == [
        (B - 20, B - 1),
        (B, B + BLOCK_S - 1),
        (B + BLOCK_S, B + BLOCK_S + 5),
    ]
    assert block_windows(B - 0.5, B + 60) == [(B, B + 60)]  # nothing whole before the edge
    # promtool refuses a range of no length: a range that ends on a boundary stops a second before
    assert block_windows(B - 20, B) == [(B - 20, B - 1)]
    assert block_windows(B - 1, B + 60) == [(B, B + 60)]


RULES = textwrap.dedent("""\
    groups:
      - name: every-5m
        interval: 5m
        rules:
          - record: job:level:max
            expr: max by (job) (level)
""")


@pytest.mark.integration
@pytest.mark.tools("promtool", "prometheus")
def test_a_group_without_an_evaluation_before_the_first_boundary_keeps_its_history(tmp_path):
    edge = math.floor(time.time() / BLOCK_S) * BLOCK_S - BLOCK_S  # a boundary in the past
    step = 30
    first = edge - 3600
    series = Series("level", {"job": "j"}, [float(i) for i in range(240)], "gauge")
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    # the rules' range starts 10 s before the boundary: a 5 m group evaluates there only if its
    # phase falls into those 10 s (1 in 30); after the boundary it evaluates 12 times an hour
    with LocalPrometheus(
        to_openmetrics([series], first, step),
        rule_files=[rules],
        rules_start=edge - 10,
        rules_end=edge + 3600,
    ) as prom:
        evaluations = prom.query_value("count_over_time(job:level:max[1h])", edge + 3600)
    assert evaluations == 12
