"""Load a specs folder: read every file, validate each against the schema, merge them into one Spec.

All mistakes found are reported together, each with file, line and field. The Spec is typed but not
yet cross-checked: servewatch.validate checks it as a whole before anything is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from .. import catalog
from ..errors import Location, SpecError, SpecErrors
from . import layers
from .alertmanager import Alertmanager
from .client_side import with_cause
from .dashboards import Settings
from .document import SpecDoc
from .runbooks import Runbook
from .schema import Config, Group, Overrides, Scenario, Signal
from .slos import SLO, with_side
from .source import SourceDoc, parse_yaml, read_jsonnet, read_text
from .translate import schema_errors

SPEC_SUFFIXES = (".yaml", ".yml", ".jsonnet")


@dataclass(frozen=True)
class Spec:
    """Everything the specs folder says, validated and merged. Immutable."""

    config: Config
    signals: dict[str, Signal]
    groups: tuple[Group, ...]
    overrides: Overrides
    scenarios: tuple[Scenario, ...]
    dashboards: Settings
    runbooks: dict[str, Runbook]  # alert name -> the runbook written for it
    slos: dict[str, SLO]  # name -> SLO (specs/slos.yaml)
    alertmanager: Alertmanager  # routing and inhibition (specs/alertmanager.yaml)
    files: tuple[str, ...]
    sources: dict  # (kind, name) -> (SourceDoc, path), to locate any field below it
    root: str = "specs"  # the specs folder: where a thing no file defines is reported
    # what the files wrote of the single-object sections (config, dashboards, alertmanager), before
    # defaults: a layer over the default specs replaces exactly these (layers.py)
    written: dict = field(default_factory=dict)

    def group_enabled(self, group: Group) -> bool:
        """Whether a group is generated: switched on (overrides applied) and each deployment
        dimension it needs (config.role, config.track) configured."""
        if any(getattr(self.config, need) is None for need in group.needs):
            return False
        ov = self.overrides.groups.get(group.name)
        return group.enabled if ov is None or ov.enabled is None else ov.enabled

    def group_interval(self, group: Group) -> str | None:
        """How often a group is evaluated: its override's interval, else its own (None: the global
        evaluation_interval)."""
        ov = self.overrides.groups.get(group.name)
        return (ov.interval if ov is not None else None) or group.interval

    def signals_read(self) -> dict[str, Signal]:
        """The signals rules may read: all but those recorded only by groups whose deployment
        dimensions are not configured (an absence alert asks for no metric of theirs)."""
        unmet = lambda g: any(getattr(self.config, need) is None for need in g.needs)  # noqa: E731
        gated = {name for g in self.groups if unmet(g) for name in g.records}
        gated -= {name for g in self.groups if not unmet(g) for name in g.records}
        return {k: v for k, v in self.signals.items() if k not in gated}

    def locate(self, kind: str, name: str, *sub) -> Location:
        """file:line of a field of a named thing, e.g. locate("signal", "x", "metric")."""
        if (kind, name) not in self.sources:  # not written in the specs: a default
            return Location(self.root)
        doc, path = self.sources[(kind, name)]
        return doc.locate(path + tuple(sub))


def spec_files(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix in SPEC_SUFFIXES]
    # libsonnet files are imports, not specs of their own
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _read_and_validate(path: Path, root: Path) -> tuple[SourceDoc, SpecDoc | None, list[SpecError]]:
    """A spec file's data and its document, or the errors that name its file and line. A valid YAML
    file's data, line map and document are kept by its text (_KEPT): a process that loads the same
    files again (the tests, the fuzzer: one file of a dozen edited) parses and checks each once."""
    display = path.as_posix()
    if path.suffix == ".jsonnet":  # its imports are files of their own: not keyed by its text alone
        doc = read_jsonnet(path, display, root)
        return doc, *_validate(doc)
    text = read_text(path, display)
    cat = catalog.load()
    kept = _KEPT.get(text)
    if kept is not None and kept[0] is cat:
        _, data, lines, spec_doc = kept
        return SourceDoc(display, data, lines), spec_doc, []
    doc = parse_yaml(text, display)
    spec_doc, errors = _validate(doc)
    if not errors:  # a file with a problem is not kept: its errors are made again under its name
        if len(_KEPT) >= KEPT_FILES:
            _KEPT.clear()
        _KEPT[text] = (cat, doc.data, doc.lines, spec_doc)
    return doc, spec_doc, errors


# A valid YAML spec file's text -> (the catalog it was checked against, its data, line map and
# document). The three are read, never changed (the Spec is built of new dicts). A document is
# checked against the catalog (metric names, profiles), so one kept under another is checked again.
_KEPT: dict[str, tuple[catalog.Catalog, dict, dict, SpecDoc]] = {}
KEPT_FILES = 256  # a dozen default files and the edited copies of a test module's, not a fuzzer's all


def _validate(doc: SourceDoc) -> tuple[SpecDoc | None, list[SpecError]]:
    try:
        return SpecDoc.model_validate(doc.data), []
    except ValidationError as exc:
        return None, schema_errors(exc, SpecDoc, doc)


def load(root: Path | str) -> Spec:
    """The Spec of a specs folder; one that says `extends: servewatch` is laid over the installed
    servewatch's default specs (layers.py)."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(f"specs folder {root} does not exist")
    files = spec_files(root)
    if not files:
        raise SpecError(f"no spec files (*.yaml, *.jsonnet) in {root}")
    parsed = _parse(files, root)
    if not _extends(parsed):
        return _resolved(_merge(parsed, files, root))
    base_root = layers.defaults_dir()
    base_files = spec_files(base_root)
    base = _merge(_parse(base_files, base_root), base_files, base_root)
    return _resolved(layers.overlay(base, _merge(parsed, files, root)))


