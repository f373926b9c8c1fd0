"""What a document is, by its content: rule groups or a Grafana dashboard, in each delivery form.

Read: plain rule files, PrometheusRule, Mimir namespace files (`namespace:` + `groups:`), Thanos
Ruler files, kube-prometheus-stack values (`additionalPrometheusRulesMap`);
dashboards as classic JSON, the import form (`__inputs`), the HTTP API's `{"dashboard": ...}`,
a ConfigMap (sidecar), a GrafanaDashboard (Grafana Operator, `json` or `gzipJson`), a Grafana
app-platform v1 resource; a Kubernetes `List` of any of these. Recognised and skipped (nothing to
lint): Grafana provisioning files, promtool test files and kustomizations. Anything else is an
error that names what was expected.
"""

from __future__ import annotations

import base64
import binascii
import gzip
from dataclasses import dataclass, field

from ..subjects import LintDashboard, Rule
from .dashboards import looks_like_dashboard, read_dashboard
from .documents import Doc, Unreadable, embedded, parse
from .rules import is_rule_groups, read_groups

EXPECTED = (
    "expected a Prometheus rule file (groups:), a PrometheusRule, a Mimir/Thanos namespace file, "
    'or a Grafana dashboard (JSON, import form, {"dashboard": ...}, ConfigMap, GrafanaDashboard)'
)
PROVISIONING_KEYS = ("providers", "datasources", "deleteDatasources", "apps", "notifiers")
REMOTE_CONTENT = ("url", "configMapRef", "grafanaCom", "jsonnet", "jsonnetLib", "oci")


@dataclass
class Contents:
    rules: list[Rule] = field(default_factory=list)
    dashboards: list[LintDashboard] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # what was recognised, for the summary
    skipped: list[str] = field(default_factory=list)  # recognised, nothing to lint
    problems: list[tuple[int | None, str]] = field(default_factory=list)  # (line, what cannot be read)

    def extend(self, other: Contents) -> None:
        self.rules += other.rules
        self.dashboards += other.dashboards
        self.kinds += other.kinds
        self.skipped += other.skipped
        self.problems += other.problems

    def add_rules(self, doc: Doc, path: tuple, file: str, form: str, label: str, known: set[str]) -> None:
        found, problems = read_groups(doc, path, file, form, known)
        self.rules += found
        self.problems += problems
        self.kinds.append(label)

    def add_dashboard(self, doc: Doc, path: tuple, file: str, form: str, inputs=frozenset()) -> None:
        value = doc.data
        for part in path:
            value = value[part]
        self.dashboards.append(read_dashboard(value, doc, path, file, form, frozenset(inputs)))
        self.kinds.append(f"Grafana dashboard {value.get('title')!r} ({form})")


def recognise(doc: Doc, file: str, known: set[str]) -> Contents:
    out = Contents()
    data = doc.data
    if not isinstance(data, dict):
        out.problems.append((doc.line_of(()), f"a {type(data).__name__}, not a mapping: {EXPECTED}"))
        return out
    kind, api = data.get("kind"), str(data.get("apiVersion", ""))
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if kind == "PrometheusRule" and is_rule_groups(spec.get("groups")):
        out.add_rules(doc, ("spec", "groups"), file, "prometheusrule", f"PrometheusRule {_name(data)}", known)
    elif kind == "List" and isinstance(data.get("items"), list):
        for i in range(len(data["items"])):
            out.extend(recognise(doc.sub(("items", i)), file, known))
    elif kind == "ConfigMap":
        out.extend(_configmap(doc, data, file, known))
    elif kind == "GrafanaDashboard":
        out.extend(_grafana_dashboard(doc, spec, file))
    elif api.startswith("dashboard.grafana.app/") and kind == "Dashboard":
        if looks_like_dashboard(spec):
            out.add_dashboard(doc, ("spec",), file, "resource")
        else:
            out.problems.append((doc.line_of(("spec",)), f"{api} dashboards (schema v2) are not supported"))
    elif isinstance(data.get("additionalPrometheusRulesMap"), dict):
        out.extend(_helm_values(doc, data["additionalPrometheusRulesMap"], file, known))
    elif api.startswith("kustomize.config.k8s.io/") and kind in ("Kustomization", "Component"):
        out.skipped.append(f"kustomize {kind}")
    elif is_rule_groups(data.get("groups")) and "namespace" in data:
        out.add_rules(doc, ("groups",), file, "mimir", f"Mimir rules (namespace {data['namespace']})", known)
    elif is_rule_groups(data.get("groups")) and any(
        isinstance(g, dict) and "partial_response_strategy" in g for g in data["groups"]
    ):
        out.add_rules(doc, ("groups",), file, "thanos", "Thanos Ruler rule file", known)
    elif is_rule_groups(data.get("groups")):
        out.add_rules(doc, ("groups",), file, "plain", "Prometheus rule file", known)
    elif isinstance(data.get("dashboard"), dict) and looks_like_dashboard(data["dashboard"]):
        out.add_dashboard(doc, ("dashboard",), file, "api")
    elif looks_like_dashboard(data):
        out.add_dashboard(doc, (), file, "import" if "__inputs" in data else "classic")
    elif "rule_files" in data and "tests" in data:
        out.skipped.append("promtool unit test file")
    elif data.get("apiVersion") == 1 and any(k in data for k in PROVISIONING_KEYS):
        out.skipped.append("Grafana provisioning file")
    else:
        out.problems.append((doc.line_of(()), _unrecognised(data)))
    return out


