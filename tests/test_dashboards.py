"""Dashboards: structure, queries, every output form, and the `dashboards:` spec section.

Grafana cannot run here, so the dashboards are proven by structure checks (ids, grid, variables,
datasource references), by parsing every query, by grafana-foundation-sdk's models, and (in
test_dashboards_integration.py) by running every query on a real Prometheus.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import partial_build
import promql_parser as pp
import pytest
import yaml
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from servewatch import catalog, generate
from servewatch.errors import ServewatchError, SpecErrors
from servewatch.grafana import SCHEMA_VERSION, GridPos, flow, ref_ids
from servewatch.spec.dashboards import BOARDS
from servewatch.lint import engine as lint
from servewatch.promql.builders import agg
from servewatch.render import dashboards as dash
from servewatch.spec.loader import load
from servewatch.validation import validate
from servewatch.validation.dashboard_links import check_board_links

REPO = Path(__file__).resolve().parents[1]
NAMES = tuple(BOARDS)
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
MACROS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "${__range}": "1h"}
VAR_RE = re.compile(r"\$\{(\w+)(?:[:.][^}]*)?\}|\$(\w+)|\[\[(\w+)\]\]")
LABEL_VALUES_RE = re.compile(r"^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$", re.S)
QUERY_RESULT_RE = re.compile(r"^query_result\((.*)\)$", re.S)


@pytest.fixture(scope="module")
def files(default_build):
    return default_build[1]


def _boards(files: dict[str, str]) -> dict[str, dict]:
    return {n: json.loads(files[f"dashboards/{n}.json"]) for n in NAMES}


@pytest.fixture(scope="module")
def boards(files):
    return _boards(files)


def planned(specs: Path) -> tuple:
    """(model, name -> dashboard) as `servewatch generate` plans them from `specs`: loaded, validated
    (the dashboards' links included), each board as its renderer writes it to <name>.json. The other
    outputs are not rendered, for tests that read none of them."""
    validated = validate(load(specs))
    return validated.model, {n: json.loads(dash.to_json(b)) for n, b in validated.dashboards.items()}


def all_panels(board: dict) -> list[dict]:
    """Every panel and row, the panels of collapsed rows included."""
    return [q for p in board["panels"] for q in [p, *p.get("panels", [])]]


def panels(board: dict) -> list[dict]:
    return [p for p in all_panels(board) if p["type"] != "row"]


def queries(board: dict):
    """(where, expr) of every PromQL the dashboard sends: targets, annotations, variable selectors."""
    for p in panels(board):
        for t in p["targets"]:
            yield f"{board['uid']} / {p['title']} / {t['refId']}", t["expr"]
    for a in board["annotations"]["list"]:
        if a.get("expr"):
            yield f"{board['uid']} / annotation {a['name']}", a["expr"]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            m = LABEL_VALUES_RE.match(v["query"]) or QUERY_RESULT_RE.match(v["query"])
            assert m, (
                f"variable {v['name']}: {v['query']!r} is not label_values(selector, label) or query_result"
            )
            yield f"{board['uid']} / variable {v['name']}", m.group(1)


def substitute(expr: str, values: dict[str, str] | None = None) -> str:
    for macro, value in sorted(MACROS.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(macro, value)
    values = values or {}

    def sub(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name.isdigit():  # label_replace's "$1"
            return m.group(0)
        return values.get(name, "x")

    return VAR_RE.sub(sub, expr)


def selectors(ast):
    out = []

    def visit(node):
        if isinstance(node, pp.VectorSelector):
            out.append(node)

    pp.walk(ast, visit)
    return out


def walk_json(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk_json(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk_json(v, path + (i,))


# ---------------------------------------------------------------------------------------------
# typed layer
# ---------------------------------------------------------------------------------------------
def test_ref_ids_follow_grafana():
    assert ref_ids(3) == ["A", "B", "C"]
    assert ref_ids(28)[25:] == ["Z", "AA", "AB"]


def test_flow_wraps_rows_and_never_leaves_the_grid():
    from servewatch.grafana import Panel, Row

    items = [
        Row("r"),
        Panel("stat", "a", (), w=16, h=4),
        Panel("stat", "b", (), w=16, h=6),
        Panel("stat", "c", (), w=8, h=2),
        Row("s"),
        Panel("stat", "d", (), w=24, h=3),
    ]
    pos = [p for _, p in flow(items)]
    assert pos == [
        GridPos(0, 0, 24, 1),
        GridPos(0, 1, 16, 4),
        GridPos(0, 5, 16, 6),
        GridPos(16, 5, 8, 2),
        GridPos(0, 11, 24, 1),
        GridPos(0, 12, 24, 3),
    ]
    with pytest.raises(ValueError):
        flow([Panel("stat", "too wide", (), w=25)])


def test_a_collapsed_row_takes_one_line_and_nests_its_panels():
    from servewatch.grafana import ClassicDashboard, Panel, Row

    items = [
        Row("open"),
        Panel("stat", "a", (), w=24, h=4),
        Row("closed", collapsed=True),
        Panel("stat", "b", (), w=12, h=6),
        Panel("stat", "c", (), w=12, h=6),
        Panel("stat", "d", (), w=12, h=2),
        Row("closed too", collapsed=True),
        Panel("stat", "e", (), w=24, h=3),
    ]
    pos = {item.title: p for item, p in flow(items)}
    assert pos["closed"] == GridPos(0, 5, 24, 1)
    # its panels sit below it as they will when it opens; the next row comes right under it
    assert [pos[t] for t in "bcd"] == [GridPos(0, 6, 12, 6), GridPos(12, 6, 12, 6), GridPos(0, 12, 12, 2)]
    assert pos["closed too"] == GridPos(0, 6, 24, 1) and pos["e"] == GridPos(0, 7, 24, 3)

    board = ClassicDashboard(uid="u", title="t")
    for item in items:
        board.add(item)
    top = board.panels()
    assert [p["title"] for p in top] == ["open", "a", "closed", "closed too"]
    assert [p["collapsed"] for p in top if p["type"] == "row"] == [False, True, True]
    assert [p["title"] for p in top[2]["panels"]] == ["b", "c", "d"] and top[1].get("panels") is None
    assert [p["title"] for p in top[3]["panels"]] == ["e"]


# ---------------------------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_identity_uid_id_and_schema_version(boards, name):
    board = boards[name]
    assert board["uid"] == BOARDS[name].uid
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"])
    assert board["id"] is None
    assert board["schemaVersion"] == SCHEMA_VERSION and 39 <= SCHEMA_VERSION <= 42
    assert board["title"] and board["tags"] == ["servewatch"]


def test_outputs_are_deterministic(files):
    # the same bytes from a second build: test_generate.py's test_same_input_same_bytes, every file
    mine = {k: v for k, v in files.items() if k.startswith("dashboards/")}
    assert mine
    assert all(v.endswith("\n") for v in mine.values())
    for path, text in mine.items():  # committed copies are current
        assert (REPO / path).read_text() == text, f"{path} is stale: run servewatch generate"


@pytest.mark.parametrize("name", NAMES)
def test_panel_ids_and_ref_ids_are_unique(boards, name):
    ids = [p["id"] for p in all_panels(boards[name])]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    for p in panels(boards[name]):
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]


def _check_grid(items: list[dict]) -> None:
    placed = []
    for p in items:
        gp = p["gridPos"]
        assert 0 <= gp["x"] and gp["w"] >= 1 and gp["x"] + gp["w"] <= 24 and gp["h"] >= 1 and gp["y"] >= 0, p[
            "title"
        ]
        if p["type"] == "row":
            assert (gp["x"], gp["w"], gp["h"]) == (0, 24, 1)
        pos = GridPos(gp["x"], gp["y"], gp["w"], gp["h"])
        clash = [t for t, other in placed if other.overlaps(pos)]
        assert not clash, f"{p['title']} overlaps {clash}"
        placed.append((p["title"], pos))


@pytest.mark.parametrize("name", NAMES)
def test_grid_is_24_columns_without_overlap(boards, name):
    """The first screen (open rows and their panels), and each collapsed row's panels as opened."""
    _check_grid(boards[name]["panels"])
    for row in boards[name]["panels"]:
        if row["type"] == "row" and row["collapsed"]:
            _check_grid(row["panels"])
            assert all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in row["panels"]), row["title"]


