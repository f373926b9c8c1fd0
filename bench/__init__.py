"""servewatch's benchmarks (not part of `make test`; see bench/README.md).

fleet.py            `make bench-fleet`: rules and dashboards on a synthetic fleet in Prometheus 3.5
native.py           `make bench-native`: the same, classic vs native histograms, on a scraped replay
native_report.py    its results JSON -> Markdown tables, one rule set against the other
generation_cost.py  `servewatch generate` time, default specs and N deployments
rule_cost.py        one evaluation of every rule group, rule by rule
dashboard_cost.py   a dashboard refresh: variables, then every panel's queries
grafana.py          what Grafana sends: panels, targets, variables and macros filled in
anchors.py          vLLM's and NVIDIA's dashboards rebuilt by hand; the quantities both show
promstats.py        Prometheus' query statistics (samples touched, eval time), medians
report.py           results JSON -> Markdown tables and a PNG chart
machine.py          CPU, cores, RAM, OS, versions, load
"""
