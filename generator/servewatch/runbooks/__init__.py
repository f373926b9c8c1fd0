"""Runbooks: per-alert prose and investigation steps from the specs, resolved into PromQL built by
the same builders as the alerts. Rendered to Markdown by render/runbooks.py and executed by
`servewatch investigate`."""

from .book import Page, PageStep, pages, validate  # noqa: F401
