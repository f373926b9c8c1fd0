"""The generated kustomizations, built with the real kustomize: what it emits is the generated files."""

import shutil

import pytest
import yaml

from servewatch import tools

pytestmark = pytest.mark.tools("kustomize")


def build(folder) -> list[dict]:
    res = tools.run("kustomize", "build", str(folder))
    assert res.returncode == 0, res.stderr
    return list(yaml.safe_load_all(res.stdout))


def key(obj: dict) -> tuple:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def objects(paths) -> list[dict]:
    return sorted((yaml.safe_load(p.read_text()) for p in paths), key=key)


@pytest.fixture
def out(tmp_path, repo):
    """A copy of the committed Kubernetes outputs, as a user's repository holds them."""
    for folder in ("rules/kubernetes", "dashboards/kubernetes"):
        shutil.copytree(repo / folder, tmp_path / "out" / folder)
    return tmp_path / "out"


def test_rules_kustomization_is_the_prometheus_rules(out):
    made = objects(sorted((out / "rules/kubernetes").glob("*.prometheusrule.yaml")))
    assert len(made) >= 2
    assert sorted(build(out / "rules/kubernetes"), key=key) == made


def test_dashboards_kustomization_holds_both_forms(out):
    folder = out / "dashboards/kubernetes"
    made = objects(sorted(folder.glob("*.configmap.yaml")) + sorted(folder.glob("*.grafanadashboard.yaml")))
    assert {o["kind"] for o in made} == {"ConfigMap", "GrafanaDashboard"}
    assert sorted(build(folder), key=key) == made


MINE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: team-settings, namespace: monitoring, labels: {app.kubernetes.io/part-of: servewatch}}
data: {a: b}
"""


@pytest.mark.parametrize(
    "component, kept", [("sidecar", "configmap"), ("grafana-operator", "grafanadashboard")]
)
def test_an_overlay_picks_one_dashboard_form_and_keeps_its_own_objects(out, component, kept):
    """The overlay a user writes: rules, dashboards and one component. The component removes the other
    form only; the user's own ConfigMap (with one of servewatch's labels, even) stays."""
    overlay = out.parent / "overlay"
    overlay.mkdir()
    (overlay / "mine.yaml").write_text(MINE)
    (overlay / "kustomization.yaml").write_text(
        "resources: [../out/rules/kubernetes, ../out/dashboards/kubernetes, mine.yaml]\n"
        f"components: [../out/dashboards/kubernetes/{component}]\n"
    )
    expected = objects(
        sorted((out / "rules/kubernetes").glob("*.prometheusrule.yaml"))
        + sorted((out / "dashboards/kubernetes").glob(f"*.{kept}.yaml"))
        + [overlay / "mine.yaml"]
    )
    assert len(expected) >= 6
    assert sorted(build(overlay), key=key) == expected
