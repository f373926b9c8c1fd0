"""render/yamlout.py represents the values the renderers build itself and keeps the resolver's
answers (faster than PyYAML's represent_data and resolve) and must write exactly what PyYAML's own
would: on every YAML file servewatch generates and on the values that are odd in YAML (shared
objects as aliases, floats, tuples, strings that read back as other types)."""

from __future__ import annotations

import pytest
import yaml

from servewatch.render import yamlout


class PyYamlOnly(yamlout._Dumper):
    """The same dumper with PyYAML's own represent_data and resolve."""

    represent_data = yaml.representer.BaseRepresenter.represent_data
    resolve = yaml.resolver.BaseResolver.resolve


def reference(data, header: str | None = None) -> str:
    text = yaml.dump(
        data, Dumper=PyYamlOnly, sort_keys=False, allow_unicode=True, width=100000, default_flow_style=False
    )
    return (f"# {header}\n" if header else "") + text


def test_every_generated_yaml_file(default_build):
    _, files = default_build
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    texts = [text for path, text in files.items() if path.endswith(".yaml")]
    assert len(texts) > 20
    for text in texts:
        data = yaml.load(text, Loader=loader)
        assert yamlout.dump(data) == reference(data)


shared = {"a": 1}
shared_list = ["x"]
looped: dict = {"name": "loop"}
looped["self"] = looped


@pytest.mark.parametrize(
    "data",
    [
        {},
        [],
        {"k": [], "m": {}},
        {"one": shared, "two": shared, "three": [shared_list, shared_list]},
        looped,
        {"f": [1.5, -0.0, 1e300, float("inf"), float("nan"), 10**30]},
        {"t": (1, 2), "empty": ()},
        {"s": ["yes", "no", "null", "~", "1", "1.0", "0x1f", "2026-12-06", "", " lead", "trail ", "a: b"]},
        {"multi": "line one\nline two\n", "unicode": "é ∑ 😀", "quote": "'\"\\"},
        {True: False, None: None, 3: -4, "nested": [[{"a": [None, True]}]]},
    ],
)
def test_odd_values(data):
    assert yamlout.dump(data, "a header") == reference(data, "a header")
