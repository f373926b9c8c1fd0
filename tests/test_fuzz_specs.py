"""Property-based fuzzing of the whole pipeline with the default specs mutated as a hostile pull
request would: structurally (a value replaced, a key dropped or misspelt, an entry duplicated, a
file copied) and textually (characters, bytes and lines inserted, deleted or cut).

For every case exactly one of these holds:
  * `servewatch generate` exits 0, every generated rule file (plain, PrometheusRule, Mimir) passes
    the real `promtool check rules`, and every selector in every rule selects exactly the configured
    series: a source metric carries the configured selector (plus a signal's own matchers), `up`
    carries the configured targets, a recording rule carries at most its quantile;
  * it exits 2 without a traceback, with one `servewatch: error: <file>:<line>: ...` line per
    problem naming a spec file and a line in it, and the output folder keeps every byte.

`make test` runs a fixed sample (SERVEWATCH_FUZZ_CASES, default 120, derandomized); `make fuzz`
runs 10,000 and prints what it found (docs/fuzzing.md has the last run).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import promql_parser as pp
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from servewatch import catalog as catalog_mod
from servewatch import cli, tools
from servewatch.lint.engine import walk
from servewatch.spec import matchers
from servewatch.spec.loader import load

REPO = Path(__file__).resolve().parents[1]
CASES = int(os.environ.get("SERVEWATCH_FUZZ_CASES", "120"))
PROGRESS = os.environ.get("SERVEWATCH_FUZZ_PROGRESS")  # a file that gets the summary every 250 cases
# `make fuzz` runs one process per core, each on its own fixed seed (a shard); without one the sequence
# is derandomized, the same on every run
SHARD = os.environ.get("SERVEWATCH_FUZZ_SHARD") or None
BASE = {
    p.relative_to(REPO / "specs").as_posix(): p.read_bytes() for p in sorted((REPO / "specs").rglob("*.yaml"))
}
# libyaml where the machine has it: the harness parses every generated rule file of every case, and
# the pure-Python parser took most of a case's time
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_load(text):
    return yaml.load(text, Loader=_LOADER)


def yaml_dump(data, **kwargs) -> str:
    return yaml.dump(data, Dumper=_DUMPER, **kwargs)


ERROR_RE = re.compile(r"servewatch: error: (?P<file>.+?):(?P<line>\d+)(?::\d+)?: \S")

# -- what a hostile pull request writes --------------------------------------------------------------

HOSTILE_TEXT = [
    *["", " ", "0", "-1", "1e308", "99999999999h", "5m\n", "0s", "-5m", "30s5m", "1h1h", "{team}", "{0}"],
    *["{", "}", "{{", "}}", "{{ $value", '"', "'", "\\", "\\n", "a\nb", "\t", "\r", "[[host]]", "[[nope]]"],
    *["__name__", "tëam", "é", "\u2028", "\x7f", "\x85", "((", "[", "a|(b", "(?=x)", "\\C", "\\d", "="],
    *['job=~"("', 'job="a\nb"', 'job="x"', 'job=~".*"', "x" * 300, ",", "&a", "*a", "!!binary", "%", "@"],
    *["`", "#", ": ", "- ", "? ", "|", ">", ".nan", ".inf", "-.inf", "true", "null", "~", "[]", "{}"],
    *["0x10", "1_000", "0.9512345", "12345678", "1e-300", "NaN", "Inf", "GPUFramebufferUsageHigh"],
    *["gpu_fb_used_ratio", "vllm:kv_cache_usage_perc", "up", "model_ttft", "UUID", "quantile", "le"],
]
# Valid but unusual values: what a spec may say that the default specs never do. Most of them must
# generate rules promtool accepts; they are where a writer of rules goes wrong.
ODD_BUT_VALID = [
    *[0, 1e-300, 1e300, 0.000001, 123456, -0.5, 1e6, "1ms", "1y", "292y", "2562047h", "1h30m", "15250w"],
    *["9223372036854ms", 'job=~"a|b"', 'env="prod",', ' a = "x" ', 'a!~"(?i)x.*"', 'a=~"\\\\d+\\\\.\\\\d+"'],
    *['a="é\\u00e9"', 'a="\\"q\\""', 'a=~"[[:alpha:]]+"', 'a=~"\\\\p{Greek}"', 'a=~"(?P<n>x)"', 'a=~""'],
    *['a!=""', 'x_1="1"', 'job=~".*dcgm.*", namespace!~"kube-.*"', "é", "a b", "'", "{", "}", "$value", "}}"],
    *["%", "#", "a:b", "https://x/{alert_lower}", "https://x/{alert}?x=1&y=2", "http://g/d/{uid}"],
    *["https://g/{slug}/{uid}", "https://x/%7B{alert}%7D", "a-b", "x", "Z9", "cluster", "region"],
]
HOSTILE_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\r\n", b"\t"]
HOSTILE_VALUES = [
    *[None, True, False, 0, -1, 1, 0.5, 1e308, 10**30, float("nan"), float("inf"), -float("inf")],
    *[[], {}, [[[[[[[[]]]]]]]], {"": ""}, {"x": None}, ["5m", None], {"tëam": "a\nb"}, {"__name__": "x"}],
    *HOSTILE_TEXT,
]


def _paths(data, prefix=()):
    """Every path to a value in plain data, the data itself first."""
    yield prefix
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def _get(data, path):
    for part in path:
        data = data[part]
    return data


def structural(draw, files: dict[str, bytes]) -> str:
    """Load one YAML file, change one thing in its data, dump it back."""
    name = draw(st.sampled_from(sorted(n for n in files if n.endswith(".yaml"))))
    try:
        data = yaml_load(files[name].decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return "structural: skipped (file no longer YAML)"
    if not isinstance(data, (dict, list)):
        return "structural: skipped (not a mapping)"
    paths = list(_paths(data))
    path = draw(st.sampled_from(paths[1:] or paths))
    op = draw(st.sampled_from(["replace", "replace", "delete", "rename", "duplicate", "wrap"]))
    parent = _get(data, path[:-1]) if path else None
    key = path[-1] if path else None
    if op == "replace" and path:
        parent[key] = draw(st.sampled_from(draw(st.sampled_from([HOSTILE_VALUES, ODD_BUT_VALID]))))
    elif op == "delete" and path:
        del parent[key]
    elif op == "rename" and isinstance(parent, dict):
        parent[draw(st.sampled_from([f"{key}s", str(key)[:-1], str(key).upper(), "for", "alert", ""]))] = (
            parent.pop(key)
        )
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key], default=str)))
    elif op == "wrap" and path:
        parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}, str(parent[key])]))
    files[name] = yaml_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
    return f"structural: {op} {'.'.join(map(str, path))} in {name}"


def textual(draw, files: dict[str, bytes]) -> str:
    """Insert, delete or overwrite text or bytes somewhere in one file."""
    name = draw(st.sampled_from(sorted(files)))
    data = files[name]
    op = draw(st.sampled_from(["insert", "insert", "delete", "cut", "line", "bytes"]))
    at = draw(st.integers(0, len(data)))
    if op == "insert":
        piece = draw(st.sampled_from(HOSTILE_TEXT)).encode("utf-8")
        files[name] = data[:at] + piece + data[at:]
    elif op == "delete":
        files[name] = data[:at] + data[at + draw(st.integers(1, 40)) :]
    elif op == "cut":
        files[name] = data[:at]
    elif op == "line":
        lines = data.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(draw(st.integers(0, len(lines))), lines[i])
        files[name] = b"\n".join(lines)
    else:
        files[name] = data[:at] + draw(st.sampled_from(HOSTILE_BYTES)) + data[at:]
    return f"textual: {op} at byte {at} of {name}"


def targeted(draw, files: dict[str, bytes]) -> str:
    """Replace a value of a kind that flows into rules (a duration, number, matcher, URL, label)."""
    name = draw(st.sampled_from(sorted(files)))
    text = files[name].decode("utf-8", "replace")
    spots = list(re.finditer(r"(?<=: )('[^'\n]*'|\"[^\"\n]*\"|[0-9][0-9a-z.]*|https?://\S+)", text))
    if not spots:
        return "targeted: skipped (nothing to replace)"
    spot = draw(st.sampled_from(spots))
    piece = draw(st.sampled_from(draw(st.sampled_from([HOSTILE_TEXT, [str(v) for v in ODD_BUT_VALID]]))))
    new = draw(
        st.sampled_from(
            [json.dumps(piece), json.dumps(piece), f"'{piece}'", piece, spot.group()[:-1] + piece]
        )
    )
    files[name] = (text[: spot.start()] + new + text[spot.end() :]).encode("utf-8")
    return f"targeted: {spot.group()[:30]!r} -> {new[:30]!r} in {name}"


def new_file(draw, files: dict[str, bytes]) -> str:
    """A file copied under a new name (everything defined twice), or a file of hostile text."""
    name = draw(st.sampled_from(["extra.yaml", "alerts/more.yaml", "zz.yml"]))
    if draw(st.booleans()):
        source = draw(st.sampled_from(sorted(files)))
        files[name] = files[source]
        return f"new file: {name} copies {source}"
    pieces = draw(st.lists(st.sampled_from(HOSTILE_TEXT), min_size=1, max_size=6))
    files[name] = "".join(pieces).encode("utf-8")
    return f"new file: {name} with {pieces!r}"[:200]


# Values a user may give where a value flows straight into the rules, per kind; "*" is any alert.
DURATIONS = ["1ms", "1s", "90s", "1h30m", "1y", "292y", "2562047h", "15250w", "9223372036854ms", "0s"]
MATCHERS = [
    *['job=~"a|b"', 'env="prod",', ' a = "x" ', 'a!~"(?i)x.*"', 'a=~"\\\\d+\\\\.\\\\d+"', 'a="é\\u00e9"'],
    *['a="\\"q\\""', 'a=~"[[:alpha:]]+"', 'a=~"\\\\p{Greek}"', 'a=~"(?P<n>x)"', 'a!=""', 'x_1="1"', "\n"],
    *[
        'job=~".*dcgm.*", namespace!~"kube-.*"',
        'a="x\\ny"',
        'a=~"\\\\Q.*\\\\E"',
        'a=~"é|ü"',
        'a=~"(a|b){2,3}"',
    ],
]
NUMBERS = [0, 1e-300, 1e300, 0.000001, 123456, -0.5, 1e6, 0.9999, 1, 50]
TEXTS = ["é", "a b", "'", '"', "{", "}", "$value", "}}", "%", "#", "a:b", "x" * 63, "[[host]]", "\\"]
LABELS = ["cluster", "region", "x", "Z9", "_a", "a_b_c"]
URLS = ["https://x/{alert_lower}", "https://x/{alert}?x=1&y=2", "http://g/d/{uid}", "https://g/{slug}/{uid}"]
URLS += ["https://x/%7B{alert}%7D/{alert}", "runbooks/{alert}.md", "https://g/d/{uid}/{slug}/x"]
K8S = ["a", "a-b", "x" * 63, "team-1", "0"]
IDENTITIES = [
    ["UUID", "gpu"],
    ["UUID"],
    ["namespace", "pod", "model_name", "engine", "x"],
    ["UUID", "GPU_I_ID", "x"],
]
TUNABLE = [
    *[("config.yaml", ("config", k), DURATIONS) for k in ("scrape_interval", "rate_window")],
    ("config.yaml", ("config", "cluster_label"), LABELS),
    *[("config.yaml", ("config", k), K8S) for k in ("rule_namespace", "rule_prefix")],
    *[("config.yaml", ("config", k), URLS) for k in ("runbook_url", "dashboard_url")],
    *[
        ("config.yaml", ("config", k, s), MATCHERS)
        for k in ("selectors", "targets")
        for s in ("dcgm", "vllm")
    ],
    *[("config.yaml", ("config", "rule_labels", k), K8S) for k in ("release", "team")],
    *[("config.yaml", ("config", "identity", k), IDENTITIES) for k in ("dcgm", "vllm", "model")],
    ("signals.yaml", ("signals", "model_request_error_ratio", "matchers"), MATCHERS),
    ("overrides.yaml", ("overrides", "alerts", "*", "threshold"), NUMBERS),
    *[("overrides.yaml", ("overrides", "alerts", "*", k), DURATIONS) for k in ("for", "keep_firing_for")],
    *[("overrides.yaml", ("overrides", "alerts", "*", k, "team"), TEXTS) for k in ("labels", "annotations")],
    ("overrides.yaml", ("overrides", "groups", "gpu-memory", "interval"), DURATIONS),
]
ALERTS = ["GPUFramebufferUsageHigh", "VLLMKVCacheUsageHigh", "VLLMRequestErrorRateHigh", "DCGMExporterDown"]


def tuning(draw, files: dict[str, bytes]) -> str:
    """Set one value that flows into the rules, as a user tuning the specs would (or a hostile one)."""
    name, path, values = draw(st.sampled_from(TUNABLE))
    path = tuple(draw(st.sampled_from(ALERTS)) if p == "*" else p for p in path)
    try:
        data = yaml_load(files[name].decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return "tuning: skipped (file no longer YAML)"
    if not isinstance(data, dict):
        return "tuning: skipped (not a mapping)"
    node = data
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    value = draw(st.sampled_from(draw(st.sampled_from([values, values, values, HOSTILE_VALUES]))))
    node[path[-1]] = value
    files[name] = yaml_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
    return f"tuning: {'.'.join(path)} = {value!r} in {name}"[:200]


MUTATIONS = [structural, structural, textual, targeted, targeted, new_file, tuning, tuning, tuning, tuning]


# -- what every case must show ---------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_cli(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([str(a) for a in args])  # an exception escaping here is a traceback
    return code, err.getvalue()


def rule_groups(files: dict[str, bytes]) -> list[tuple[str, str]]:
    """(where, plain rule file text) for every rule group list generated under rules/, in whichever
    form it was written (plain, PrometheusRule spec, Mimir namespace, Thanos Ruler file without its
    own group field, Helm values map)."""
    out = []

    def find(node, where):
        if isinstance(node, dict):
            groups = node.get("groups")
            if (
                isinstance(groups, list)
                and groups
                and all(isinstance(g, dict) and "rules" in g for g in groups)
            ):
                plain = [{k: v for k, v in g.items() if k != "partial_response_strategy"} for g in groups]
                out.append((where, yaml_dump({"groups": plain}, sort_keys=False)))
                return
            for key, value in node.items():
                find(value, f"{where}:{key}")

    for rel, data in sorted(files.items()):
        if rel.startswith("rules/") and rel.endswith(".yaml"):
            find(yaml_load(data), rel)
    return out


def selector_problems(specs: Path, files: dict[str, bytes]) -> list[str]:
    """Selectors in the generated rules that select other series than the config says."""
    spec = load(specs)
    cfg, cat = spec.config, catalog_mod.load()
    parsed = lambda text: frozenset((m.label, m.op, m.value) for m in matchers.parse(text))  # noqa: E731
    targets = {parsed(text) for text in cfg.targets.values()}
    extras = [frozenset()] + [parsed(s.matchers) for s in spec.signals.values() if s.matchers]
    # the workload a GPU is mapped to is read where the mapping exists (alert_context.py)
    workload = cat.dcgm.workload_labels[cfg.dcgm.workload_labels].pod
    extras.append(frozenset({(workload, "!=", "")}))
    # whole GPUs apart from MIG instances (GPUMissing: a GPU whose MIG mode changed reports on)
    mig = cat.dcgm.labels.mig_instance
    extras.append(frozenset({(mig, "=", "")}))
    # a recording rule the alerts remember is narrowed by the config's matchers its series carry
    configured = set().union(*(parsed(t) for t in [*cfg.selectors.values(), *cfg.targets.values()]))
    # a vLLM metric's own labels (finished_reason, ...): an SLO counts its good events by them
    own = {label for m in cat.metrics.values() if m.source == "vllm" for label in m.labels}
    ops = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
    problems = []
    groups = [
        (rel, [r for g in yaml_load(text)["groups"] for r in g["rules"]]) for rel, text in rule_groups(files)
    ]
    # a record is read from other files too (the SLO rules read the vLLM family's records): its
    # series already went through the selector where the record reads the raw metric
    records = {r["record"] for _, rules in groups for r in rules if "record" in r}
    for rel, rules in groups:
        for rule in rules:
            for node, _ in walk(pp.parse(rule["expr"])):
                if not isinstance(node, pp.VectorSelector):
                    continue
                got = {
                    (m.name, ops[str(m.op)], m.value) for m in node.matchers.matchers if m.name != "__name__"
                }
                name = node.name
                # an SLO rule reads its own records by `slo` (and per-model branches by model_name),
                # and narrows raw series to its good events (a bucket, finished reasons) on top of config
                slo_rule = "slo" in rule.get("labels", {})
                if name in records:
                    # a part of a record by its own labels (a quantile, a bucket's le, whole GPUs, a signal's
                    # matchers, an SLO's name and per-model branch, an SLO's good events), or a record
                    # the alerts remember, narrowed by the configured matchers
                    ok = (
                        all(
                            (label in ("quantile", "le") and op == "=")
                            or (label == mig and v == "")
                            or label in ("slo", "model_name")
                            or (slo_rule and label in own)
                            or (label, op, v) in configured
                            for label, op, v in got
                        )
                        or got in extras
                    )
                elif name == "up":
                    ok = got in targets
                else:
                    entry = cat.lookup(name)
                    selector = parsed(cfg.selectors.get(entry.source if entry else "vllm", ""))
                    ok = any(got == selector | extra for extra in extras) or (slo_rule and selector <= got)
                if not ok:
                    problems.append(f"{rel}: {rule.get('record') or rule.get('alert')}: {name}{sorted(got)}")
    return problems


class PromtoolChecks:
    """`promtool check rules` on rule files, each distinct content checked once."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.seen: dict[str, str] = {}  # content hash -> promtool's complaint ("" when it passed)

    def problems(self, groups: list[tuple[str, str]]) -> list[str]:
        new = {hashlib.sha256(t.encode()).hexdigest(): (rel, t) for rel, t in groups}
        todo = {h: v for h, v in new.items() if h not in self.seen}
        if todo:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir.mkdir(parents=True)
            paths = {}
            for h, (_, text) in todo.items():
                paths[h] = self.workdir / f"{h[:16]}.rules.yaml"
                paths[h].write_text(text)
            res = tools.run("promtool", "check", "rules", *paths.values(), errors="replace")
            report = res.stdout + res.stderr
            for h, path in paths.items():
                failed = res.returncode != 0 and re.search(
                    rf"{re.escape(str(path))}.*(FAILED|error|:)", report
                )
                self.seen[h] = report[-1500:] if failed else ""
        return [f"{new[h][0]}: {self.seen[h]}" for h in new if self.seen[h]]


