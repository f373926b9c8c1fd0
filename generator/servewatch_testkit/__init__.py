"""Test support for servewatch, kept out of the installed package.

synth/        deterministic vLLM and dcgm-exporter series, incidents and their ground truth
localprom.py  a real Prometheus 3.5 on 127.0.0.1 with backfilled data, for integration tests

The tests and the benchmarks import it with `generator/` on the path (pytest's `pythonpath`).
"""
