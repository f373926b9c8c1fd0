"""bench/native.py's harness: the two outputs side by side in one Prometheus."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from bench import loading, native, native_report

REPO = Path(__file__).resolve().parents[1]


def test_renaming_touches_whole_record_names_only():
    names = ["model:x_bucket:rate5m", "model:x"]
    text = 'histogram_count(model:x_bucket:rate5m) / model:x + model:xy + vllm:model:x{a="b"}'
    assert native.renamed(text, names, ":n") == (
        'histogram_count(model:x_bucket:rate5m:n) / model:x:n + model:xy + vllm:model:x{a="b"}'
    )


def test_each_form_is_generated_from_a_copy_of_the_specs_and_its_records_renamed(tmp_path):
    specs = native.form_specs(REPO / "specs", "native", tmp_path / "specs")
    assert yaml.safe_load((specs / "config.yaml").read_text())["config"]["histograms"] == "native"
    assert yaml.safe_load((REPO / "specs" / "config.yaml").read_text())["config"]["histograms"] == "classic"
    native.generated(specs, tmp_path / "out")
    before = native.records(tmp_path / "out" / "rules")
    assert native.rename_records(tmp_path / "out") == before
    after = native.records(tmp_path / "out" / "rules")
    assert after == sorted(n + native.SUFFIX for n in before)
    # every read of a record follows it: the rules and the dashboards read the renamed names only
    exprs = [r["expr"] for g in native.rule_cost.rule_groups(tmp_path / "out" / "rules") for r in g["rules"]]
    boards = [
        (tmp_path / "out" / "dashboards" / p.name).read_text() for p in (REPO / "dashboards").glob("*.json")
    ]
    for text in exprs + boards:
        assert native.renamed(text, before, "!") == text  # no old name is left whole
        assert native.SUFFIX * 2 not in text
    assert any(n in "".join(boards) for n in after)


def test_the_live_phase_runs_the_recording_rules_alone(tmp_path):
    sources = sorted((REPO / "rules").glob("*.rules.yaml"))
    files = loading.records_only(sources + sources, tmp_path)  # two sets with the same file names
    assert len({f.name for f in files}) == len(files) == 2 * len(sources)
    assert all(f.name.endswith(s.name) for f, s in zip(files, sources + sources, strict=True))
    first = files[: len(sources)]
    rules = [r for f in first for g in json.loads(f.read_text())["groups"] for r in g["rules"]]
    assert rules and all("record" in r for r in rules)
    assert {r["record"] for r in rules} == set(native.records(REPO / "rules"))


def _side(samples: int, eval_ms: float, cpu_ms: float) -> dict:
    group = {"name": "g", "interval_s": 60, "samples": samples, "eval_ms": eval_ms}
    total = {"samples": samples, "eval_ms": eval_ms, "cpu_ms": cpu_ms, "concurrent_ms": eval_ms}
    total.update(samples_per_30s=samples // 2, eval_ms_per_30s=eval_ms / 2)
    return {"groups": [group], "total": total}


def test_the_report_sets_each_group_of_one_form_against_the_other():
    size = {
        "rules": {
            "classic_first": _side(100, 4.0, 8.0),
            "native": _side(250, 1.0, 2.0),
            "classic": _side(100, 2.0, 6.0),
        },
        "floor": {"classic": {"samples_per_30s": 90}, "native": {"samples_per_30s": 120}},
    }
    rules = native_report.rules_table(size)
    assert "| g (60 s) | 100 | 250 | 2.50x | 2.0 | 1.0 |" in rules  # classic: the second A
    totals = native_report.totals_table(size)
    # per 30 s: the group runs every 60 s, so half its samples, time and CPU
    assert "| native (B) | 125 | 0.5 ms | 1.0 ms | 1.0 ms |" in totals
    assert "| classic (A, first) | 50 | 2.0 ms | 4.0 ms | 4.0 ms |" in totals