@pytest.mark.parametrize("name", NAMES)
def test_every_variable_used_is_defined_before_use(boards, name):
    board = boards[name]
    defined = []
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            for m in VAR_RE.finditer(v["query"]):
                used = m.group(1) or m.group(2) or m.group(3)
                assert used in defined, f"variable {v['name']} uses ${used} before it is defined"
        defined.append(v["name"])
    for path, value in walk_json({k: v for k, v in board.items() if k != "templating"}):
        if isinstance(value, str):
            for m in VAR_RE.finditer(value):
                used = m.group(1) or m.group(2) or m.group(3)
                if used.isdigit() or used.startswith("__"):
                    continue
                assert used in defined, f"{path}: ${used} is not a variable of {name}"


@pytest.mark.parametrize("name", NAMES)
def test_every_datasource_reference_is_the_variable(boards, name):
    board = boards[name]
    ds_vars = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert [v["name"] for v in ds_vars] == ["datasource"] and ds_vars[0]["query"] == "prometheus"
    count = 0
    for path, value in walk_json(board):
        if path and path[-1] == "datasource" and not (len(path) == 5 and path[-2] == "name"):
            if path[:3] == ("annotations", "list", 0):
                assert value == {"type": "grafana", "uid": "-- Grafana --"}  # the built-in annotation
                continue
            assert value == DS_REF, f"{path}: {value}"
            count += 1
    assert count >= len(panels(board))


