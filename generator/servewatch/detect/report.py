"""A Detection as text for a terminal (findings, then the suggested block with `# was:` marks), or
as YAML / JSON for tools (the same data: matches, not_found, differences, findings, counts, config)."""

from __future__ import annotations

import json
import re

import yaml

from .runner import EXIT_DIFFERS, EXIT_NOTHING_FOUND, SOURCES, Detection, finding_order, sorted_dict

SOURCE_NAMES = {"dcgm": "dcgm-exporter", "vllm": "vLLM"}


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
    if len(det.not_found) < len(SOURCES):  # with nothing seen the "suggestion" is the config itself
        lines += ["", "Suggested config (merge into specs/config.yaml):", "", yaml_block(det).rstrip("\n")]
    lines.append("")
    lines.append(verdict(det))
    return "\n".join(lines) + "\n"


def verdict(det: Detection) -> str:
    """The last line: a match only when every source was seen and no setting differs."""
    n = len(det.differences)
    unseen = [SOURCE_NAMES[s] for s in det.not_found]
    seen = [SOURCE_NAMES[s] for s in SOURCES if s not in det.not_found]
    if n:
        text = f"{n} setting(s) differ from the current config (exit {EXIT_DIFFERS})."
        return text + (f" No {' or '.join(unseen)} series were found." if unseen else "")
    if not seen:
        return (
            f"Nothing was detected: no {' and no '.join(unseen)} series matched the selectors at that "
            f"time, so the config was not checked (exit {EXIT_NOTHING_FOUND})."
        )
    if unseen:
        return (
            f"Nothing was detected for {' or '.join(unseen)}: its settings were not checked "
            f"(exit {EXIT_NOTHING_FOUND}); the {' and '.join(seen)} settings match what was detected."
        )
    return "The current config matches what was detected."


def to_yaml(det: Detection) -> str:
    return yaml.safe_dump(det.as_dict(), sort_keys=False, default_flow_style=False, width=200)


def to_json(det: Detection) -> str:
    return json.dumps(det.as_dict(), indent=2) + "\n"


FORMATS = {"text": to_text, "yaml": to_yaml, "json": to_json}
