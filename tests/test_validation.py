"""The validation stage: generation is load -> validate -> render, each thing is built once, and
`servewatch check` validates everything (dashboards, runbooks and the links between them too)
without rendering or writing a file."""

from __future__ import annotations

import re

from servewatch import generate
from servewatch.plan import dashboards
from servewatch.spec.dashboards import BOARDS
from servewatch.spec.loader import load


def test_generation_builds_each_dashboard_once(repo, monkeypatch):
    calls = {cls.name: 0 for cls in dashboards.BUILDERS}
    for cls in dashboards.BUILDERS:

        def counted(self, build=cls.build):
            calls[self.name] += 1
            return build(self)

        monkeypatch.setattr(cls, "build", counted)
    _, files = generate.build(repo / "specs")
    assert calls == {name: 1 for name in BOARDS}
    assert {f"dashboards/{name}.json" for name in BOARDS} <= set(files)


def _empty_dir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_check_says_what_it_checked_and_writes_nothing(repo, tmp_path, servewatch):
    work = _empty_dir(tmp_path)
    res = servewatch("check", "--specs", repo / "specs", cwd=work)  # --out defaults to the cwd
    assert res.returncode == 0, res.stderr
    assert not any(work.iterdir())

    spec = load(repo / "specs")
    alerts = [a for g in spec.groups if spec.group_enabled(g) for a in g.alerts]  # as generated
    m = re.search(
        r"(\d+) alerts, \d+ recording rules, (\d+) scenarios, (\d+) dashboards, (\d+) runbooks "
        r"\((\d+) steps\), (\d+) links between alerts, dashboards and runbooks",
        res.stdout,
    )
    assert m, res.stdout
    burn_rows = sum(len(slo.alerting.windows) for slo in spec.slos.values())  # one rule per SLO row
    assert int(m.group(1)) == len(alerts) + burn_rows
    assert int(m.group(2)) == len(spec.scenarios)
    assert int(m.group(3)) == len(BOARDS)
    assert int(m.group(4)) == len(spec.runbooks)
    assert int(m.group(5)) == sum(len(rb.steps) for rb in spec.runbooks.values())
    # at least every alert's and every runbook's dashboard link, besides the dashboards' own
    least = sum(1 for a in alerts if a.dashboard) + sum(len(rb.dashboards) for rb in spec.runbooks.values())
    assert int(m.group(6)) > least


def test_check_reports_dashboards_and_runbooks_problems_without_writing(
    specs_with, line_of, tmp_path, servewatch
):
    bad_refresh = ("refresh: 30s", "refresh: soon")
    # a runbook link to a dashboard variable that does not exist: found only on the dashboards as built
    bad_link = (
        "vars: {host: host, uuid: UUID}}\n    steps:\n      - &s_exporter_up",
        "vars: {host: host, uuid: UUID, nmspace: namespace}}\n    steps:\n      - &s_exporter_up",
    )
    specs = specs_with({"dashboards.yaml": [bad_refresh], "runbooks.yaml": [bad_link]})
    dash_line = line_of(specs / "dashboards.yaml", bad_refresh[1])
    rb_line = line_of(specs / "runbooks.yaml", bad_link[1])
    work = _empty_dir(tmp_path)
    res = servewatch("check", "--specs", specs, cwd=work)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"dashboards.yaml:{dash_line}: dashboards.defaults.refresh: " in res.stderr, res.stderr
    assert not any(work.iterdir())

    # with the settings fixed, the link between a runbook and a dashboard is checked too
    res = servewatch("check", "--specs", specs_with({"runbooks.yaml": [bad_link]}), cwd=work)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        f"runbooks.yaml:{rb_line}: runbooks.GPUFramebufferMetricsMissing.dashboards[0].vars.nmspace: "
        "dashboard 'servewatch-gpu-fleet' has no variable 'nmspace'"
    ) in res.stderr, res.stderr
    assert not any(work.iterdir())
