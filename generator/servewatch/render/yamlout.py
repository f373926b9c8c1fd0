"""Deterministic YAML: keys in the order we build them, multi-line strings as literal blocks."""

from __future__ import annotations

import yaml


# The C emitter (libyaml) is ~10x faster than the pure-Python one and emits the same bytes here.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    # Which tag a plain scalar would read back as decides its quoting: PyYAML's resolver (Python,
    # regexes) is asked twice per scalar, about 90,000 times per build, mostly for the same strings.
    # Its answer depends on the value alone (the resolvers are fixed per class), so it is kept.
    _scalar_tags: dict[tuple[str, tuple[bool, bool]], str] = {}

    def resolve(self, kind, value, implicit):
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._scalar_tags.get(key)
        if tag is None:
            if len(self._scalar_tags) > 200_000:  # a bound: the strings of a few builds
                self._scalar_tags.clear()
            tag = self._scalar_tags[key] = super().resolve(kind, value, implicit)
        return tag


def _str(dumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def dump(data, header: str | None = None) -> str:
    text = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100000, default_flow_style=False
    )
    return (f"# {header}\n" if header else "") + text
