"""Synthetic, deterministic vLLM + dcgm-exporter time series for integration tests.

Build series with the builders (``dcgm_gpu``, ``vllm_engine``, ``up``), or take a ready scenario
(``fleet()``, ``INCIDENTS``); write them with ``to_openmetrics(series, start, step)`` and backfill
them into a real Prometheus (``servewatch_testkit.localprom.LocalPrometheus``). ``truth`` answers the
queries tests ask (instant values, ``rate``, ``histogram_quantile``) the way Prometheus 3.5 does.

No wall clock and no unseeded randomness anywhere: same arguments, same bytes.
"""

from . import truth
from .dcgm import as_profile, dcgm_gpu, dcgm_target, field_names
from .histogram import (
    ITER_BUCKETS,
    ITL_BUCKETS,
    REQ_BUCKETS,
    TTFT_BUCKETS,
    expected_histogram_quantile,
    histogram_series,
    token_buckets,
)
from .openmetrics import prom_float, sample_count, to_openmetrics
from .scenario import Scenario
from .scrape import Target, stable_ip, stable_suffix, stable_uuid, up
from .series import Series, drop_metrics, ramp, rename_metric, resolve, step_fn, with_labels
from .vllm import CHAT_MIX, RequestProfile, SpecDecode, vllm_engine, vllm_target
from .fleet import fleet
from .incidents import INCIDENTS, incident

__all__ = [
    "Series",
    "resolve",
    "ramp",
    "step_fn",
    "drop_metrics",
    "rename_metric",
    "with_labels",
    "Target",
    "up",
    "stable_ip",
    "stable_suffix",
    "stable_uuid",
    "dcgm_gpu",
    "dcgm_target",
    "as_profile",
    "field_names",
    "vllm_engine",
    "vllm_target",
    "RequestProfile",
    "SpecDecode",
    "CHAT_MIX",
    "TTFT_BUCKETS",
    "ITL_BUCKETS",
    "REQ_BUCKETS",
    "ITER_BUCKETS",
    "token_buckets",
    "histogram_series",
    "expected_histogram_quantile",
    "to_openmetrics",
    "prom_float",
    "sample_count",
    "Scenario",
    "fleet",
    "INCIDENTS",
    "incident",
    "truth",
]
