"""`servewatch lint`: PromQL checks against the vLLM and DCGM catalogs.

engine.py   the checks (rule in -> problems out) and the walk over promql-parser's AST
cli.py      reading rule files and expressions, printing findings, exit codes
"""
