"""How a bench fleet's hour reaches the Prometheus the rules are measured on: two ways.

- ``backfilled``: the hour streamed to OpenMetrics text and written as TSDB blocks by
  ``promtool tsdb create-blocks-from openmetrics``, the recording rules' history likewise with
  ``create-blocks-from rules``. Quick, but every query then reads persisted blocks: the series'
  labels are decoded from the block index on each read, which a running Prometheus does not do
  for its recent hours (they sit in the in-memory head). A CPU profile of the GPU rules at 1,024
  GPUs spent a fifth of Prometheus' time in that decoding (``tsdb/index.(*Decoder).Series``), most
  for the label-heavy DCGM series (bench/README.md, "Head or blocks").
- ``scraped``: the hour replayed by scraping (``servewatch_testkit.replay``: one stamped 30 s step
  per scrape), so the raw series are in the head as on a Prometheus that has been scraping the
  fleet; the recording rules' history is backfilled into the running server. Slower (about 10
  minutes at 4,096 GPUs), closer to what the rule set costs in production.

Either way the scrapes and rule evaluations stop before anything is measured, and Prometheus has
merged the overlapping blocks, so only the measurement's queries use its CPU. And every record
whose expression answers at the measured step holds a sample within one evaluation before it:
a record the backfill lost is backfilled again (``complete_records``), or the bench stops, since
measured without it every rule that reads it would read nothing.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import yaml

from servewatch.spec.fields import duration_ms
from servewatch_testkit import rule_stages
from servewatch_testkit.localprom import BLOCK_S, LocalPrometheus
from servewatch_testkit.replay import JOB, FleetReplay
from servewatch_testkit.synth.scaled_fleet import FleetShape, series_batches, write_fleet

from .report import steps_kept

WAYS = ("backfill", "scrape")


@dataclass
class Loaded:
    """A running Prometheus holding the fleet's hour: measure at `at` (the last step)."""

    prom: LocalPrometheus
    start: float  # the first step's time
    at: float  # the last step's time
    facts: dict = field(default_factory=dict)  # how the data got there, for the results


def overlapping(blocks: list[dict]) -> bool:
    """Whether any two TSDB blocks (``meta.json`` dicts) share time; maxTime is exclusive."""
    spans = sorted((b["minTime"], b["maxTime"]) for b in blocks)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def wait_compacted(prom: LocalPrometheus, timeout_s: float = 900) -> float:
    """Wait until Prometheus has merged the backfilled blocks; returns the seconds waited.

    The data block and one block per backfilled recording rule overlap in time. Prometheus merges
    them (vertical compaction) about a minute after it starts; measured before that, every query
    reads many blocks, and measured during it, the compaction competes for the CPU. A Prometheus
    that has been running holds compacted blocks, so that is the state to measure.
    """
    t0 = time.monotonic()
    while overlapping(prom.blocks()):
        if not prom.running:  # killed from outside: it will never compact, so do not wait it out
            raise SystemExit(f"Prometheus exited before it compacted the backfilled blocks: {prom.log_path}")
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"Prometheus did not compact the backfilled blocks within {timeout_s:.0f} s")
        time.sleep(2)
    time.sleep(2)  # the obsolete blocks' deletion follows the compaction
    return round(time.monotonic() - t0, 1)


def block_aligned_start(steps: int, step: float, now: float | None = None) -> float:
    """A start whose data and recorded series all fall into one 2 h TSDB block range, ending 5 min
    before the last 2 h boundary: Prometheus then merges every backfilled block into one, whatever
    the hour (data that straddles a boundary stays split in blocks that each query must read)."""
    now = time.time() if now is None else now
    end = math.floor(now / BLOCK_S) * BLOCK_S - 300
    start = end - (steps - 1) * step
    if start <= end + 300 - BLOCK_S:
        raise SystemExit(
            f"{steps} steps of {step} s do not fit one {BLOCK_S // 3600} h block: use less --minutes"
        )
    return start


@contextmanager
def backfilled(shape: FleetShape, rule_files: Sequence[Path], workdir: Path) -> Iterator[Loaded]:
    """The fleet's hour and its recorded series as TSDB blocks under `workdir`."""
    start = block_aligned_start(shape.steps, shape.step)
    om = workdir / "fleet.om"
    t0 = time.perf_counter()
    written = write_fleet(shape, om, start)
    facts: dict = {
        "openmetrics": {
            **asdict(written),
            "write_s": round(time.perf_counter() - t0, 1),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,  # so far, this process
        }
    }
    _log(f"{shape.gpus} GPUs: {written.series} series, {written.samples} samples, {written.bytes:,} bytes")
    with LocalPrometheus(om, rule_files=rule_files, ready_timeout=1800) as prom:
        om.unlink()
        waited = wait_compacted(prom)
        facts["tsdb"] = {**prom.timings, "compaction_wait_s": waited, "blocks": len(prom.blocks())}
        end = start + (shape.steps - 1) * shape.step
        again = complete_records(prom, rule_files, start, end, prom.backfill_restarting)
        facts["records_backfilled_again"] = again
        if again:
            facts["tsdb"]["compaction_wait_s"] += wait_compacted(prom)
        _log(f"backfilled: {facts['tsdb']}")
        yield Loaded(prom, start, end, facts)


