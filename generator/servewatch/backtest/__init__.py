"""`servewatch backtest`: every generated alert evaluated over a stretch of a Prometheus's history.

rules.py     the generated rule files as alerting and recording rules (for, keep_firing_for, interval)
inline.py    an alert's expression with the records the history lacks written out in place
evaluate.py  the expression on the group's grid: range queries in bounded chunks, refusals as advice
state.py     Prometheus's pending / firing / resolved machine over those evaluations -> episodes
incidents.py the expected incidents of --incidents and whether each was caught
report.py    text and JSON; html.py the self-contained HTML report with one SVG plot per alert
runner.py    the whole run for one spec set; cli.py the command line
"""