def _enclosing_call(expr: str, pos: int) -> str:
    """The name of the function whose parentheses hold position `pos` of `expr`."""
    depth = 0
    for i in range(pos - 1, -1, -1):
        if expr[i] == ")":
            depth += 1
        elif expr[i] == "(":
            if depth == 0:
                return re.search(r"(\w*)\s*$", expr[:i]).group(1)
            depth -= 1
    return ""


@pytest.mark.parametrize("name", NAMES)
def test_rates_use_rate_interval_and_multi_value_variables_use_regex(default_build, boards, name):
    """Every rate window is $__rate_interval; a *_over_time range is a lookback of what the absence
    alerts remember (alert_context.py), shown as the alert has it."""
    multi = {v["name"] for v in boards[name]["templating"]["list"] if v.get("multi")}
    conditions = {a.expr for a in default_build[0].alerts()}  # an alert's own condition keeps its windows
    for where, expr in queries(boards[name]):
        # panels over the dashboard's time range (cost per good token) average over $__range
        over_range = "(selected range)" in where
        allowed = ("$__range", "$__range:$__interval") if over_range else ("$__rate_interval",)
        for m in re.finditer(r"\[([^\]]+)\]", expr) if expr not in conditions else ():
            if _enclosing_call(expr, m.start()).endswith("_over_time") and not over_range:
                continue
            assert m.group(1) in allowed, f"{where}: range [{m.group(1)}]"
        for var in multi:
            assert not re.search(rf'[^=!]="\${var}"', expr), f"{where}: multi-value ${var} needs =~"


@pytest.mark.parametrize("name", NAMES)
def test_every_query_parses_and_names_only_known_metrics(default_build, boards, name):
    model, _ = default_build
    cat = catalog.load()
    records = {r.record for r in model.records()}  # the signals' and the alerts' memory records
    for where, expr in queries(boards[name]):
        ast = pp.parse(substitute(expr))
        for sel in selectors(ast):
            assert sel.name, f"{where}: selector without a metric name"
            assert sel.name in records or cat.lookup(sel.name), (
                f"{where}: {sel.name} is not a catalog metric or record"
            )


@pytest.mark.parametrize("name", NAMES)
def test_queries_pass_the_house_lint(default_build, boards, name):
    model, _ = default_build
    ctx = lint.LintContext(catalog.load(), records={s.record for s in model.spec.signals.values()})
    problems = [
        f"{where}: {p}" for where, expr in queries(boards[name]) for p in lint.lint(substitute(expr), ctx)
    ]
    assert not problems, "\n".join(problems)