@contextmanager
def scraped(
    shape: FleetShape,
    rule_files: Sequence[Path],
    workdir: Path,
    scrape_interval: str = "2s",
    extra_args: Sequence[str] = (),
    live_minutes: float = 0.0,
) -> Iterator[Loaded]:
    """The fleet's hour scraped into the head, ending about now; the recording rules of `rule_files`
    backfilled over it into the running server. With `live_minutes` they are also evaluated live,
    from the replay's end until `live_minutes` after it (what promtool cannot backfill, such as
    native-histogram records, exists only from then on); without, the records are in blocks only."""
    series = [s for batch in series_batches(shape) for s in batch]
    facts: dict = {"series": len(series)}
    start = time.time() - shape.steps * shape.step  # the hour ends about now
    replay = FleetReplay(series, start, shape.step)
    del series
    with replay:
        scrape = replay.scrape_config(scrape_interval)
        with LocalPrometheus(scrape_configs=[scrape], extra_args=list(extra_args), ready_timeout=600) as prom:
            t0 = time.monotonic()
            while not replay.caught_up():
                if not prom.running:
                    raise SystemExit(f"Prometheus exited during the replay: {prom.log_path}")
                time.sleep(2)
                _log(f"replay: step {replay.served}, {replay.due() - replay.served + 1} behind")
            facts["replay"] = {"steps": replay.served, "seconds": round(time.monotonic() - t0, 1)}
            facts["replay"]["check"] = check = check_steps(prom, shape, start)
            _log(f"replayed: {facts['replay']}")
            if kept := steps_kept(check):
                _log(
                    f"the replay fell behind: some series hold {kept[0]} of {kept[1]} steps (scrapes "
                    "that timed out), so the rules read that much less: raise --scrape-interval"
                )
            live_from = time.time()
            records = records_only(rule_files, workdir / "live-records")
            if live_minutes:
                # evaluated live only when the measurement needs what promtool cannot backfill: a
                # record in a block and in the head is read from both and merged on every query,
                # which a Prometheus that has been evaluating its rules (all in its head) never does
                prom.reload(rule_files=records)
            else:
                # the data ends here: scraped on while the records are backfilled, the last step
                # would run minutes past their history and leave the slower groups' records stale
                prom.reload(scrape_configs=[])
            end = live_from - 1 if live_minutes else replay.last_timestamp()
            t0 = time.monotonic()
            prom.backfill_live(records, start, end)
            facts["backfill_s"] = round(time.monotonic() - t0, 1)
            _log(f"backfilled the float records in {facts['backfill_s']} s")
            while time.time() < live_from + live_minutes * 60:
                time.sleep(5)
            prom.reload(rule_files=[], scrape_configs=[])  # quiet: only the measurement's queries run
            facts["compaction_wait_s"] = wait_compacted(prom)  # the stages' blocks overlap until merged
            at = replay.last_timestamp()
            if not live_minutes:
                again = complete_records(prom, records, start, at, prom.backfill_live)
                facts["records_backfilled_again"] = again
                if again:
                    facts["compaction_wait_s"] += wait_compacted(prom)
            yield Loaded(prom, start, at, facts)


def lost_records(prom: LocalPrometheus, rule_files: Sequence[Path], at: float) -> list[tuple[str, dict]]:
    """The recording rules whose expression answers at `at` while the record has no sample within
    one evaluation of it, as (file, rule): history the backfill lost. Measured so, every rule that
    reads such a record would read nothing and look cheap."""
    lost = []
    for f in rule_files:
        for group in (yaml.safe_load(Path(f).read_text()) or {}).get("groups") or []:
            # a group's last evaluation lies within one interval before `at`: two leave a margin
            window = f"{2 * duration_ms(group.get('interval') or prom.rule_eval_interval)}ms"
            for rule in group.get("rules") or []:
                if "record" not in rule:
                    continue
                matchers = [f'__name__="{rule["record"]}"'] + [
                    f"{k}={json.dumps(str(v))}" for k, v in sorted((rule.get("labels") or {}).items())
                ]
                recorded = f"count(last_over_time({{{', '.join(matchers)}}}[{window}]))"
                if prom.query_value(f"count({rule['expr']})", at) and not prom.query_value(recorded, at):
                    lost.append((str(f), rule))
    return lost


