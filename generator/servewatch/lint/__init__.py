"""`servewatch lint`: rules, dashboards and PromQL checked against the vLLM and DCGM catalogs.

checks/      one module per check behind one interface (checks/__init__.py), documented in docs/lint.md
inputs/      files -> rules and dashboards, recognised by content, with lines and JSON paths
subjects.py  what checks read: Query, Rule, LintDashboard
facts.py     the catalogs, recording rules and series identity;  flow.py  labels;  units.py  units
references.py where a dashboard uses Grafana variables (found and substituted by promql/variables.py)
runner.py    checks over inputs, suppressions;  settings.py  .servewatch-lint.yaml
report.py    text / json / junit / github;  cli.py  the command and its exit codes
engine.py    one expression in, problems out (for code that holds a string)
"""
