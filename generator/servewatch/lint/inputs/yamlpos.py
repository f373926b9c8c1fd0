"""YAML documents with the line of every value, for findings and for inline suppressions."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml


@dataclass(frozen=True)
class Span:
    line: int  # 1-based line of the key (mapping values) or of the item (sequence items)
    end: int  # last line of the value
    content: int  # first line of the value's text (the line after `|` for block scalars)


@dataclass
class YamlDoc:
    data: object
    spans: dict[tuple, Span] = field(default_factory=dict)

    def line(self, path: tuple) -> int | None:
        while path not in self.spans and path:
            path = path[:-1]
        span = self.spans.get(path)
        return span.line if span else None


def load_all(text: str) -> list[YamlDoc]:
    """Every document in `text` (safe loader); raises yaml.YAMLError with its mark."""
    loader = yaml.SafeLoader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            spans: dict[tuple, Span] = {}
            _index(node, (), node.start_mark.line + 1, spans)
            docs.append(YamlDoc(loader.construct_document(node), spans))
    finally:
        loader.dispose()
    return docs


def _index(node, path: tuple, line: int, spans: dict[tuple, Span]) -> None:
    end = node.end_mark.line + (0 if node.end_mark.column == 0 else 1)
    block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    spans[path] = Span(line, max(end, line), node.start_mark.line + (2 if block else 1))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                _index(value, path + (key.value,), key.start_mark.line + 1, spans)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, path + (i,), item.start_mark.line + 1, spans)
