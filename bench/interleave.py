"""The rules that differ between two rule sets, measured in alternation on one Prometheus.

A-B-A measures each side's whole rule set in one pass, so a change in the machine's load between
the passes (other processes on the cores) moves one side's eval times and not the other's. Here
each differing rule is run before, then after (the order swapped every round), round after round:
both sides see the same load. Per side: the median eval time over the rounds, Prometheus' CPU per
run (from `/proc`, summed over the rounds: one run is often below its 10 ms tick), and the rounds
in which this tree's rule was the faster.
"""

from __future__ import annotations

import statistics

from . import machine
from .promstats import Runner


def differing(before: list[dict], now: list[dict]) -> list[dict]:
    """[{group, rule, before, now}]: each rule (by group, name and rank among its namesakes) whose
    expression differs; a rule on one side only is left out (nothing to set it against)."""

    def keyed(groups: list[dict]) -> dict[tuple[str, str, int], str]:
        out = {}
        for g in groups:
            seen: dict[str, int] = {}
            for r in g["rules"]:
                seen[r["name"]] = seen.get(r["name"], 0) + 1
                out[(g["name"], r["name"], seen[r["name"]])] = r["expr"]
        return out

    old, new = keyed(before), keyed(now)
    return [
        {"group": k[0], "rule": k[1] if k[2] == 1 else f"{k[1]} #{k[2]}", "before": old[k], "now": new[k]}
        for k in new
        if k in old and old[k] != new[k]
    ]


def measure(prom, pid: int, pairs: list[dict], at: float, rounds: int) -> list[dict]:
    """Each pair's two expressions, `rounds` times each in alternation, after one unmeasured round."""
    once = Runner(prom, 1, 0)
    runs = {i: {"before": [], "now": [], "cpu_before": 0.0, "cpu_now": 0.0} for i in range(len(pairs))}
    for r in range(rounds + 1):
        for i, pair in enumerate(pairs):
            for side in ("before", "now") if r % 2 else ("now", "before"):
                cpu = machine.cpu_seconds(pid)
                cost = once.instant(pair[side], at)
                if r:  # round 0 warms the caches
                    runs[i][side].append(cost.eval_s * 1000)
                    runs[i][f"cpu_{side}"] += machine.cpu_seconds(pid) - cpu
    out = []
    for i, pair in enumerate(pairs):
        got = runs[i]
        out.append(
            {
                "group": pair["group"],
                "rule": pair["rule"],
                "rounds": rounds,
                "eval_ms_before": round(statistics.median(got["before"]), 3),
                "eval_ms_now": round(statistics.median(got["now"]), 3),
                "cpu_ms_before": round(got["cpu_before"] / rounds * 1000, 2),
                "cpu_ms_now": round(got["cpu_now"] / rounds * 1000, 2),
                "now_faster": sum(n < b for n, b in zip(got["now"], got["before"], strict=True)),
            }
        )
    return out


__all__ = ["differing", "measure"]