def test_panels_showing_an_alerted_signal_read_its_recording_rule(boards):
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for n in NAMES for p in panels(boards[n])}
    assert exprs["KV cache usage per engine"].startswith("engine:vllm_kv_cache_usage:max{")
    # the recording rule carries both host spellings: the FB panels read it without a join
    for title in ("Framebuffer used per GPU / MIG instance", "Framebuffer used per GPU"):
        assert exprs[title].lstrip("(\n ").startswith("gpu:dcgm_fb_used:ratio{"), title
        assert "group_left" not in exprs[title], title
    assert exprs["Time to first token"].startswith(
        "model:vllm_time_to_first_token_seconds:histogram_quantile_rate5m{"
    )
    assert 'quantile="0.95"' in exprs["Time to first token p95"]


def test_aggregations_over_everything_have_no_empty_by(boards):
    assert agg("max", [], "x") == "max(x)"
    assert agg("max", ["UUID", "GPU_I_ID"], "x") == "max by (UUID, GPU_I_ID) (x)"
    assert "by ()" not in json.dumps(boards)


def test_gpu_units_are_mebibytes_and_legends_name_host_and_gpu(boards):
    text = json.dumps(boards)
    assert "decmbytes" not in text
    fleet = {p["title"]: p for p in panels(boards["gpu-fleet"])}
    assert fleet["Framebuffer used"]["fieldConfig"]["defaults"]["unit"] == "mbytes"
    for p in fleet.values():
        for t in p["targets"]:
            if t["format"] == "time_series" and p["type"] != "stat":
                assert "{{Hostname}}{{hostname}}" in t["legendFormat"] and "{{gpu}}" in t["legendFormat"], p[
                    "title"
                ]


def variable_labels(board: dict) -> dict[str, set[str]]:
    """variable name -> the labels it lists values of (label_values(..., LABEL), or the labels a
    query_result variable's regex captures the value of): the labels it filters on."""
    out = {}
    for v in board["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = LABEL_VALUES_RE.match(v["query"])
        if m:
            out[v["name"]] = {m.group(2)}
        elif QUERY_RESULT_RE.match(v["query"]):
            captured = re.fullmatch(r'/(?:\(\?:)?([\w|]+)\)?="\(\[\^"\]\+\)"/', v["regex"])
            assert captured, f"variable {v['name']}: regex {v['regex']!r} captures no label value"
            out[v["name"]] = set(captured.group(1).split("|"))
    return out


def alert_link_problems(model, boards: dict[str, dict]) -> tuple[list[str], int]:
    """(problems, variables checked) for every alert's dashboard_url: the uid is generated, each
    var-X is a variable of that dashboard, and its {{ $labels.L }} is the label X lists values of
    (or the view would filter on a value the variable never holds). An alert's `host` is every host
    spelling folded into one (alert_context.py), so it fills a variable of any spelling."""
    from servewatch.alert_context import HOST

    spellings = set(catalog.load().dcgm.host_labels)
    by_uid = {b["uid"]: b for b in boards.values()}
    problems, seen = [], 0
    for alert in model.alerts():
        url = alert.annotations.get("dashboard_url")
        if not url:
            continue
        # a variable an absence alert sets only where it has the label: read it as the label it takes
        url = re.sub(
            r"\{\{ with \$labels\.(\w+) \}\}&var-(\w+)=\{\{ \. \}\}\{\{ end \}\}",
            r"&var-\2={{ $labels.\1 }}",
            url,
        )
        m = re.search(r"/d/([^/?]+)/[^?]*(?:\?(.*))?$", url)
        if not (m and m.group(1) in by_uid):
            problems.append(f"{alert.alert}: {url} lands on no generated dashboard")
            continue
        board = by_uid[m.group(1)]
        names, filters = {v["name"] for v in board["templating"]["list"]}, variable_labels(board)
        for var, value in re.findall(r"var-(\w+)=([^&]*)", m.group(2) or ""):
            used = re.findall(r"\$labels\.(\w+)", value)
            if var not in names:
                problems.append(f"{alert.alert}: no variable {var!r}: {url}")
            elif not used or not (
                set(used) <= filters.get(var, set())
                or (used == [HOST] and filters.get(var, set()) & spellings)
            ):
                listed = sorted(filters.get(var, ()))
                problems.append(f"{alert.alert}: var-{var} takes {used}, the variable lists {listed}")
            seen += 1
    return problems, seen


def test_alert_dashboard_urls_land_on_existing_variables(default_build, boards):
    problems, seen = alert_link_problems(default_build[0], boards)
    assert not problems, "\n".join(problems)
    assert seen >= 4


def test_alert_dashboard_url_with_a_label_the_variable_does_not_list_fails(specs_with):
    """The check above, on specs whose uuid variable would receive the GPU index."""
    model, boards = planned(specs_with({"alerts/gpu.yaml": [("uuid: UUID}", "uuid: gpu}")]}))
    problems, _ = alert_link_problems(model, boards)
    assert problems == ["GPUFramebufferUsageHigh: var-uuid takes ['gpu'], the variable lists ['UUID']"]


# a series label (time series) or a column (table: an instant query's labels are its columns)
FIELD_LABEL_RE = re.compile(r"\$\{__(?:field\.labels|data\.fields)\.([^}]+)\}")
LABEL_LIST_RE = re.compile(r"\b(?:by|on|group_left|group_right)\s*\(([^)]*)\)")


def mentioned_labels(expr: str, legend: str, records: dict[str, str]) -> set[str]:
    """Labels a query names in by/on/group_left/group_right, its legend names, or a recording
    rule it reads names the same way: a field label a data link reads must be one of them."""
    out = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""))
    for text in [expr] + [
        rule for name, rule in records.items() if re.search(rf"(?<![\w:]){re.escape(name)}\b", expr)
    ]:
        for group in LABEL_LIST_RE.findall(text):
            out |= {x.strip() for x in group.split(",") if x.strip()}
        out |= set(re.findall(r'label_replace\([^"]*"(\w+)"', text))
    return out