class FuzzRun:
    def __init__(self, root: Path):
        self.root = root
        self.specs, self.out = root / "specs", root / "out"
        self.promtool = PromtoolChecks(root / "promtool")
        self.outcomes: Counter = Counter()
        self.first_errors: Counter = Counter()
        self.started = time.monotonic()
        self._write(BASE)
        code, err = run_cli("generate", "--specs", self.specs, "--out", self.out)
        assert code == 0, err

    def _write(self, files: dict[str, bytes]) -> None:
        shutil.rmtree(self.specs, ignore_errors=True)
        for rel, data in files.items():
            path = self.specs / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def case(self, draw) -> None:
        done = sum(self.outcomes.values())
        if PROGRESS and done and done % 250 == 0:
            Path(PROGRESS).write_text(self.report() + "\n")
        files = dict(BASE)
        count = draw(st.sampled_from([1, 1, 1, 2, 3]))
        steps = [draw(st.sampled_from(MUTATIONS))(draw, files) for _ in range(count)]
        self._write(files)
        before = snapshot(self.out)
        where = f"after {steps}"
        try:
            code, err = run_cli("generate", "--specs", self.specs, "--out", self.out)
        except Exception as exc:  # what a user would see as a traceback
            raise AssertionError(f"{where}: a traceback: {exc!r}") from exc
        if code == 0:
            self.outcomes["generated"] += 1
            after = snapshot(self.out)
            assert not (problems := self.promtool.problems(rule_groups(after))), (where, problems)
            assert not (problems := selector_problems(self.specs, after)), (where, problems)
            return
        assert code == 2, (where, code, err)
        self.outcomes["refused"] += 1
        lines = err.strip().splitlines()
        assert lines and "Traceback" not in err, (where, err)
        assert snapshot(self.out) == before, (where, "the output folder changed", err)
        problems = [
            line for line in lines if not re.match(r"servewatch: \d+ problem\(s\) in the specs", line)
        ]
        line_counts = {(self.specs / rel).as_posix(): data.count(b"\n") + 1 for rel, data in files.items()}
        for line in problems:
            if line.startswith(f"servewatch: error: {self.specs.as_posix()}: "):
                continue  # something no file defines (every signal deleted): the folder is the place
            m = ERROR_RE.match(line)
            assert m, (where, "an error line without file:line", line)
            assert m["file"] in line_counts, (where, "an error naming no spec file", line)
            assert 1 <= int(m["line"]) <= line_counts[m["file"]], (where, "a line outside the file", line)
        self.first_errors[re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", problems[0].split(": ", 3)[-1])[:90]] += 1

    def report(self) -> str:
        took = time.monotonic() - self.started
        total = sum(self.outcomes.values())
        lines = [
            f"{total} cases in {took:.0f} s ({took / max(total, 1) * 1000:.0f} ms each): "
            f"{self.outcomes['generated']} generated (rules passed promtool, selectors as configured), "
            f"{self.outcomes['refused']} refused with file:line and the output untouched; "
            f"{len(self.promtool.seen)} distinct rule files checked by promtool",
            "most frequent first errors:",
            *(f"  {n:5d}  {msg}" for msg, n in self.first_errors.most_common(15)),
        ]
        return "\n".join(lines)


@pytest.mark.slow
def test_mutated_specs_generate_valid_rules_or_fail_cleanly(tmp_path):
    run = FuzzRun(tmp_path)

    @settings(
        max_examples=CASES,
        derandomize=SHARD is None,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        # no shrinking: a failure names the mutations that caused it, and shrinking a slow case is slow
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
    )
    @given(st.data())
    def one_case(data):
        run.case(data.draw)

    (seed(int(SHARD))(one_case) if SHARD else one_case)()
    print("\n" + run.report())
    # both outcomes must occur, or the mutations are too timid (or too wild) to test anything
    assert run.outcomes["generated"] >= CASES // 20 and run.outcomes["refused"] >= CASES // 4, run.report()


def test_the_selector_check_reads_records_of_other_files_as_selected_and_raw_metrics_not(specs_with):
    """The SLO rules read the vLLM family's records (already selected where they read the raw
    metric) and narrow them to their good events; a raw metric without the selector is still found."""
    from servewatch import generate

    # the jobs config.targets.vllm (job=~".*vllm.*") matches: check refuses others (TargetConflict)
    selector = 'job=~"vllm|vllm-prod"'
    specs = specs_with({"config.yaml": [("    vllm: ''", f"    vllm: '{selector}'")]})
    _, built = generate.build(specs)
    files = {path: text.encode() for path, text in built.items()}
    slo = files["rules/slo.rules.yaml"].decode()
    assert "sum by (namespace, model_name) (model:vllm_request_success:rate5m)" in slo
    assert selector_problems(specs, files) == []
    raw = f"vllm:request_success_total{{{selector}}}"
    assert raw in files["rules/vllm.rules.yaml"].decode()
    files["rules/vllm.rules.yaml"] = files["rules/vllm.rules.yaml"].replace(
        raw.encode(), b"vllm:request_success_total"
    )
    assert any(
        "rules/vllm.rules.yaml" in p and "vllm:request_success_total[]" in p
        for p in selector_problems(specs, files)
    )
