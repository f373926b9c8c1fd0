"""Findings as text (default), JSON, JUnit XML or GitHub workflow annotations (`--format`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .findings import LintFinding, Severity

if TYPE_CHECKING:  # the runner is imported when a lint runs, not to name --format's choices
    from .runner import LintResult

FORMATS = ("text", "json", "junit", "github")
GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _where(f: LintFinding) -> str:
    loc = f.location
    where = loc.file if loc.line is None else f"{loc.file}:{loc.line}"
    return where


def text(result: LintResult, fail_on: Severity) -> str:
    lines = []
    for f in result.findings:
        context = ", ".join(part for part in (f.location.where, f.location.path) if part)
        lines.append(
            f"{_where(f)}: {f.severity} [{f.check}] {f.message}" + (f" ({context})" if context else "")
        )
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    for file, what in result.skipped:
        lines.append(f"{file}: skipped: {what}, no PromQL in it")
    return "\n".join(lines) + ("\n" if lines else "")


def as_json(result: LintResult, fail_on: Severity) -> str:
    findings = [
        {
            "file": f.location.file,
            "line": f.location.line,
            "path": f.location.path,
            "where": f.location.where or None,
            "check": f.check,
            "severity": str(f.severity),
            "message": f.message,
            "fix": f.fix,
        }
        for f in result.findings
    ]
    summary = summary_counts(result)
    summary["fail_on"] = str(fail_on)
    out = {
        "findings": findings,
        "skipped": [{"file": f, "what": w} for f, w in result.skipped],
        "summary": summary,
    }
    return json.dumps(out, indent=2, sort_keys=True) + "\n"


def junit(result: LintResult, fail_on: Severity) -> str:
    """One test suite per file, one test case per finding (a failure at or above --fail-on)."""
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name="servewatch lint")
    by_file: dict[str, list[LintFinding]] = {file: [] for file in result.files}
    for f in result.findings:
        by_file.setdefault(f.location.file, []).append(f)
    for file, findings in by_file.items():
        failing = [f for f in findings if f.severity >= fail_on]
        suite = ET.SubElement(
            suites, "testsuite", name=file, tests=str(max(len(findings), 1)), failures=str(len(failing))
        )
        if not findings:
            ET.SubElement(suite, "testcase", classname=file, name="servewatch lint")
        for f in findings:
            name = f"[{f.check}] {f.location.where or f.location.path or ''}".strip()
            case = ET.SubElement(
                suite, "testcase", classname=file, name=name, file=file, line=str(f.location.line or 0)
            )
            body = f"{_where(f)}: {f.message}" + (f"\nfix: {f.fix}" if f.fix else "")
            tag = "failure" if f.severity >= fail_on else "skipped"
            ET.SubElement(case, tag, type=str(f.severity), message=f.message).text = body
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _escape(text: str, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def github(result: LintResult, fail_on: Severity) -> str:
    lines = []
    for f in result.findings:
        props = [f"file={_escape(f.location.file, True)}"]
        if f.location.line:
            props.append(f"line={f.location.line}")
        props.append(f"title={_escape(f'servewatch lint [{f.check}]', True)}")
        message = f.message + (f"\nfix: {f.fix}" if f.fix else "")
        if f.location.path:
            message += f"\nat {f.location.path}"
        lines.append(f"::{GITHUB_LEVEL[f.severity]} {','.join(props)}::{_escape(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def summary_counts(result: LintResult) -> dict:
    counts = {str(s): sum(1 for f in result.findings if f.severity == s) for s in Severity}
    return {
        "files": len(result.files),
        "rules": result.rules,
        "dashboards": result.dashboards,
        "queries": result.queries,
        "findings": len(result.findings),
        **counts,
    }


RENDER = {"text": text, "json": as_json, "junit": junit, "github": github}
