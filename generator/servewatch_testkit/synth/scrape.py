"""Scrape targets: the labels Prometheus attaches at scrape time, and the ``up`` series.

Identifiers are derived from names with a hash, never from randomness, so the same scenario
always has the same pod IPs, UUIDs and exporter pod names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping

from .series import Series, Values, resolve


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def stable_ip(*parts: str, prefix: str = "10.42") -> str:
    """A deterministic private IPv4 address for a pod or node name."""
    d = _digest("ip", *parts)
    return f"{prefix}.{d[0]}.{1 + d[1] % 254}"


def stable_suffix(*parts: str, length: int = 5) -> str:
    """A deterministic Kubernetes-style random suffix (``x2k4p``)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated names
    d = _digest("suffix", *parts)
    return "".join(alphabet[b % len(alphabet)] for b in d[:length])


def stable_uuid(*parts: str) -> str:
    """A deterministic NVIDIA-style GPU UUID (``GPU-xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx``)."""
    h = _digest("uuid", *parts).hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


@dataclass(frozen=True)
class Target:
    """A scrape target's labels: ``job``, ``instance`` and (Kubernetes SD) ``namespace/pod/container``."""

    job: str
    instance: str
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        out = {"job": self.job, "instance": self.instance}
        for k in ("namespace", "pod", "container"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        out.update(self.extra)
        return out


def up(
    target: Target, values: Values, *, steps: int, extra_labels: Mapping[str, str] | None = None
) -> Series:
    """``up`` for one target: 1 scraped, 0 failed, None not discovered at that step."""
    return Series("up", {**target.labels(), **(extra_labels or {})}, resolve(values, steps))


__all__ = ["Target", "up", "stable_ip", "stable_suffix", "stable_uuid"]
