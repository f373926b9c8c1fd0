"""`servewatch calibrate`: from a load test's results to the thresholds and `for` of the alerts.

measures   what a load test measures, named once (ttft_p95, errors, ...) and the vLLM histograms behind them
targets    the team's targets (--target or the objectives of specs/slos.yaml)
bench      `vllm bench serve --save-result` files -> load steps
history    the same run in a Prometheus -> load steps, with each alert's own signal over time
proposal   one proposal: a number with its evidence and rule, or why the data cannot give one
propose    the sustainable step, and per alert a threshold and a `for` with their evidence
slo_proposals  per SLO: a latency threshold (a bucket bound), whether each objective holds and can be shown
overrides  the proposals applied to specs/overrides.yaml (comments kept), checked before writing
slo_file   the SLO thresholds applied to the file defining each SLO (specs/slos.yaml), comments kept
report     the table
cli, run   the command line, and the run it starts
"""
