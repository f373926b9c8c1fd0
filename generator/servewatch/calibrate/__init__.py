"""`servewatch calibrate`: from a load test's results to the thresholds and `for` of the alerts.

measures   what a load test measures, named once (ttft_p95, errors, ...) and the vLLM histograms behind them
targets    the team's targets (--target or the objectives of specs/slos.yaml)
bench      `vllm bench serve --save-result` files -> load steps
history    the same run in a Prometheus -> load steps, with each alert's own signal over time
propose    the sustainable step, and per alert and SLO a threshold and a `for` with their evidence
overrides  the proposals applied to specs/overrides.yaml (comments kept), checked before writing
report     the table
cli, run   the command line, and the run it starts
"""
