"""What lint reads: every rule and dashboard form recognised by content, folders walked, and
anything else an error that names what was expected (exit 2), never a silent pass."""

import base64
import gzip
import json
from pathlib import Path

import pytest

from servewatch import catalog
from servewatch.lint import inputs, runner
from servewatch.lint.checks import ALL
from servewatch.lint.facts import LintContext

REPO = Path(__file__).resolve().parents[1]
KNOWN = set(ALL)


def read(path):
    return inputs.read(str(path), KNOWN)


@pytest.mark.parametrize(
    "path, form",
    [
        ("dashboards/vllm-serving.json", "classic"),
        ("dashboards/import/vllm-serving.json", "import"),
        ("dashboards/kubernetes/vllm-serving.configmap.yaml", "classic"),
        ("dashboards/kubernetes/vllm-serving.grafanadashboard.yaml", "grafanadashboard"),
        ("tests/lint_fixtures/examples/vllm-query-statistics.json", "api"),
    ],
)
def test_every_dashboard_form_is_read_with_all_its_queries(path, form):
    contents = read(REPO / path)
    assert not contents.problems
    (board,) = contents.dashboards
    assert board.form == form
    if "vllm-serving" in path:
        classic = read(REPO / "dashboards/vllm-serving.json").dashboards[0]
        assert len(board.queries) == len(classic.queries) > 20
        assert len(board.variable_queries) == len(classic.variable_queries) == 4


@pytest.mark.parametrize(
    "path, form",
    [
        ("rules/gpu.rules.yaml", "plain"),
        ("rules/kubernetes/gpu.prometheusrule.yaml", "prometheusrule"),
        ("rules/mimir/gpu.yaml", "mimir"),
    ],
)
def test_every_rule_form_is_read(path, form):
    contents = read(REPO / path)
    assert not contents.problems
    assert {r.form for r in contents.rules} == {form}
    assert [r.name for r in contents.rules] == [r.name for r in read(REPO / "rules/gpu.rules.yaml").rules]


def test_a_configmap_line_points_into_the_embedded_json():
    path = REPO / "dashboards/kubernetes/gpu-fleet.configmap.yaml"
    board = read(path).dashboards[0]
    lines = path.read_text().splitlines()
    for pq in board.queries:
        line = pq.query.location.line
        assert '"expr"' in lines[line - 1], (line, lines[line - 1])
        assert pq.query.location.path.startswith("data.gpu-fleet.json.panels[")


def test_a_grafana_resource_a_gzipped_dashboard_and_a_list_are_read(tmp_path):
    board = json.loads((REPO / "dashboards/gpu-fleet.json").read_text())
    resource = tmp_path / "resource.json"
    resource.write_text(
        json.dumps({"apiVersion": "dashboard.grafana.app/v1beta1", "kind": "Dashboard", "spec": board})
    )
    assert read(resource).dashboards[0].form == "resource"
    zipped = base64.b64encode(gzip.compress(json.dumps(board).encode())).decode()
    operator = tmp_path / "operator.yaml"
    operator.write_text(
        "apiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\n"
        f"metadata: {{name: fleet}}\nspec:\n  instanceSelector: {{}}\n  gzipJson: {zipped}\n"
    )
    assert len(read(operator).dashboards[0].queries) > 10
    rule = (REPO / "rules/kubernetes/gpu.prometheusrule.yaml").read_text()
    listing = tmp_path / "list.yaml"
    listing.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        + "".join(f"  {line}\n" for line in ["- " + rule.replace("\n", "\n    ")])
    )
    assert len(read(listing).rules) == len(read(REPO / "rules/gpu.rules.yaml").rules)


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "the file is empty"),
        ("# only a comment\n", "no documents"),
        ('{"panels": [', "invalid JSON"),
        ("groups: [\n", "invalid YAML"),
        ("config:\n  scrape_interval: 30s\n", "not a rule file or a dashboard"),
        ("kind: PersesDashboard\nspec: {panels: {}}\n", "Perses dashboards are not supported"),
        (
            "apiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\n"
            "spec: {url: 'https://grafana.com/api/dashboards/12239/revisions/2/download'}\n",
            "content comes from spec.url",
        ),
        ("apiVersion: dashboard.grafana.app/v2beta1\nkind: Dashboard\nspec: {elements: {}}\n", "schema v2"),
        ("apiVersion: v1\nkind: ConfigMap\ndata: {a.txt: hello}\n", "holds no dashboard and no rule file"),
    ],
)
def test_what_lint_cannot_read_is_an_error(tmp_path, servewatch, text, says):
    path = tmp_path / "input.yaml"
    path.write_text(text)
    res = servewatch("lint", "--specs", "", path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert says in res.stdout and "[input]" in res.stdout


def test_provisioning_files_are_recognised_and_skipped(servewatch):
    res = servewatch("lint", "--specs", "", "dashboards/provisioning")
    assert res.returncode == 0
    assert res.stdout.count("skipped: Grafana provisioning file") == 2


def test_a_folder_is_walked_and_hidden_folders_are_not(tmp_path):
    (tmp_path / "team" / "deep").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    for target in (tmp_path / "team" / "deep" / "gpu.yaml", tmp_path / ".git" / "gpu.yaml"):
        target.write_text((REPO / "rules/gpu.rules.yaml").read_text())
    (tmp_path / "README.md").write_text("not read")
    files, missing = inputs.discover([str(tmp_path), str(tmp_path / "nope.yaml")])
    assert files == [str(tmp_path / "team" / "deep" / "gpu.yaml")]
    assert missing == [str(tmp_path / "nope.yaml")]


def test_a_missing_path_is_an_error(servewatch):
    res = servewatch("lint", "--specs", "", "no/such/rules.yaml")
    assert res.returncode == 2 and "no such file or folder" in res.stdout


def test_grafana_variables_are_replaced_by_what_fits_where_they_stand():
    ctx = LintContext(catalog.load())
    board = {
        "title": "t",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {"name": "q", "type": "custom", "query": "0.5,0.9"},
                {"name": "by", "type": "custom", "query": "pod,engine"},
                {"name": "n", "type": "textbox", "query": "5"},
            ]
        },
        "panels": [
            {
                "type": "timeseries",
                "title": "p",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "targets": [
                    {
                        "refId": "A",
                        "expr": "histogram_quantile($q, sum by (le, ${by}) (rate("
                        'vllm:e2e_request_latency_seconds_bucket{model_name=~"${model:regex}"}'
                        "[$__rate_interval]))) > bool $n",
                    },
                    {"refId": "B", "expr": "topk($n, max by (pod, engine) (vllm:num_requests_waiting))"},
                ],
            }
        ],
    }
    from servewatch.lint.inputs.dashboards import read_dashboard
    from servewatch.lint.inputs.documents import Doc

    dashboard = read_dashboard(board, Doc(board, lambda p: None, lambda p: None), (), "d.json", "classic")
    assert [pq.query.error for pq in dashboard.queries] == [None, None]
    problems = runner.query_problems(dashboard.queries[0].query, ctx, runner.select().checks)
    assert [p.check for p in problems] == []
