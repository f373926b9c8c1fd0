"""PromQL: builders that make expressions, and the helpers that read them back (tree.py walks
promql-parser's AST, variables.py substitutes Grafana variables, labels.py the labels a result carries).
The core below the linter; nothing here imports lint/ (tests/test_layering.py)."""
