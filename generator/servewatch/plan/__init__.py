"""The plan stage: what is designed from the model before anything is formatted.

  load + validate -> model -> plan -> render

A renderer formats what is planned here and decides nothing; a plan that a spec cannot give is a
spec error raised here or by the validation stage (servewatch/validation/), which builds the plans
it checks through this package, never through render/. Each plan is made once per model
(Model.planned); the SLO proofs, most of a build, are also kept on disk by the specs' content.

  dashboards/        every board's panels, queries, ids and links (render/dashboards.py delivers them)
  scenario_tests.py  the spec's scenarios as promtool tests, adapted to the tuning and config.selectors
  rule_tests.py      the boundary and record tests derived from the rules themselves
  conform.py         label values of generated test series that config.selectors accepts
  synthetic.py       synthetic input series whose recorded values are known exactly (the rule tests')
  traffic_guard.py   the boundary tests of an alert's min_traffic guard
  slo_proofs.py      the SLO tests: the proofs, their claims, kept on disk (diskcache.py)
  slo_engines.py     the synthetic engines of an SLO's tests, moved into its scope
  kept.py            plans kept on disk under everything their model holds (diskcache.py)
"""
