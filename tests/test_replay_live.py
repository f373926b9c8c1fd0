"""A tiny fleet replayed into a real Prometheus 3.5: every step stored, classic and NHCB side by side."""

from __future__ import annotations

import time

import pytest

from servewatch_testkit.localprom import LocalPrometheus
from servewatch_testkit.replay import JOB, NATIVE_FLAG, FleetReplay
from servewatch_testkit.synth.scaled_fleet import FleetShape, series_batches

pytestmark = [pytest.mark.integration, pytest.mark.tools("prometheus", "promtool")]

HIST = "vllm:time_to_first_token_seconds"


def test_replayed_fleet_is_stored_whole_and_both_histogram_forms_answer_alike(tmp_path):
    shape = FleetShape.sized(8, 2, models=1, mig_share=0, minutes=5)  # one host, one pod of two engines
    series = [s for batch in series_batches(shape) for s in batch]
    replay = FleetReplay(series, start=time.time() - shape.steps * shape.step)
    with (
        replay,
        LocalPrometheus(scrape_configs=[replay.scrape_config("1s")], extra_args=[NATIVE_FLAG]) as prom,
    ):
        deadline = time.monotonic() + 60
        while not replay.caught_up():
            assert time.monotonic() < deadline, f"replay stuck at step {replay.served}"
            time.sleep(0.5)
        time.sleep(2)  # the last scrape's samples are committed after its body is read
        at = replay.last_timestamp()
        window = f"{replay.served * shape.step}s"
        natives = {
            (s.family, s.labels) for s in series if s.kind == "histogram" and s.name.endswith("_count")
        }
        names = {s.name for s in series} | {family for family, _ in natives}
        # every series of the fleet, every step: one sample per scrape at its own timestamp (count_over_time
        # drops the name, so one name at a time)
        steps = {
            prom.query_value(f'{agg}(count_over_time({{__name__="{name}", job!="{JOB}"}}[{window}]))', at)
            for name in names
            for agg in ("min", "max")
        }
        assert steps == {replay.served}
        # ... and one native histogram per classic one (its _count's label set, under the family's name)
        assert prom.query_value(f'count({{__name__=~".+", job!="{JOB}"}})', at) == len(series) + len(natives)
        classic = prom.query_map(
            f"histogram_quantile(0.9, sum by (engine, le) (rate({HIST}_bucket[2m])))", at, by=("engine",)
        )
        native = prom.query_map(
            f"histogram_quantile(0.9, sum by (engine) (rate({HIST}[2m])))", at, by=("engine",)
        )
        assert classic and native == pytest.approx(classic, rel=1e-9)
        counted = prom.query_map(f"{HIST}_count", at, by=("engine",))
        assert prom.query_map(f"histogram_count({HIST})", at, by=("engine",)) == counted
        # the bench loads its records into the running server once the replay has caught up
        rules = tmp_path / "r.rules.yaml"
        rules.write_text(f"groups: [{{name: g, rules: [{{record: r, expr: 'sum(rate({HIST}[1m]))'}}]}}]\n")
        prom.reload(rule_files=[rules], scrape_configs=[])
        assert [g["name"] for g in prom.rules()] == ["g"]
        assert prom.api("/api/v1/targets")["activeTargets"] == []