def dashboard_links(board: dict):
    """(where, url, panel or None) for every link to a dashboard: dashboard links, panel and data links."""
    for link in board["links"]:
        if link.get("url"):
            yield f"{board['uid']} link {link['title']}", link["url"], None
    for p in panels(board):
        for path, value in walk_json(p):
            if path and path[-1] == "url" and value:
                yield f"{board['uid']} / {p['title']} / {'.'.join(map(str, path))}", value, p


def test_links_between_dashboards_keep_variables_and_time(default_build, boards):
    model, _ = default_build
    records = {r.record: r.expr for r in model.records()}
    by_uid = {b["uid"]: b for b in boards.values()}
    checked = fields = 0
    for board in boards.values():
        link = board["links"][0]
        assert link["type"] == "dashboards" and link["tags"] == board["tags"][:1]
        assert link["includeVars"] and link["keepTime"]
        for where, url, panel in dashboard_links(board):
            parts = urlsplit(url)
            m = re.fullmatch(r"/d/([^/]+)/[\w-]+", parts.path)
            assert m and m.group(1) in by_uid, f"{where}: {url}"
            target = {v["name"] for v in by_uid[m.group(1)]["templating"]["list"]}
            params = parse_qsl(parts.query, keep_blank_values=True)
            assert ("${__url_time_range}", "") in params, f"{where}: {url} drops the time range"
            variables = [(k[4:], v) for k, v in params if k.startswith("var-")]
            assert variables, f"{where}: {url} sets no variable"
            for name, value in variables:
                assert name in target, f"{where}: {m.group(1)} has no variable {name!r} ({sorted(target)})"
                for label in FIELD_LABEL_RE.findall(value):
                    assert panel is not None, f"{where}: a field label outside a panel"
                    known = set().union(
                        *(
                            mentioned_labels(t["expr"], t.get("legendFormat"), records)
                            for t in panel["targets"]
                        )
                    )
                    assert label in known, (
                        f"{where}: var-{name} reads {label!r}; the queries name {sorted(known)}"
                    )
                    fields += 1
            checked += 1
    assert checked >= 3 and fields >= 4


@pytest.mark.parametrize(
    "board, old, new, message",
    [
        (
            "moe-deployment",
            "var-uuid=${__field.labels.UUID}",
            "var-uuid=${__field.labels.uuid}",
            "reads label 'uuid', which the panel's series do not carry",
        ),
        ("vllm-serving", "${__field.labels.model_name}", "${__field.labels.model}", "reads label 'model'"),
        ("gpu-fleet", "var-namespace=", "var-exported_namespace=", "has no variable 'exported_namespace'"),
        (
            "gpu-fleet",
            "${__data.fields.exported_namespace}",
            "${__data.fields.exported_ns}",
            "reads label 'exported_ns', which the panel's series do not carry",
        ),
        (
            "gpu-fleet",
            "/d/servewatch-vllm-serving/",
            "/d/servewatch-vllm/",
            "'servewatch-vllm', which is not generated",
        ),
    ],
)
def test_a_broken_link_between_dashboards_is_a_generation_error(
    default_build, boards, board, old, new, message
):
    model, _ = default_build
    check_board_links(model, boards)
    broken = {**boards, board: json.loads(json.dumps(boards[board]).replace(old, new))}
    assert broken[board] != boards[board]
    with pytest.raises(ServewatchError, match=re.escape(message)):
        check_board_links(model, broken)


