"""A Detection as text for a terminal (findings, then the suggested block with `# was:` marks), or
as YAML / JSON for tools (the same data: matches, differences, findings, counts, config)."""

from __future__ import annotations

import json
import re

import yaml

from .runner import EXIT_DIFFERS, Detection, finding_order, sorted_dict


def yaml_block(det: Detection) -> str:
    """The suggested `config:` block, with `# was:` on the lines that differ."""
    text = yaml.safe_dump(
        {"config": sorted_dict(det.suggested)}, sort_keys=True, default_flow_style=False, width=200
    )
    diffs = {d["field"]: d["current"] for d in det.differences}
    out, path = [], []
    for line in text.splitlines():
        m = re.match(r"^( *)([A-Za-z_]+):(.*)$", line)
        if m:
            depth = len(m.group(1)) // 2
            path = path[:depth] + [m.group(2)]
            key = ".".join(path[1:])
            if key in diffs:
                line += f"  # was: {json.dumps(diffs[key])}"
        out.append(line)
    return "\n".join(out) + "\n"


def to_text(det: Detection) -> str:
    lines = [
        f"servewatch detect: {det.prometheus}" + (f" at {det.at:.3f}" if det.at is not None else " (now)"),
        "",
    ]
    for f in sorted(det.findings, key=finding_order):
        lines.append(f"[{f.level}] {f.topic}: {f.message}")
    lines += ["", "Suggested config (merge into specs/config.yaml):", "", yaml_block(det).rstrip("\n"), ""]
    n = len(det.differences)
    lines.append(
        "The current config matches what was detected."
        if not n
        else f"{n} setting(s) differ from the current config (exit {EXIT_DIFFERS})."
    )
    return "\n".join(lines) + "\n"


def to_yaml(det: Detection) -> str:
    return yaml.safe_dump(det.as_dict(), sort_keys=False, default_flow_style=False, width=200)


def to_json(det: Detection) -> str:
    return json.dumps(det.as_dict(), indent=2) + "\n"


FORMATS = {"text": to_text, "yaml": to_yaml, "json": to_json}
