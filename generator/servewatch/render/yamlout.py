"""Deterministic YAML: keys in the order we build them, multi-line strings as literal blocks."""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode


# The C emitter (libyaml) is ~10x faster than the pure-Python one and emits the same bytes here.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    # Which tag a plain scalar would read back as decides its quoting: PyYAML's resolver (Python,
    # regexes) is asked twice per scalar, about 75,000 times per build, mostly for the same strings.
    # With no path resolvers (none is added to this class) its answer for a scalar is the str tag when
    # the scalar may only be quoted (not implicit[0]), and otherwise depends on the value alone (the
    # implicit resolvers are fixed per class): that answer is kept per value.
    _scalar_tags: dict[str, str] = {}

    def resolve(self, kind, value, implicit):
        if kind is not ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        if not implicit[0]:
            return self.DEFAULT_SCALAR_TAG
        tag = self._scalar_tags.get(value)
        if tag is None:
            if len(self._scalar_tags) > 200_000:  # a bound: the strings of a few builds
                self._scalar_tags.clear()
            tag = self._scalar_tags[value] = super().resolve(kind, value, implicit)
        return tag

    # PyYAML's represent_data looks up a representer by the value's type and keeps an alias key for
    # every value, about 40,000 times per build. The types the renderers build (exactly str, dict, list,
    # int, bool, None) are represented here as its representers would, dicts and lists still as
    # aliases when one object is written twice; any other type (float, tuple, ...) goes to PyYAML.
    def represent_data(self, data):
        kind = type(data)
        if kind is str:
            return ScalarNode(_STR, data, style="|" if "\n" in data else self.default_style)
        if kind is dict or kind is list:
            if self.default_flow_style is not False:
                return super().represent_data(data)
            node = self.represented_objects.get(id(data))
            if node is not None:
                return node
            self.object_keeper.append(data)
            value: list = []
            if kind is dict:
                node = MappingNode(_MAP, value, flow_style=False)
                self.represented_objects[id(data)] = node
                for key, item in data.items():
                    value.append((self.represent_data(key), self.represent_data(item)))
            else:
                node = SequenceNode(_SEQ, value, flow_style=False)
                self.represented_objects[id(data)] = node
                for item in data:
                    value.append(self.represent_data(item))
            return node
        if kind is int:
            return ScalarNode(_INT, str(data), style=self.default_style)
        if data is None:
            return ScalarNode(_NULL, "null", style=self.default_style)
        if kind is bool:
            return ScalarNode(_BOOL, "true" if data else "false", style=self.default_style)
        return super().represent_data(data)


_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _str(dumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def dump(data, header: str | None = None) -> str:
    text = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100000, default_flow_style=False
    )
    return (f"# {header}\n" if header else "") + text
