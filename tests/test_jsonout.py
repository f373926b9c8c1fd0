"""render/jsonout.py writes exactly the text of `json.dumps(data, indent=2, sort_keys=True,
ensure_ascii=False)`: on every JSON file servewatch generates and on the values JSON can be odd with."""

from __future__ import annotations

import json

import pytest

from servewatch.render import jsonout


def reference(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)


def test_every_generated_json_file(default_build):
    _, files = default_build
    texts = [text for path, text in files.items() if path.endswith(".json")]
    assert len(texts) > 8  # the dashboards, their import variants, the schema
    for text in texts:
        data = json.loads(text)
        assert jsonout.dumps(data) == reference(data)


class Text(str):
    """A str subclass: its own type, which the json module writes as a str."""


@pytest.mark.parametrize(
    "data",
    [
        {},
        [],
        {"b": {}, "a": [[], {}], "c": [1, [2, {"d": None}]]},
        [True, False, None, 0, -7, 10**30, 1.5, -0.0, 1e300, 5e-324],
        [float("nan"), float("inf"), float("-inf")],
        ["é ü ∑ 😀", '"quoted" \\ back', "tab\tnew\nline \u2028 \x00 \x1f"],
        ("a", ("tuple", "nested")),
        {1: "int key", 2.5: "float key"},
        {None: 1},
        {True: 2, False: 3},
        {"k": Text("subclass")},
        {"deep": [[[[[[[[[[{"x": 1}]]]]]]]]]]},
        "a bare string",
        3,
    ],
)
def test_odd_values(data):
    assert jsonout.dumps(data) == reference(data)


def test_mixed_key_types_fail_as_the_json_module_fails():
    with pytest.raises(TypeError):
        reference({"a": 1, 2: 3})
    with pytest.raises(TypeError):
        jsonout.dumps({"a": 1, 2: 3})


def test_a_type_json_cannot_write_fails_as_the_json_module_fails():
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonout.dumps({"a": {1, 2}})
