"""`servewatch detect`: ask a live Prometheus which exporter layout it holds and suggest a `config:`
block.

probes.py asks (one function per question, listed in PROBES), runner.py folds the answers into a
Detection, report.py prints it, cli.py is the command line. Every exporter name comes from the
catalog's exporter profiles (catalog/dcgm.yaml, catalog/vllm.yaml).
"""

from .cli import add_cli

_LAZY = {"PROBES": "probes", "DetectFinding": "probes", "Detection": "runner", "detect": "runner"}


def __getattr__(name: str):
    """The probes and the runner load when first asked for: building the command line needs cli.py only."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{_LAZY[name]}", __name__), name)


__all__ = ["PROBES", "Detection", "DetectFinding", "add_cli", "detect"]
