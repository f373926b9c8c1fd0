"""The dashboards are what the Grafana they declare accepts: every form (the plain JSON, the import
variant, the ConfigMaps and operator resources that embed it) declares one Grafana version, that
version is the build of grafana-foundation-sdk the tests check with, and every panel's options
have the keys and types that SDK's typed model requires."""

from __future__ import annotations

import enum
import json
import typing
from importlib.metadata import version

import pytest
import yaml
from grafana_foundation_sdk.models import bargauge, common, gauge, heatmap, stat, table, timeseries
from grafana_foundation_sdk.models import dashboard as sdk_dashboard

from servewatch import grafana

OPTIONS = {
    "table": table.Options,
    "heatmap": heatmap.Options,
    "timeseries": timeseries.Options,
    "stat": stat.Options,
    "gauge": gauge.Options,
    "bargauge": bargauge.Options,
}


def _embedded(text: str) -> list[dict]:
    """Dashboards inside a Kubernetes manifest: ConfigMap data values, GrafanaDashboard spec.json."""
    out = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict):
            continue
        for value in (doc.get("data") or {}).values():
            out.append(json.loads(value))
        spec = doc.get("spec") or {}
        if isinstance(spec.get("json"), str):
            out.append(json.loads(spec["json"]))
    return out


@pytest.fixture(scope="module")
def forms(default_build) -> dict[str, dict]:
    """'path[#n]' -> dashboard, for every generated form that holds one."""
    _, files = default_build
    out = {}
    for path, text in sorted(files.items()):
        if not path.startswith("dashboards/"):
            continue
        if path.endswith(".json"):
            out[path] = json.loads(text)
        elif path.endswith((".yaml", ".yml")):
            out.update({f"{path}#{i}": d for i, d in enumerate(_embedded(text)) if "panels" in d})
    assert len([p for p in out if p.endswith(".json")]) >= 8 and any("#" in p for p in out)
    return out


def _panels(board: dict) -> list[dict]:
    return [q for p in board["panels"] for q in [p, *p.get("panels", [])] if q["type"] != "row"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _optional(hint) -> tuple[bool, typing.Any]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return True, rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return False, hint


def problems(value, hint, path: str) -> list[str]:
    """Where `value` does not fit the SDK type `hint`: a missing required key, a wrong JSON type, a
    value outside an enum. Unions and Any are taken as they come."""
    _, hint = _optional(hint)
    origin = typing.get_origin(hint)
    if hint is typing.Any or origin is typing.Union:
        return []
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        (item,) = typing.get_args(hint) or (typing.Any,)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{path}: {value!r} is not an object"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        known = {m.value for m in hint}
        return [] if value in known else [f"{path}: {value!r} is not one of {sorted(known)}"]
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a boolean"]
    if hint in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not a number"]
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not a string"]
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        hints = typing.get_type_hints(hint.__init__)
        out = []
        for name, field in hints.items():
            if name == "return":
                continue
            key = _camel(name)
            optional, _ = _optional(field)
            if key not in value:
                out += [] if optional else [f"{path}.{key}: required, missing"]
            else:
                out += problems(value[key], field, f"{path}.{key}")
        return out
    return []


def test_every_form_declares_the_grafana_the_sdk_is_built_for(forms, default_build):
    _, files = default_build
    sdk = version("grafana-foundation-sdk").split("!")[-1]
    assert grafana.GRAFANA_VERSION == sdk, "pin the SDK of the Grafana the boards declare (pyproject.toml)"
    imports = [path for path in files if path.startswith("dashboards/import/")]
    assert imports
    for path in imports:
        requires = {r["id"]: r["version"] for r in json.loads(files[path])["__requires"]}
        assert requires["grafana"] == grafana.GRAFANA_VERSION, path
    assert {board["schemaVersion"] for board in forms.values()} == {grafana.SCHEMA_VERSION}


def test_every_panels_options_fit_the_sdk_model(forms):
    found = [
        p
        for path, board in forms.items()
        for panel in _panels(board)
        if panel["type"] in OPTIONS
        for p in problems(
            panel.get("options", {}), OPTIONS[panel["type"]], f"{path} panel {panel['id']} options"
        )
    ]
    assert not found, "\n".join(found)
    kinds = {panel["type"] for board in forms.values() for panel in _panels(board)}
    assert {"table", "heatmap", "timeseries", "stat"} <= kinds, "the check saw every kind it knows"


def test_heatmaps_say_whether_cells_show_their_value(forms):
    # the SDK marks showValue optional; the panel schema requires it
    known = {m.value for m in common.VisibilityMode}
    for path, board in forms.items():
        for panel in _panels(board):
            if panel["type"] == "heatmap":
                assert panel["options"].get("showValue") in known, (path, panel["id"])


def test_no_variable_carries_an_empty_current_option(forms):
    hint = typing.get_type_hints(sdk_dashboard.VariableModel.__init__)["current"]
    for path, board in forms.items():
        for var in board["templating"]["list"]:
            if "current" in var:
                assert var["current"] and {"text", "value"} <= set(var["current"]), (path, var["name"])
                assert not problems(var["current"], hint, f"{path} {var['name']}")