def _resolved(spec: Spec) -> Spec:
    """`spec` with what its config decides filled in, once the config is whole (a team's over the
    defaults' included): each SLI's side (with_side) and the cause a client-error signal keeps
    (with_cause)."""
    client = spec.config.client_side
    return replace(
        spec,
        signals={name: with_cause(s, client) for name, s in spec.signals.items()},
        slos={name: with_side(slo, client) for name, slo in spec.slos.items()},
    )


def _extends(parsed: list[tuple[SourceDoc, SpecDoc]]) -> bool:
    return any(sd.extends for _, sd in parsed)


def extends_defaults(root: Path) -> bool:
    """Whether a specs folder says `extends: servewatch` (its files read and checked, not merged)."""
    return _extends(_parse(spec_files(Path(root)), Path(root)))


def _parse(files: list[Path], root: Path) -> list[tuple[SourceDoc, SpecDoc]]:
    errors: list[SpecError] = []
    parsed: list[tuple[SourceDoc, SpecDoc]] = []
    for path in files:
        try:
            doc, spec_doc, errs = _read_and_validate(path, root)
        except SpecError as exc:
            errors.append(exc)
            continue
        errors.extend(errs)
        if spec_doc is not None:
            parsed.append((doc, spec_doc))
    if errors:
        raise SpecErrors(errors)
    return parsed


def _merge(parsed: list[tuple[SourceDoc, SpecDoc]], files: list[Path], root: Path) -> Spec:
    errors: list[SpecError] = []
    where: dict = {}
    sources: dict = {}
    config: Config | None = None
    config_set: dict = {}  # the config fields the files wrote: what a layer over defaults changes
    dashboards_set: dict = {}  # the same for the dashboards settings
    signals: dict[str, Signal] = {}
    groups: list[Group] = []
    scenarios: list[Scenario] = []
    overrides = {"alerts": {}, "groups": {}, "scenarios": {}}
    dashboards: dict = {}  # field name -> the settings one file gave
    runbooks: dict[str, Runbook] = {}
    slos: dict[str, SLO] = {}
    alertmanager: Alertmanager | None = None

    def claim(kind: str, name: str, doc: SourceDoc, path: tuple) -> bool:
        loc = doc.locate(path)
        if (kind, name) in where:
            errors.append(
                SpecError(f"{kind} {name!r} is defined twice (first at {where[(kind, name)]})", loc)
            )
            return False
        where[(kind, name)] = loc
        sources[(kind, name)] = (doc, path[:-1] if path[-1] in ("name", "alert") else path)
        return True

    for doc, sd in parsed:
        if sd.config is not None:
            if claim("config", "config", doc, ("config",)):
                config = sd.config
                config_set = sd.config.model_dump(by_alias=True, exclude_unset=True)
        for name, signal in sd.signals.items():
            if claim("signal", name, doc, ("signals", name)):
                signals[name] = signal
        for gi, group in enumerate(sd.groups):
            if claim("group", group.name, doc, ("groups", gi, "name")):
                groups.append(group)
            for ai, alert in enumerate(group.alerts):
                claim("alert", alert.alert, doc, ("groups", gi, "alerts", ai, "alert"))
        for si, scenario in enumerate(sd.scenarios):
            if claim("scenario", scenario.name, doc, ("scenarios", si, "name")):
                scenarios.append(scenario)
        if sd.overrides is not None:
            for section in ("alerts", "groups", "scenarios"):
                for name, ov in getattr(sd.overrides, section).items():
                    if claim(f"override of {section[:-1]}", name, doc, ("overrides", section, name)):
                        overrides[section][name] = ov
        if sd.dashboards is not None:
            for field in [f for f in Settings.model_fields if f in sd.dashboards.model_fields_set]:
                key = Settings.model_fields[field].alias or field
                if claim("dashboard", key, doc, ("dashboards", key)):
                    dashboards[field] = getattr(sd.dashboards, field)
                    dashboards_set[key] = sd.dashboards.model_dump(by_alias=True, exclude_unset=True).get(key)
        for name, runbook in (sd.runbooks or {}).items():
            if claim("runbook", name, doc, ("runbooks", name)):
                runbooks[name] = runbook
        for name, slo in sd.slos.items():
            if claim("slo", name, doc, ("slos", name)):
                slos[name] = slo
        if sd.alertmanager is not None and claim("alertmanager", "alertmanager", doc, ("alertmanager",)):
            alertmanager = sd.alertmanager
    if errors:
        raise SpecErrors(errors)
    return Spec(
        config=config or Config(),
        written={
            "config": config_set,
            "dashboards": dashboards_set,
            "alertmanager": alertmanager.model_dump(by_alias=True, exclude_unset=True)
            if alertmanager
            else {},
        },
        signals=signals,
        groups=tuple(groups),
        overrides=Overrides(**overrides),
        scenarios=tuple(scenarios),
        dashboards=Settings(**dashboards),
        runbooks=runbooks,
        slos=slos,
        alertmanager=alertmanager or Alertmanager(),
        files=tuple(f.as_posix() for f in files),
        sources=sources,
        root=root.as_posix(),
    )
