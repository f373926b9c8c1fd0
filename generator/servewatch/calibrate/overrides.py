"""The proposals applied to the overrides file: a round trip through ruamel.yaml, so the user's
comments, order and quoting stay, with the evidence of each changed value as its line's comment.
The result is checked like `servewatch check` before anything is written."""

from __future__ import annotations

import difflib
import io
import re
import shutil
import tempfile
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from .. import writer
from ..errors import SpecErrors
from ..spec.schema import AlertOverride
from .propose import Proposal
from .targets import CalibrateError

FILE = "overrides.yaml"
MARK = "calibrate:"  # starts the evidence in a changed value's line comment
# proposal field -> its key in an alert override, as the schema spells it
FIELDS = {
    f.alias or name: f.alias or name
    for name, f in AlertOverride.model_fields.items()
    if name in ("threshold", "for_")
}


def round_trip() -> YAML:
    y = YAML()  # round-trip
    y.preserve_quotes = True
    y.width = 4096  # an evidence comment stays on its line
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def block(parent: CommentedMap, key: str) -> CommentedMap:
    """parent[key] as a block mapping, made if missing (`overrides: {}` becomes a block)."""
    child = parent.get(key)
    if not isinstance(child, CommentedMap):
        child = CommentedMap()
        parent[key] = child
    child.fa.set_block_style()
    return child


def plain(value):
    """20.0 -> 20: a count reads as one."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def apply(text: str, proposals: list[Proposal]) -> str:
    """`text` (an overrides file) with the proposed thresholds and `for`s."""
    y = round_trip()
    doc = y.load(text) if text.strip() else None
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise CalibrateError(f"{FILE} is not a mapping; cannot add overrides to it")
    alerts = block(block(doc, "overrides"), "alerts")
    for p in proposals:
        if p.slo or p.value is None or p.field not in FIELDS or p.proposed == p.current:
            continue
        entry = block(alerts, p.subject)
        key, value = FIELDS[p.field], plain(p.value)
        entry[key] = value
        evidence_comment(entry, key, f"{p.rule}; {p.evidence}")
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def evidence_comment(parent: CommentedMap, key: str, text: str, indent: int = 6) -> None:
    """`MARK text` as the comment of parent[key]'s line (indented `indent` spaces): after the user's
    words where there are some, in place of an earlier calibrate comment; comment lines below stay."""
    token = (parent.ca.items.get(key) or [None] * 4)[2]
    if token is None:
        # two spaces after the value, as the user's own comments usually sit
        column = indent + len(key) + 2 + len(str(parent[key])) + 2
        parent.yaml_add_eol_comment(f"{MARK} {text}", key, column=column)
        return
    first, newline, rest = token.value.partition("\n")
    user = first.lstrip("#").strip()
    user = re.split(rf"\s*;?\s*{MARK}", user)[0].strip() if MARK in user else user
    token.value = f"# {user + '; ' if user else ''}{MARK} {text}{newline}{rest}"


def diff(path: Path, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path), f"{path} (calibrated)")
    )


def check(specs: Path, changed: dict[str, str]) -> None:
    """Load and validate a copy of the specs with the changed files (relative path -> text), as
    `servewatch check` does."""
    from ..spec.loader import load
    from ..validation import validate

    with tempfile.TemporaryDirectory(prefix="servewatch-calibrate-") as tmp:
        copy = Path(tmp) / "specs"
        shutil.copytree(specs, copy)
        for name, text in changed.items():
            (copy / name).write_text(text, encoding="utf-8")
        try:
            validate(load(copy))
        except SpecErrors as exc:
            lines = "; ".join(str(e).replace(str(copy), str(specs)) for e in exc.errors[:5])
            raise CalibrateError(f"the proposed changes would not pass `servewatch check`: {lines}") from None


def write(path: Path, new: str) -> None:
    writer.replace(path, new)
