"""The dashboards servewatch is compared with, rebuilt by hand as Grafana dashboard JSON, and the
quantities both sides show.

vLLM's example dashboard (``examples/observability/prometheus_grafana/grafana.json``): 12 panels,
27 queries, one single-select variable ``model_name`` (no All), read from
``/work/shared/reference/vllm-metrics.md`` section 6.1. NVIDIA's dcgm-exporter dashboard
(grafana.com 12239): 8 panels, variables ``instance`` and ``gpu`` (multi-value with All, no
allValue, so All is the alternation of every value), read from ``/work/shared/reference/dcgm.md``
section 3. Panel titles are ours where the reference gives none; queries are as the reference
states them (legacy gauge panels query a range, like a graph).
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_EXAMPLE = "anchor-vllm-example"
DCGM_EXPORTER = "anchor-dcgm-exporter"
SERVING, FLEET, MOE = "servewatch-vllm-serving", "servewatch-gpu-fleet", "servewatch-moe-deployment"

_M = '{model_name="$model_name"}'
_W = "[$__rate_interval]"
_DCGM = '{instance=~"$instance", gpu=~"$gpu"}'


def _latency(h: str) -> list[str]:
    """Four quantiles over all engines and pods, and the unaggregated average (one line each)."""
    quantiles = [
        f"histogram_quantile({q}, sum by(le) (rate({h}_bucket{_M}{_W})))" for q in (0.99, 0.95, 0.9, 0.5)
    ]
    return quantiles + [f"rate({h}_sum{_M}{_W}) / rate({h}_count{_M}{_W})"]


def _dashboard(uid: str, title: str, variables: list[dict], panels: dict[str, list[str]]) -> dict:
    return {
        "uid": uid,
        "title": title,
        "templating": {"list": variables},
        "panels": [
            {"type": "timeseries", "title": name, "targets": [{"expr": e, "range": True} for e in exprs]}
            for name, exprs in panels.items()
        ],
    }


def vllm_example() -> dict:
    """vLLM's example dashboard (vllm-metrics.md section 6.1)."""
    variable = {
        "name": "model_name",
        "type": "query",
        "query": "label_values(model_name)",
        "multi": False,
        "includeAll": False,
        "current": {},
    }
    return _dashboard(
        VLLM_EXAMPLE,
        "vLLM (vLLM's example dashboard)",
        [variable],
        {
            "E2E request latency": _latency("vllm:e2e_request_latency_seconds"),
            "Token throughput": [
                f"rate(vllm:prompt_tokens_total{_M}{_W})",
                f"rate(vllm:generation_tokens_total{_M}{_W})",
            ],
            "Inter-token latency": _latency("vllm:inter_token_latency_seconds"),
            "Scheduler state": [f"vllm:num_requests_running{_M}", f"vllm:num_requests_waiting{_M}"],
            "Time to first token latency": _latency("vllm:time_to_first_token_seconds"),
            "Cache utilization": [f"vllm:kv_cache_usage_perc{_M}"],
            "Request prompt length": [f"sum by(le) (increase(vllm:request_prompt_tokens_bucket{_M}{_W}))"],
            "Request generation length": [
                f"sum by(le) (increase(vllm:request_generation_tokens_bucket{_M}{_W}))"
            ],
            "Finish reason": [f"sum by(finished_reason) (increase(vllm:request_success_total{_M}{_W}))"],
            "Queue time": [f"rate(vllm:request_queue_time_seconds_sum{_M}{_W})"],
            "Requests prefill and decode time": [
                f"rate(vllm:request_prefill_time_seconds_sum{_M}{_W})",
                f"rate(vllm:request_decode_time_seconds_sum{_M}{_W})",
            ],
            "Max generation token in sequence group": [
                f"rate(vllm:request_max_num_generation_tokens_sum{_M}{_W})"
            ],
        },
    )


def dcgm_exporter() -> dict:
    """NVIDIA's dcgm-exporter dashboard (dcgm.md section 3)."""
    variables = [
        {
            "name": name,
            "type": "query",
            "query": f"label_values(DCGM_FI_DEV_GPU_TEMP, {name})",
            "multi": True,
            "includeAll": True,
            "current": {"value": ["$__all"]},
        }
        for name in ("instance", "gpu")
    ]
    return _dashboard(
        DCGM_EXPORTER,
        "NVIDIA DCGM Exporter Dashboard",
        variables,
        {
            "GPU Temperature": [f"DCGM_FI_DEV_GPU_TEMP{_DCGM}"],
            "GPU Avg. Temp": [f"avg(DCGM_FI_DEV_GPU_TEMP{_DCGM})"],
            "GPU Power Usage": [f"DCGM_FI_DEV_POWER_USAGE{_DCGM}"],
            "GPU Power Total": [f"sum(DCGM_FI_DEV_POWER_USAGE{_DCGM})"],
            "GPU SM Clocks": [f"DCGM_FI_DEV_SM_CLOCK{_DCGM} * 1000000"],
            "GPU Utilization": [f"DCGM_FI_DEV_GPU_UTIL{_DCGM}"],
            "GPU Framebuffer Mem Used": [f"DCGM_FI_DEV_FB_USED{_DCGM}"],
            "Tensor Core Utilization": [f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{_DCGM}"],
        },
    )


@dataclass(frozen=True)
class Quantity:
    """One thing both an anchor dashboard and servewatch show: (dashboard uid, panel title) pairs."""

    name: str
    kind: str  # histogram | counter | gauge: what the target asks of it
    anchor: tuple[str, str]
    servewatch: tuple[tuple[str, str], ...]


def _quantity(
    name: str, kind: str, anchor_panel: str, *servewatch: tuple[str, str], anchor: str = VLLM_EXAMPLE
) -> Quantity:
    return Quantity(name, kind, (anchor, anchor_panel), servewatch)


# quantity, what kind of series it is, the anchor's panel, servewatch's panel(s) showing the same
QUANTITIES = (
    _quantity(
        "TTFT percentiles", "histogram", "Time to first token latency", (SERVING, "Time to first token")
    ),
    _quantity("ITL percentiles", "histogram", "Inter-token latency", (SERVING, "Inter-token latency")),
    _quantity("E2E latency percentiles", "histogram", "E2E request latency", (SERVING, "End-to-end latency")),
    _quantity("Prompt length", "histogram", "Request prompt length", (SERVING, "Prompt length: $model")),
    _quantity(
        "Generation length", "histogram", "Request generation length", (SERVING, "Generation length: $model")
    ),
    _quantity("Token rates", "counter", "Token throughput", (SERVING, "Token throughput")),
    _quantity("Finished reasons", "counter", "Finish reason", (SERVING, "Finished requests by reason")),
    _quantity("Running / waiting", "gauge", "Scheduler state", (SERVING, "Running and waiting requests")),
    _quantity("KV cache usage", "gauge", "Cache utilization", (SERVING, "KV cache usage per engine")),
    _quantity(
        "Framebuffer used",
        "gauge",
        "GPU Framebuffer Mem Used",
        (MOE, "Framebuffer used per GPU"),
        (FLEET, "Framebuffer used per GPU / MIG instance"),
        anchor=DCGM_EXPORTER,
    ),
)

__all__ = ["QUANTITIES", "Quantity", "vllm_example", "dcgm_exporter", "VLLM_EXAMPLE", "DCGM_EXPORTER"]
