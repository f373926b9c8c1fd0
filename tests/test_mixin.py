"""mixin.libsonnet, evaluated with the jsonnet package the way a kube-prometheus project imports it."""

import json
import shutil

import _jsonnet
import yaml


USE = """
local servewatch = import 'servewatch/mixin.libsonnet';
{
  alerts: servewatch.prometheusAlerts,
  rules: servewatch.prometheusRules,
  dashboards: servewatch.grafanaDashboards,
}
"""


def vendored(tmp_path, out):
    """jsonnet-bundler's layout for `jb install github.com/example-org/servewatch@main`: the repository
    under vendor/github.com/..., and vendor/servewatch linking to it for `import 'servewatch/...'`."""
    vendor = tmp_path / "vendor"
    repo = vendor / "github.com" / "example-org" / "servewatch"
    repo.mkdir(parents=True)
    for name in ("mixin.libsonnet", "rules", "dashboards"):
        src = out / name
        shutil.copytree(src, repo / name) if src.is_dir() else shutil.copy(src, repo / name)
    (vendor / "servewatch").symlink_to(repo.relative_to(vendor))
    return vendor


def evaluate(tmp_path, out, snippet=USE) -> dict:
    vendor = vendored(tmp_path, out)
    main = tmp_path / "main.jsonnet"
    main.write_text(snippet)
    return json.loads(_jsonnet.evaluate_file(str(main), jpathdir=[str(vendor)]))


def generated_groups(out) -> list[dict]:
    return [
        g
        for p in sorted((out / "rules").glob("*.rules.yaml"))
        for g in yaml.safe_load(p.read_text())["groups"]
    ]


def has_alert(group) -> bool:
    return any("alert" in r for r in group["rules"])


def test_the_committed_mixin_gives_the_committed_rules_and_dashboards(tmp_path, repo):
    got = evaluate(tmp_path, repo)
    groups = generated_groups(repo)
    assert groups and any(has_alert(g) for g in groups)
    # alerting groups whole (records evaluate before the alerts that read them), in file order
    assert got["alerts"]["groups"] == [g for g in groups if has_alert(g)]
    assert got["rules"]["groups"] == [g for g in groups if not has_alert(g)]
    boards = sorted((repo / "dashboards").glob("*.json"))
    assert len(boards) >= 3
    assert got["dashboards"] == {p.name: json.loads(p.read_text()) for p in boards}


def test_groups_of_records_alone_go_to_prometheus_rules(tmp_path, repo):
    """A group of recording rules alone (the ones only dashboards read, and the SLO goodput) is
    kube-prometheus' prometheusRules; every group that alerts is in prometheusAlerts."""
    got = evaluate(tmp_path, repo)
    groups = {g["name"]: g for g in got["rules"]["groups"]}
    assert sorted(groups) == sorted(g["name"] for g in generated_groups(repo) if not has_alert(g))
    assert "servewatch-vllm-request-lengths" in groups
    assert [r["record"] for r in groups["servewatch-vllm-request-lengths"]["rules"]] == [
        "model:vllm_request_prompt_tokens_bucket:rate5m",
        "model:vllm_request_generation_tokens_bucket:rate5m",
    ]
    assert all(has_alert(g) for g in got["alerts"]["groups"])
    assert sorted(g["name"] for g in got["alerts"]["groups"] + got["rules"]["groups"]) == sorted(
        g["name"] for g in generated_groups(repo)
    )


def test_the_mixin_adds_to_other_mixins(tmp_path, repo):
    """Mixins are combined with `+`; servewatch's fields extend what came before, never replace it."""
    other = """
local other = {
  prometheusAlerts+:: { groups+: [{ name: 'theirs', rules: [] }] },
  grafanaDashboards+:: { 'theirs.json': { title: 'theirs' } },
};
local both = other + (import 'servewatch/mixin.libsonnet');
{ alerts: both.prometheusAlerts.groups, dashboards: std.objectFields(both.grafanaDashboards) }
"""
    got = evaluate(tmp_path, repo, other)
    assert got["alerts"][0]["name"] == "theirs" and len(got["alerts"]) > 1
    assert "theirs.json" in got["dashboards"] and "vllm-serving.json" in got["dashboards"]
