"""Mutation testing of the generated rules: do the tests notice when a rule is broken?

tree.py       PromQL as an immutable tree (from promql-parser) that prints back to PromQL
operators.py  the mutation operators: one rule in, the one-bug changes out
siblings.py   the wrong metric a rule could read instead (catalog and recorded-name siblings)
rules.py      the rule files as a list of rules with stable keys
mutants.py    every operator on every rule: mutants with stable ids and one-line descriptions
workspace.py  a throwaway copy of rules/ and the promtool tests with a rule changed
build.py      --specs DIR: another specs folder's rules and tests, generated to stand in for the checkout's
runner.py     promtool check + promtool test (+ the incident tests) per mutant, in parallel
report.py     bench/mutation/REPORT.md and report.json, with the human notes on survivors
cli.py        `python -m servewatch_testkit.mutate` (`make mutate`)
"""
