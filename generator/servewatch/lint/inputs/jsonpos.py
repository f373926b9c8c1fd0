"""Line numbers for JSON values: {path: line}, so a dashboard finding points at its line.

The stdlib json module gives no positions; this scanner walks the text once with the same
grammar (strings through json's own scanstring) and records where each value starts.
"""

from __future__ import annotations

import bisect
import json.decoder
import re

WS = re.compile(r"[ \t\n\r]*")
ATOM = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null")


def line_index(text: str) -> dict[tuple, int]:
    """{(key or index, ...): 1-based line} for every value in `text`; {} when it is not JSON."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    out: dict[tuple, int] = {}

    def line(pos: int) -> int:
        return bisect.bisect_right(starts, pos)

    def value(pos: int, path: tuple) -> int:
        pos = WS.match(text, pos).end()
        out[path] = line(pos)
        ch = text[pos : pos + 1]
        if ch == "{":
            pos = WS.match(text, pos + 1).end()
            if text[pos] == "}":
                return pos + 1
            while True:
                key, pos = json.decoder.scanstring(text, WS.match(text, pos).end() + 1)
                pos = WS.match(text, pos).end() + 1  # the colon
                pos = WS.match(text, value(pos, path + (key,))).end()
                if text[pos] == "}":
                    return pos + 1
                pos += 1  # the comma
        if ch == "[":
            pos = WS.match(text, pos + 1).end()
            if text[pos] == "]":
                return pos + 1
            index = 0
            while True:
                pos = WS.match(text, value(pos, path + (index,))).end()
                index += 1
                if text[pos] == "]":
                    return pos + 1
                pos += 1
        if ch == '"':
            return json.decoder.scanstring(text, pos + 1)[1]
        m = ATOM.match(text, pos)
        if not m:
            raise ValueError(f"unexpected {ch!r}")
        return m.end()

    try:
        value(0, ())
    except (ValueError, IndexError):
        return {}
    return out


def nearest_line(index: dict[tuple, int], path: tuple) -> int | None:
    """The line of `path`, or of its closest ancestor that has one."""
    while path not in index and path:
        path = path[:-1]
    return index.get(path)
