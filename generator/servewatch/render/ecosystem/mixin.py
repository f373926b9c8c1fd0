"""mixin.libsonnet: the generated rules and dashboards as a monitoring mixin.

kube-prometheus (and anything else that takes mixins) reads three hidden fields: prometheusAlerts,
prometheusRules and grafanaDashboards. The mixin imports the generated files rather than copying
them, so it can never say anything the committed rules and dashboards do not. It sits at the top of
the output folder, above rules/ and dashboards/, so jsonnet-bundler vendoring the repository brings
every file it imports along.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from .generated import GENERATED, Generated

PATH = "mixin.libsonnet"

HEADER = f"""\
// {GENERATED}
//
// A monitoring mixin over the generated rules/ and dashboards/ (docs/ecosystem.md).
// A rule group that holds an alert goes to prometheusAlerts whole, recording rules included: a group
// evaluates its rules in order, so its alerts read the records of the same evaluation. Groups of
// recording rules alone go to prometheusRules.
"""


def _string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a Jsonnet string


def mixin(generated: Generated) -> str:
    # importstr takes a literal path only, so every file is named here
    files = "\n  + ".join(f"groupsOf(importstr {_string(p)})" for p in generated.rule_files) or "[]"
    boards = "".join(
        f"    {_string(PurePosixPath(p).name)}: import {_string(p)},\n" for p in generated.dashboards
    )
    return (
        HEADER
        + "local groupsOf(text) = std.parseYaml(text).groups;\n"
        + f"local groups =\n  {files};\n"
        + "local alerting(group) = std.length([r for r in group.rules if std.objectHas(r, 'alert')]) > 0;\n"
        + "\n"
        + "{\n"
        + "  prometheusAlerts+:: { groups+: [g for g in groups if alerting(g)] },\n"
        + "  prometheusRules+:: { groups+: [g for g in groups if !alerting(g)] },\n"
        + "  grafanaDashboards+:: {\n"
        + boards
        + "  },\n"
        + "}\n"
    )


def render(generated: Generated) -> dict[str, str]:
    return {PATH: mixin(generated)}
