"""`servewatch investigate`: run an alert's runbook steps against a live Prometheus and judge them."""