def complete_records(
    prom: LocalPrometheus,
    rule_files: Sequence[Path],
    start: float,
    at: float,
    backfill: Callable[[list[Path], float, float], None],
    tries: int = 3,
) -> list[str]:
    """Backfill again (`backfill`: one of the server's backfills) the records `lost_records` finds,
    with every record that reads them (made from their absence), until none is lost; the names
    backfilled again (their blocks are not merged yet). Exits if records stay lost."""
    again: list[str] = []
    for attempt in range(tries + 1):
        lost = lost_records(prom, rule_files, at)
        if not lost:
            return again
        names = sorted({rule["record"] for _, rule in lost})
        if attempt == tries:
            raise SystemExit(f"records still missing after {tries} more backfills: {', '.join(names)}")
        _log(f"the backfill lost {len(names)} records, backfilling them again: {', '.join(names)}")
        redo = with_readers(lost, rule_files)
        again += [n for n in sorted({r["record"] for _, r in redo}) if n not in again]
        backfill(only_rules(redo, prom.workdir / f"records-again-{attempt}"), start, at)
    return again


def reads(rule: dict) -> set[str]:
    """The metric names a recording rule reads as the backfill evaluates it (a memory's read of
    itself unrolled)."""
    return rule_stages.reads(rule_stages.backfilled(rule["record"], rule["expr"]))


def with_readers(lost: Sequence[tuple[str, dict]], rule_files: Sequence[Path]) -> list[tuple[str, dict]]:
    """`lost` and every recording rule that reads one of them, directly or through another."""
    records = [
        (str(f), rule)
        for f in rule_files
        for group in (yaml.safe_load(Path(f).read_text()) or {}).get("groups") or []
        for rule in group.get("rules") or []
        if "record" in rule
    ]
    lost_rules = [rule for _, rule in lost]
    names = {rule["record"] for rule in lost_rules}
    grown = True
    while grown:
        readers = {
            rule["record"] for _, rule in records if rule["record"] not in names and reads(rule) & names
        }
        names |= readers
        grown = bool(readers)
    readers = names - {rule["record"] for rule in lost_rules}
    return [(f, rule) for f, rule in records if rule in lost_rules or rule["record"] in readers]


def only_rules(rules: Sequence[tuple[str, dict]], into: Path) -> list[Path]:
    """Rule files holding just `rules` ((file, rule) pairs), each in its group (name and interval
    kept), under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for n, f in enumerate(sorted({f for f, _ in rules})):
        wanted = [r for g, r in rules if g == f]
        groups = []
        for group in (yaml.safe_load(Path(f).read_text()) or {}).get("groups") or []:
            kept = [r for r in group.get("rules") or [] if r in wanted]
            if kept:
                groups.append({**group, "rules": kept})
        path = into / f"{n:02d}-{Path(f).name}"
        path.write_text(json.dumps({"groups": groups}, indent=1) + "\n")
        out.append(path)
    return out


def records_only(rule_files: Sequence[Path], into: Path) -> list[Path]:
    """The recording rules of each rule file, written under `into` (what runs live: the alerts
    would only cost CPU while the data is loaded)."""
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for n, f in enumerate(rule_files):
        body = yaml.safe_load(Path(f).read_text()) or {}
        groups = [
            {**g, "rules": [r for r in g.get("rules") or [] if "record" in r]}
            for g in body.get("groups") or []
        ]
        path = into / f"{n:02d}-{Path(f).name}"  # two rule sets may name their files alike
        path.write_text(json.dumps({"groups": [g for g in groups if g["rules"]]}, indent=1) + "\n")
        out.append(path)
    return out


def check_steps(prom: LocalPrometheus, shape: FleetShape, start: float) -> dict:
    """Samples per series over the replayed hour, for one series family of each kind: every series
    must hold every step."""
    end = start + (shape.steps - 1) * shape.step
    window = f"{shape.steps * shape.step}s"
    out = {}
    for name in (
        "DCGM_FI_DEV_GPU_UTIL",
        "vllm:num_requests_running",
        "vllm:prompt_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds",
        "up",
    ):
        sel = f'{{__name__="{name}", job!="{JOB}"}}'
        row = {"series": prom.query_value(f"count({sel})", end)}
        for agg in ("min", "max"):
            row[f"{agg}_samples"] = prom.query_value(f"{agg}(count_over_time({sel}[{window}]))", end)
        out[name] = row
    out["expected_samples"] = shape.steps
    return out


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