def _helm_values(doc: Doc, rule_map: dict, file: str, known: set[str]) -> Contents:
    """kube-prometheus-stack's additionalPrometheusRulesMap: one PrometheusRule's groups per key."""
    out = Contents()
    for key, entry in rule_map.items():
        path = ("additionalPrometheusRulesMap", key, "groups")
        if isinstance(entry, dict) and is_rule_groups(entry.get("groups")):
            out.add_rules(doc, path, file, "helm", f"kube-prometheus-stack rules {key}", known)
        else:
            out.problems.append(
                (doc.line_of(path[:2]), f"additionalPrometheusRulesMap.{key}: no rule groups")
            )
    return out


def _name(data: dict) -> str:
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    return str(meta.get("name", "?"))


def _unrecognised(data: dict) -> str:
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if data.get("kind") == "PersesDashboard" or isinstance(spec.get("panels"), dict):
        return "Perses dashboards are not supported; " + EXPECTED
    if isinstance(data.get("groups"), list) and data.get("apiVersion") == 1:
        return "Grafana-managed alert rules are not supported; " + EXPECTED
    keys = ", ".join(sorted(map(str, data))[:6]) or "no keys"
    return f"not a rule file or a dashboard (top-level keys: {keys}); {EXPECTED}"


def _configmap(doc: Doc, data: dict, file: str, known: set[str]) -> Contents:
    out = Contents()
    values = data.get("data") if isinstance(data.get("data"), dict) else {}
    for key, text in values.items():
        if not isinstance(text, str):
            continue
        meant = str(key).endswith((".json", ".yaml", ".yml"))  # other keys may hold anything
        try:
            inner_docs = embedded(doc, ("data", key), text)
        except Unreadable as exc:
            if meant:
                out.problems.append((exc.line, f"ConfigMap key {key}: {exc}"))
            continue
        for inner in inner_docs:
            found = recognise(inner, file, known)
            if not meant:
                found.problems = []
            out.extend(found)
    if not (out.rules or out.dashboards or out.problems):
        out.problems.append((doc.line_of(()), f"ConfigMap {_name(data)} holds no dashboard and no rule file"))
    return out


def _grafana_dashboard(doc: Doc, spec: dict, file: str) -> Contents:
    out = Contents()
    inputs = {d.get("inputName") for d in spec.get("datasources") or [] if isinstance(d, dict)} - {None}
    try:
        if isinstance(spec.get("json"), str):
            inner_docs = embedded(doc, ("spec", "json"), spec["json"])
        elif isinstance(spec.get("gzipJson"), str):
            inner_docs = [_gzipped(doc, spec["gzipJson"])]
        else:
            remote = next((k for k in REMOTE_CONTENT if k in spec), "?")
            message = f"GrafanaDashboard content comes from spec.{remote}, not this file: lint that dashboard"
            out.problems.append((doc.line_of(("spec",)), message))
            return out
    except Unreadable as exc:
        out.problems.append((exc.line, f"GrafanaDashboard: {exc}"))
        return out
    for inner in inner_docs:
        if looks_like_dashboard(inner.data):
            out.add_dashboard(inner, (), file, "grafanadashboard", inputs)
        else:
            out.problems.append((doc.line_of(("spec",)), "GrafanaDashboard content is not a dashboard"))
    return out


def _gzipped(doc: Doc, text: str) -> Doc:
    """spec.gzipJson: base64 of gzip; only the key's line is known inside it."""
    try:
        inner = parse(gzip.decompress(base64.b64decode(text)).decode())[0]
    except (binascii.Error, OSError, UnicodeDecodeError, IndexError) as exc:
        raise Unreadable(
            f"spec.gzipJson cannot be decoded: {exc}", doc.line_of(("spec", "gzipJson"))
        ) from None
    line = doc.line_of(("spec", "gzipJson"))
    return Doc(inner.data, lambda p: line, lambda p: line, root=doc.root + ("spec", "gzipJson"))
