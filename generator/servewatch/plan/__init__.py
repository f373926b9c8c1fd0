"""The plan stage: what is designed from the model before anything is formatted.

  load + validate -> model -> plan -> render

A renderer formats what is planned here and decides nothing; a plan that cannot be made from a spec
is a spec error found by the validation stage (servewatch/validation/), which builds the plans it
checks through this package, never through render/.

  conform.py        label values of generated test series that config.selectors accepts
  synthetic.py      synthetic input series whose recorded values are known exactly (the rule tests')
  traffic_guard.py  the boundary tests of an alert's min_traffic guard
  slo_engines.py    the synthetic engines of an SLO's tests, moved into its scope
"""
