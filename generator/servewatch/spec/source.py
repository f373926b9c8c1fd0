"""Reading spec files into plain data while remembering the line of every field.

YAML goes through the safe loader only; Jsonnet is evaluated with imports confined to the specs
folder, so a spec can never run code or read files outside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import Location, SpecError


@dataclass
class SourceDoc:
    """One spec file's data plus a map from field path to line (1-based)."""

    file: str
    data: dict
    lines: dict[tuple, int] = field(default_factory=dict)

    def locate(self, path: tuple) -> Location:
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                return Location(self.file, line, dotted(path))
        return Location(self.file, None, dotted(path))


def dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _plain(node: yaml.Node, path: tuple, lines: dict, file: str):
    """Convert a composed YAML node to Python data, recording each path's line."""
    lines[path] = node.start_mark.line + 1
    plain_tags = (
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
        yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
    )
    if not isinstance(node, yaml.ScalarNode) and node.tag not in plain_tags:
        raise SpecError(
            f"not valid YAML: tag {node.tag!r} is not allowed in specs",
            Location(file, node.start_mark.line + 1, dotted(path)),
        )
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SpecError(
                    "mapping keys must be plain scalars",
                    Location(file, key_node.start_mark.line + 1, dotted(path)),
                )
            key = _scalar(key_node, file)
            if key in out:
                raise SpecError(
                    f"duplicate key {key!r}",
                    Location(file, key_node.start_mark.line + 1, dotted(path + (key,))),
                )
            out[key] = _plain(value_node, path + (key,), lines, file)
            lines[path + (key,)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, path + (i,), lines, file) for i, item in enumerate(node.value)]
    return _scalar(node, file)


def _scalar(node: yaml.ScalarNode, file: str):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:
        raise SpecError(f"not valid YAML: {exc.problem}", Location(file, node.start_mark.line + 1)) from None
    finally:
        loader.dispose()


def read_yaml(path: Path, display: str) -> SourceDoc:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"not valid YAML: {problem}", Location(display, line)) from None
    if node is None:
        return SourceDoc(display, {}, {})
    lines: dict[tuple, int] = {}
    data = _plain(node, (), lines, display)
    if not isinstance(data, dict):
        raise SpecError("a spec file must be a mapping at the top level", Location(display, 1))
    return SourceDoc(display, data, lines)


def read_jsonnet(path: Path, display: str, specs_root: Path) -> SourceDoc:
    import _jsonnet  # the `jsonnet` package

    root = specs_root.resolve()

    def confined_import(base: str, rel: str):
        target = (Path(base) / rel).resolve()
        if root not in target.parents and target != root:
            raise RuntimeError(f"import {rel!r} leaves the specs folder")
        if not target.is_file():
            raise RuntimeError(f"import {rel!r} not found")
        return str(target), target.read_bytes()

    try:
        out = _jsonnet.evaluate_file(str(path), import_callback=confined_import)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise SpecError(f"Jsonnet error: {first}", Location(display)) from None
    data = json.loads(out)
    if not isinstance(data, dict):
        raise SpecError("a spec file must evaluate to an object", Location(display))
    return SourceDoc(display, data, {})