# ---------------------------------------------------------------------------------------------
# grafana-foundation-sdk as a validator
# ---------------------------------------------------------------------------------------------
# Keys the Grafana-10.1-era SDK model (what an unpinned install resolves to) does not know yet:
# added by later Grafana releases, or datasource-specific (Prometheus annotation fields).
NEWER_THAN_SDK = {
    ".id",
    ".annotations.list[].builtIn",
    ".annotations.list[].step",
    ".annotations.list[].tagKeys",
    ".annotations.list[].textFormat",
    ".annotations.list[].titleFormat",
    ".annotations.list[].useValueForTime",
    ".templating.list[].definition",
    ".panels[].fieldConfig.defaults.custom.axisBorderShow",
    ".panels[].options.tooltip.hideZeros",
    ".panels[].options.percentChangeColorMode",
    ".panels[].options.showPercentChange",
    ".panels[].options.wideLayout",
    ".panels[].options.legend",
    ".panels[].options.maxVizHeight",
    ".panels[].options.namePlacement",
    ".panels[].options.sizing",
    ".panels[].options.tooltip.mode",
    ".panels[].options.tooltip.showColorScale",
}


def _roundtrip_diff(original, again, path=""):
    out = []
    if isinstance(original, dict):
        for k, v in original.items():
            p = f"{path}.{k}"
            if not isinstance(again, dict) or k not in again:
                out.append(("dropped", re.sub(r"\[\d+\]", "[]", p)))
            else:
                out += _roundtrip_diff(v, again[k], p)
    elif isinstance(original, list):
        if not isinstance(again, list) or len(again) != len(original):
            return [("changed", path)]
        for i, (a, b) in enumerate(zip(original, again, strict=True)):
            out += _roundtrip_diff(a, b, f"{path}[{i}]")
    elif original != again and not (isinstance(original, (int, float)) and original == again):
        out.append(("changed", f"{path}: {original!r} -> {again!r}"))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_grafana_foundation_sdk_reads_every_key(boards, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # classic dashboards are deprecated in 0.0.18+
        plugins.register_default_plugins()
        model = Dashboard.from_json(boards[name])
        again = json.loads(JSONEncoder(sort_keys=True).encode(model))
    problems = [
        f"{kind} {path}"
        for kind, path in _roundtrip_diff(boards[name], again)
        if not (kind == "dropped" and path in NEWER_THAN_SDK)
    ]
    assert not problems, "keys the SDK's typed model does not know (typo?) or changes:\n" + "\n".join(
        problems
    )
    assert again["schemaVersion"] == SCHEMA_VERSION and len(again["panels"]) == len(boards[name]["panels"])


# ---------------------------------------------------------------------------------------------
# output forms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_import_variant_asks_for_the_datasource(files, boards, name):
    imp = json.loads(files[f"dashboards/import/{name}.json"])
    assert [i["name"] for i in imp["__inputs"]] == ["DS_PROMETHEUS"]
    assert imp["__inputs"][0]["type"] == "datasource" and imp["__inputs"][0]["pluginId"] == "prometheus"
    assert imp["__elements"] == {}
    required = {(r["type"], r["id"]) for r in imp["__requires"]}
    types = {p["type"] for p in panels(boards[name])}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} | {("panel", t) for t in types} == required
    ds = next(v for v in imp["templating"]["list"] if v["type"] == "datasource")
    assert ds["current"]["value"] == "${DS_PROMETHEUS}"
    rest = {k: v for k, v in imp.items() if not k.startswith("__") and k != "templating"}
    assert rest == {k: v for k, v in boards[name].items() if k != "templating"}


