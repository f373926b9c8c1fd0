"""Test support for servewatch, kept out of the installed package.

synth/        deterministic vLLM and dcgm-exporter series, incidents and their ground truth
servers.py    the shared part of every local server: a temp dir, a free port, readiness, teardown
localprom.py  a real Prometheus 3.5 on 127.0.0.1 with backfilled data, for integration tests
alertmanager.py, victoriametrics.py   a real Alertmanager / VictoriaMetrics the same way
rule_reads.py only the series some rule reads, for a test server that evaluates rules alone
promtool_alerts.py  Prometheus's own alert states on synthetic series (promtool test rules)
baseline_alerts.py  the alerts whose inputs a scenario changes from a baseline's: only those need a run

The tests and the benchmarks import it with `generator/` on the path (pytest's `pythonpath`).
"""
