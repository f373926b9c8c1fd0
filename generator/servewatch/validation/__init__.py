"""The validation stage: generation is load -> validate -> plan -> render.

  load      spec/loader.py      read every spec file, validate it against the schemas in spec/, merge
  validate  this package        check the whole model and the plans the checks concern
  plan      plan/               design what the renderers format (made once per model)
  render    render/             format what was validated and planned

What the schemas cannot see is found here, before anything is rendered, each problem with its file,
line and field:

  spec_checks.py      signals, alerts, scenarios, overrides and dashboard uids against each other
  slo_checks.py       SLOs against the catalog (latency thresholds are bucket bounds) and the config
  runbook_checks.py   each runbook against its alert, the signals, the catalog and its own steps
  dashboard_links.py  alert, runbook and dashboard links against the dashboards as planned
  selector_checks.py  config.selectors against the label values of the generated tests as designed

The dashboards are planned here (their links can only be checked on the boards) and handed to the
renderer, so they are built once; the generated tests are designed here through plan/ and kept on
the model for their renderers. The renderers check nothing, with one exception only rendering can
know: a dashboard ConfigMap over Kubernetes' 1 MiB object limit (render/dashboards.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecErrors
from ..model import Model
from ..plan import dashboards
from ..spec.loader import Spec
from .dashboard_links import alert_link_problems, check_board_links, runbook_link_problems
from .memory_checks import memory_problems
from .runbook_checks import runbook_problems
from .selector_checks import selector_problems
from .slo_checks import slo_problems
from .spec_checks import spec_problems


@dataclass(frozen=True)
class Validated:
    """A model that passed every check, with the dashboards built for it."""

    model: Model
    dashboards: dict[str, dict]  # name -> classic dashboard JSON data
    links: int  # links checked: alert -> dashboard, runbook -> dashboard, dashboard -> dashboard


def validate(spec: Spec) -> Validated:
    """Check `spec` as a whole; raise SpecErrors with every problem found (ServewatchError for a
    broken link between dashboards, which servewatch builds itself)."""
    model = Model(spec)
    problems = spec_problems(spec) + slo_problems(spec)
    if problems:  # the runbooks refer to signals and alerts: check them against a sound spec only
        raise SpecErrors(problems)
    problems = memory_problems(model) + runbook_problems(model)
    if problems:
        raise SpecErrors(problems)
    boards, views = dashboards.build_with_views(model)
    # alerts link to the panel that shows them, which only the dashboards as built can tell
    final = model.with_dashboard_panels(views)
    final.planned(dashboards.PLAN, lambda _: boards)  # the boards as checked are the ones rendered
    # the selector check builds the generated tests: on the final model, whose renderers reuse them
    problems = selector_problems(final)
    links = 0
    for link_problems in (alert_link_problems, runbook_link_problems):
        found, checked = link_problems(model, boards)
        problems += found
        links += checked
    if problems:
        raise SpecErrors(problems)
    links += check_board_links(model, boards)
    return Validated(final, boards, links)
