"""servewatch_testkit.replay: a fleet's history served one stamped step per scrape."""

from __future__ import annotations

import re
import urllib.request

import pytest

from servewatch_testkit.replay import JOB, FleetReplay
from servewatch_testkit.scrape_server import Exposition, exposition
from servewatch_testkit.synth import Series

T = {"job": "vllm", "instance": "10.0.0.1:8000", "namespace": "ns", "pod": "p"}
FLEET = [
    Series("up", T, [1, 1, 1]),
    Series("vllm:num_requests_running", {**T, "engine": "0"}, [2, 3, 4]),
    Series("vllm:prompt_tokens_total", {**T, "engine": "0"}, [0, 300, 600], "counter"),
    Series("x_bucket", {**T, "le": "1.0"}, [1, 2, 3], "histogram"),
    Series("x_bucket", {**T, "le": "+Inf"}, [2, 4, 6], "histogram"),
    Series("x_count", T, [2, 4, 6], "histogram"),
    Series("x_sum", T, [1.5, 3, 4.5], "histogram"),
]
START = 1_700_000_000.0


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _scrape(replay: FleetReplay) -> str:
    with urllib.request.urlopen(replay.url + "/metrics", timeout=10) as r:
        return r.read().decode()


def _stamps(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[1] for line in text.splitlines() if not line.startswith("#")}


def test_a_stamped_step_is_the_plain_text_with_the_timestamp_on_every_sample_line():
    plain = exposition(FLEET, 1)
    stamped = Exposition(FLEET).at(1, timestamp_ms=1234)
    assert [line.removesuffix(" 1234") for line in stamped.splitlines()] == plain.splitlines()
    assert _stamps(stamped) == {"1234"}
    # every label is kept: one target carries the whole fleet, honor_labels keeps who is who
    assert 'up{instance="10.0.0.1:8000",job="vllm",namespace="ns",pod="p"} 1.0 1234' in stamped


def test_each_scrape_gets_the_next_step_stamped_at_its_own_time_until_the_clock_is_reached():
    clock = Clock(START + 10 * 30 + 5)  # the fleet's 3 steps and 7 more are due
    with FleetReplay(FLEET, START, clock=clock) as replay:
        texts = [_scrape(replay) for _ in range(3)]
        assert [_stamps(t) for t in texts] == [{str(int((START + i * 30) * 1000))} for i in range(3)]
        assert replay.served == 3 and not replay.caught_up()
        # past the fleet's end it goes on as it ended: the counter keeps its last increase
        assert re.search(r"^vllm:prompt_tokens_total\{.*\} 900\.0 ", _scrape(replay), re.M)
        while not replay.caught_up():
            _scrape(replay)
        assert replay.served == 11 and replay.last_timestamp() == START + 10 * 30
        # nothing from the future: the latest due step again until the next one is due
        assert _stamps(_scrape(replay)) == {str(int((START + 300) * 1000))}
        clock.now += 30
        assert _stamps(_scrape(replay)) == {str(int((START + 330) * 1000))}


def test_the_scrape_config_keeps_labels_and_timestamps_and_stores_histograms_both_ways():
    with FleetReplay(FLEET, START) as replay:
        cfg = replay.scrape_config("2s")
    assert cfg["job_name"] == JOB
    assert cfg["honor_labels"] is True and cfg["honor_timestamps"] is True
    assert cfg["convert_classic_histograms_to_nhcb"] is True
    assert cfg["always_scrape_classic_histograms"] is True
    assert cfg["scrape_interval"] == cfg["scrape_timeout"] == "2s"
    assert re.fullmatch(r"127\.0\.0\.1:\d+", cfg["static_configs"][0]["targets"][0])


def test_last_timestamp_needs_a_step_served():
    with pytest.raises(ValueError, match="no step served"):
        FleetReplay(FLEET, START).last_timestamp()
