"""A file's text as documents (JSON or YAML) that know the line of every value.

Text embedded in another document (a dashboard's JSON inside a ConfigMap's `data`, a
GrafanaDashboard's `spec.json`) is read the same way, with its lines shifted to the file's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import yaml

from . import jsonpos, yamlpos


class Unreadable(Exception):
    """The text is neither JSON nor YAML; `line` is where the parser stopped."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass
class Doc:
    data: object
    line_of: Callable[[tuple], int | None]  # line of the value at a path (or of its nearest parent)
    text_line_of: Callable[[tuple], int | None]  # line where that value's text starts (after `|`)
    text: str = ""  # the YAML text, for inline comments; "" for JSON
    shift: int = 0  # file line = line in `text` + shift
    root: tuple = ()  # where this document sits in the file, for paths in findings

    def sub(self, path: tuple) -> Doc:
        """The value at `path` as a document of its own (a List item)."""
        return Doc(
            value_at(self.data, path),
            lambda p: self.line_of(path + p),
            lambda p: self.text_line_of(path + p),
            self.text,
            self.shift,
            self.root + path,
        )


def value_at(data, path: tuple):
    for part in path:
        data = data[part]
    return data


def parse(text: str, first_line: int = 1) -> list[Doc]:
    """Documents in `text`, whose first line is line `first_line` of the file."""
    shift = first_line - 1
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise Unreadable(f"invalid JSON: {exc.msg}", exc.lineno + shift) from None
        index = jsonpos.line_index(text)

        def line_of(path: tuple) -> int | None:
            line = jsonpos.nearest_line(index, path)
            return line + shift if line else None

        return [Doc(data, line_of, line_of)]
    try:
        docs = yamlpos.load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Unreadable(f"invalid YAML: {reason}", mark.line + 1 + shift if mark else None) from None
    return [_yaml_doc(d, shift, text) for d in docs if d.data is not None]


def _yaml_doc(doc: yamlpos.YamlDoc, shift: int, text: str) -> Doc:
    def line_of(path: tuple) -> int | None:
        line = doc.line(path)
        return line + shift if line else None

    def text_line_of(path: tuple) -> int | None:
        span = doc.spans.get(path)
        return span.content + shift if span else line_of(path)

    return Doc(doc.data, line_of, text_line_of, text, shift)


def embedded(parent: Doc, path: tuple, text: str) -> list[Doc]:
    """The documents in a string value of `parent` at `path` (a ConfigMap's data, spec.json)."""
    docs = parse(text, parent.text_line_of(path) or 1)
    for doc in docs:
        doc.root = parent.root + path
    return docs
