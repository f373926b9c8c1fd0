"""Where a dashboard uses its variables: every $var in the strings Grafana interpolates."""

from __future__ import annotations

from typing import Iterator

from ..promql import variables

# Keys whose text Grafana shows as written, or that hold a variable's own state.
NOT_INTERPOLATED = {"description", "content", "current", "options", "name", "label", "__inputs", "__requires"}


def _strings(node, path: tuple) -> Iterator[tuple[str, tuple]]:
    if isinstance(node, str):
        yield node, path
    elif isinstance(node, dict):
        for key, value in node.items():
            if key not in NOT_INTERPOLATED:
                yield from _strings(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, path + (i,))


def references(dashboard: dict) -> Iterator[tuple[str, tuple]]:
    """(variable name, path of the string that uses it); a panel's `repeat` names one bare."""
    for text, path in _strings(dashboard, ()):
        if path and path[-1] in ("repeat", "repeatRow") and text:
            yield text, path
        else:
            for name in variables.names(text):
                yield name, path