def test_no_import_placeholders_outside_the_import_variant(files):
    for path, text in files.items():
        if path.startswith("dashboards/") and not path.startswith("dashboards/import/"):
            assert "${DS_" not in text and "__inputs" not in text, path


def test_provisioning_files(files, default_build):
    model, _ = default_build
    provider = yaml.safe_load(files["dashboards/provisioning/dashboards.yaml"])
    p = provider["providers"][0]
    assert provider["apiVersion"] == 1 and p["type"] == "file" and p["folder"] == "Serving"
    assert p["options"]["path"] == dash.PROVIDER_PATH
    ds = yaml.safe_load(files["dashboards/provisioning/datasources.yaml"])["datasources"][0]
    assert ds["type"] == "prometheus" and ds["uid"] == "prometheus"
    assert ds["jsonData"]["timeInterval"] == model.config.scrape_interval  # feeds $__rate_interval
    for name in NAMES:
        board = json.loads(files[f"dashboards/{name}.json"])
        var = next(v for v in board["templating"]["list"] if v["type"] == "datasource")
        assert var["current"]["value"] == ds["uid"] and var["current"]["text"] == ds["name"]


@pytest.mark.parametrize("name", NAMES)
def test_kubernetes_configmap_and_grafana_operator_resource(files, name):
    text = files[f"dashboards/{name}.json"]
    cm_text = files[f"dashboards/kubernetes/{name}.configmap.yaml"]
    cm = yaml.safe_load(cm_text)
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Serving"}
    assert cm["data"] == {f"{name}.json": text}
    assert len(cm_text.encode()) < 1024 * 1024
    assert f"{name}.json: |" in cm_text  # a readable literal block, not an escaped string
    op = yaml.safe_load(files[f"dashboards/kubernetes/{name}.grafanadashboard.yaml"])
    assert op["apiVersion"] == "grafana.integreatly.org/v1beta1" and op["kind"] == "GrafanaDashboard"
    assert op["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}
    assert op["spec"]["json"] == text and op["spec"]["folder"] == "Serving"
    assert op["spec"]["uid"] == json.loads(text)["uid"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", op["metadata"]["name"])


# ---------------------------------------------------------------------------------------------
# the dashboards: spec section
# ---------------------------------------------------------------------------------------------
def _build_error(specs: Path) -> list[str]:
    with pytest.raises(SpecErrors) as exc:
        generate.build(specs)
    return [str(e) for e in exc.value.errors]


def test_spec_errors_name_file_line_and_field(specs_with, line_of):
    specs = specs_with(
        {
            "dashboards.yaml": [
                ("    title: vLLM serving\n", "    titel: vLLM serving\n"),
                ("price_per_gpu_hour: 2.5", "price_per_gpu_hour: -1"),
                ("panels: {sm_active: true,", "panels: {sm_activ: true,"),
                ("  moe-deployment:\n", "  moe-deploymnt:\n"),
            ]
        }
    )
    path = specs / "dashboards.yaml"
    errors = _build_error(specs)
    file = path.as_posix()
    at = lambda text: f"{file}:{line_of(path, text)}"
    expected = [
        (f"{at('titel:')}: dashboards.vllm-serving.titel", "did you mean 'title'"),
        (f"{at('price_per_gpu_hour')}: dashboards.defaults.cost.price_per_gpu_hour", "greater than 0"),
        (f"{at('sm_activ:')}: dashboards.gpu-fleet.panels.sm_activ", "did you mean 'sm_active'"),
        (f"{at('moe-deploymnt:')}: dashboards.moe-deploymnt", "did you mean 'moe-deployment'"),
    ]
    for where, words in expected:
        assert any(e.startswith(where) and words in e for e in errors), (where, errors)


def test_cli_reports_dashboard_spec_errors_without_writing(specs_with, tmp_path, servewatch):
    specs = specs_with({"dashboards.yaml": [("refresh: 30s", "refresh: soon")]})
    out = tmp_path / "out"
    res = servewatch("generate", "--specs", specs, "--out", out)
    assert res.returncode == 2
    assert "dashboards.yaml:" in res.stderr and "dashboards.defaults.refresh" in res.stderr
    assert not (out / "dashboards").exists()


def test_alert_linking_to_a_missing_variable_is_an_error(specs_with):
    errors = _build_error(specs_with({"alerts/gpu.yaml": [("vars: {host: ", "vars: {node: ")]}))
    assert any("gpu.yaml" in e and "has no variable 'node'" in e for e in errors), errors


def test_identity_the_dashboards_cannot_use_is_reported_at_its_config_line(specs_with):
    specs = specs_with({"config.yaml": [("dcgm: [UUID, GPU_I_ID]", "dcgm: [UUID, gpu, GPU_I_ID]")]})
    path = specs / "config.yaml"
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip() == "identity:")
    errors = _build_error(specs)
    assert any(
        e.startswith(f"{path.as_posix()}:{line}: config.identity:") and "identity.dcgm" in e for e in errors
    ), errors


@pytest.fixture(scope="module")
def tuned_dashboards(specs_with) -> dict[str, str]:
    """The rules, dashboards and runbooks generated from the default specs with the `dashboards:`
    settings below changed: one build for the tests that read them (each reads its own settings)."""
    return partial_build.build(
        specs_with(
            {
                "dashboards.yaml": [
                    ("title: GPU fleet (DCGM)", "title: Fleet GPUs"),
                    ("price_per_gpu_hour: 2.5", "price_per_gpu_hour: 4.25"),
                    ("currency: USD", "currency: EUR"),
                    ("gpus_per_engine: null", "gpus_per_engine: 8"),
                    ("folder: Serving", "folder: LLM"),
                    ("      enabled: false\n", "      enabled: true\n"),  # kube_pod_labels
                ]
            }
        )
    )[1]


@pytest.fixture(scope="module")
def tuned_config(specs_with) -> dict[str, dict]:
    """The dashboards of the default specs with a cluster label and exporter 4.9's names (bytes)."""
    edits = [("cluster_label: null", "cluster_label: cluster"), ("fb_units: mib", "fb_units: bytes")]
    return planned(specs_with({"config.yaml": edits}))[1]


def test_titles_price_folder_and_gpus_per_engine_are_tunable(tuned_dashboards):
    files = tuned_dashboards
    boards = _boards(files)
    assert boards["gpu-fleet"]["title"] == "Fleet GPUs"
    cost = next(
        p
        for p in panels(boards["vllm-serving"])
        if p["title"] == "Cost per 1M output tokens (instantaneous)" and p["type"] == "timeseries"
    )
    expr = cost["targets"][0]["expr"]
    assert "* 4.25 / 3600 * 1e6" in expr and "* 8" in expr and "DCGM" not in expr
    assert cost["fieldConfig"]["defaults"]["unit"] == "currencyEUR"
    assert yaml.safe_load(files["dashboards/kubernetes/gpu-fleet.configmap.yaml"])["metadata"][
        "annotations"
    ] == {"grafana_folder": "LLM"}


def test_cluster_label_adds_a_variable_and_filters_every_selector(tuned_config):
    for board in tuned_config.values():
        names = [v["name"] for v in board["templating"]["list"]]
        assert names[:2] == ["datasource", "cluster"], names
        for where, expr in queries(board):
            if where.endswith("variable cluster"):
                continue
            for sel in selectors(pp.parse(substitute(expr))):
                labels = {m.name for m in sel.matchers.matchers}
                assert "cluster" in labels, f"{where}: {sel.name} is not filtered by cluster"


def test_kube_pod_labels_join_is_off_by_default_and_widens_the_deployment(tuned_dashboards, boards):
    assert "kube_pod_labels" not in json.dumps(boards)
    moe = _boards(tuned_dashboards)["moe-deployment"]
    expr = next(p for p in panels(moe) if p["title"] == "Framebuffer used per GPU")["targets"][0]["expr"]
    assert 'kube_pod_labels{label_leaderworkerset_sigs_k8s_io_name!=""' in expr
    assert "on (namespace, label_leaderworkerset_sigs_k8s_io_name)" in expr
    pp.parse(substitute(expr))


def test_bytes_exporter_profile_switches_units(tuned_config):
    fleet = tuned_config["gpu-fleet"]
    fb = next(p for p in panels(fleet) if p["title"] == "Framebuffer used")
    assert fb["fieldConfig"]["defaults"]["unit"] == "bytes"
    assert "DCGM_FI_DEV_FB_USED_BYTES" in fb["targets"][0]["expr"]
