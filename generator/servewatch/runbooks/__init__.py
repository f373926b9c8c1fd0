"""Runbooks: per-alert prose and investigation steps from the specs, resolved into PromQL built by
the same builders as the alerts. Rendered to Markdown by render/runbooks.py and executed by
`servewatch investigate`. The `runbooks:` schema is spec/runbooks.py; its checks are in
validation/runbook_checks.py."""
