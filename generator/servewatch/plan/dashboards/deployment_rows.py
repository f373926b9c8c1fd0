"""Rows that exist only where config.role or config.track is set (docs/disaggregated.md): the
serving board's tracks side by side, the MoE board's prefill and decode pools side by side. Each
row reads the same recording rules as the alerts, keyed by role and track."""

from __future__ import annotations

from ... import grafana
from .panels import above, filling, timeseries

CANARY_RATIOS = (  # the track_ratio signal, what it compares
    ("model_ttft_track_ratio", "time to first token"),
    ("model_itl_track_ratio", "inter-token latency"),
)


def p95_per_model(board, selection, signal: str, title: str, description: str) -> None:
    """A quantile signal's p95 per model identity (role and track included), with its alert's line."""
    board.add(
        timeseries(
            title,
            grafana.Target(selection.signal(signal, 0.95), board.ctx.model_legend()),
            unit="s",
            w=8,
            steps=above(board.ctx.threshold(signal, 0.95)),
            description=description,
        )
    )


def tracks_side_by_side(board, selection) -> None:
    """p95 latency of each track next to the stable one, and the canary alerts' own ratios."""
    ctx, track = board.ctx, board.ctx.model.config.track
    board.row(f"Tracks side by side: every track against {track.stable} ({track.label})")
    for signal, title in (("model_ttft", "Time to first token"), ("model_itl", "Inter-token latency")):
        description = (
            f"p95 {title.lower()} of each track of the selected models, side by side: the canary's line "
            f"apart from {track.stable}'s is what the canary alerts compare."
        )
        p95_per_model(board, selection, signal, f"{title} p95 by track", description)
    board.add(
        timeseries(
            "Canary over stable (p95)",
            *(
                grafana.Target(selection.signal(signal), ctx.model_legend(what))
                for signal, what in CANARY_RATIOS
            ),
            unit="short",
            w=8,
            steps=above(ctx.threshold(CANARY_RATIOS[0][0])),
            description=f"Each track's p95 over {track.stable}'s: 1 is as fast. Above the line for the "
            "alert's `for`, with traffic, the canary alerts fire.",
        ),
        alert_view=[a for signal, _ in CANARY_RATIOS for a in ctx.alerts_of(signal)],
    )


def pools_side_by_side(board, selection) -> None:
    """Prefill and decode, each with what it is watched by: TTFT on both, queue on prefill, KV cache,
    deferred requests and inter-token latency on decode."""
    ctx, role = board.ctx, board.ctx.model.config.role
    engine = f"{{{{{role.label}}}}} {ctx.engine_legend()}"
    board.row(f"Prefill and decode pools side by side ({role.label})")
    ttft = (
        "Each role's own view: prefill = queue + prefill; decode = from the hand-off, the KV transfer wait "
        "included. The client waits for about their sum."
    )
    p95_per_model(board, selection, "model_ttft", "Time to first token p95 per role", ttft)
    itl = "Decode engines only: a prefill engine makes one token per request."
    p95_per_model(board, selection, "model_itl", "Inter-token latency p95 (decode)", itl)
    board.add(
        timeseries(
            "Queue (prefill) and deferred (decode) per engine",
            grafana.Target(selection.signal("engine_requests_waiting"), f"{engine} waiting"),
            grafana.Target(selection.signal("engine_requests_deferred"), f"{engine} deferred"),
            w=8,
            description="Requests waiting on each prefill engine, and requests each decode engine holds "
            "until their KV cache arrives by transfer. Deferred growing while prefill queues stay flat: "
            "the transfer is slow.",
        ),
        alert_view=ctx.alerts_of("engine_requests_deferred"),
    )
    board.add(
        timeseries(
            "KV cache usage per decode engine",
            grafana.Target(selection.signal("engine_kv_cache_usage"), engine),
            unit="percentunit",
            min=0,
            max=1,
            steps=filling(ctx.threshold("engine_kv_cache_usage")),
            w=24,
            description="The decode engines hold every running request's KV blocks: the fullest preempts "
            "first. (KV transfer time and failures come from the NIXL connector's metrics.)",
        )
    )
