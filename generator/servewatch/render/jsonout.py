"""JSON as `json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)` writes it, faster.

With an indent, Python 3.11's json module encodes in Python, one generator per container: about half
of the dashboards renderer's time. This writes the same bytes with one recursive function over the
types JSON data built here holds (str keys; str, int, float, bool, None, list, tuple and dict values,
exactly those types), and hands anything else to the json module itself, so the text is the module's
in every case (tests/test_jsonout.py compares them).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring

INDENT = "  "


class _Other(Exception):
    """A value of another type than those `_encode` writes: the json module writes the whole text."""


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _encode(value, level: int, out: list[str]) -> None:
    kind = type(value)
    if kind is str:
        out.append(encode_basestring(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = "\n" + INDENT * (level + 1)
        first = True
        for key in sorted(value):
            if type(key) is not str:
                raise _Other
            out.append(("{" if first else ",") + inner + encode_basestring(key) + ": ")
            first = False
            _encode(value[key], level + 1, out)
        out.append("\n" + INDENT * level + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = "\n" + INDENT * (level + 1)
        first = True
        for item in value:
            out.append(("[" if first else ",") + inner)
            first = False
            _encode(item, level + 1, out)
        out.append("\n" + INDENT * level + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        out.append(_float(value))
    else:
        raise _Other


def dumps(data) -> str:
    """`json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)`, the same text."""
    out: list[str] = []
    try:
        _encode(data, 0, out)
    except (_Other, RecursionError, TypeError):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
    return "".join(out)
