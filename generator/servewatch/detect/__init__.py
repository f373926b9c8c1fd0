"""`servewatch detect`: ask a live Prometheus which exporter layout it holds and suggest a `config:`
block.

probes.py asks (one function per question, listed in PROBES), runner.py folds the answers into a
Detection, report.py prints it, cli.py is the command line. Every exporter name comes from the
catalog's exporter profiles (catalog/dcgm.yaml, catalog/vllm.yaml).
"""

from .cli import add_cli
from .probes import PROBES, DetectFinding
from .runner import Detection, detect

__all__ = ["PROBES", "Detection", "DetectFinding", "add_cli", "detect"]
