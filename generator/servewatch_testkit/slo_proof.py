"""The rule files the generated SLO proof (promtool/slo.test.yaml) loads, laid out for a test file of
one's own: tests that cut the proof down or change a rule run promtool on what the proof reads."""

from __future__ import annotations

import posixpath
from pathlib import Path

import yaml

SLO_TEST = "promtool/slo.test.yaml"


def write_rule_files(files: dict[str, str], folder: Path) -> tuple[dict, list[str]]:
    """The generated SLO test file, parsed, and its `rule_files` for a test file in `folder`: each rule
    file it loads is written below `folder` (rules/slo.rules.yaml at that path, the others beside)."""
    body = yaml.safe_load(files[SLO_TEST])
    out = []
    for read in body["rule_files"]:
        source = posixpath.normpath(posixpath.join(posixpath.dirname(SLO_TEST), read))
        relative = read.removeprefix("../")
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(files[source])
        out.append(relative)
    return body, out


def promtool_sliced(path: Path):
    """`promtool test rules` on the test file at `path` as `servewatch test` runs it (verify.py): each
    group of its tests that observes the same rules beside only those rules (rule_slices.py: the same
    samples at the same steps, so the same verdict), all slices in one promtool run. A test file whose
    rule files hold only what its tests observe runs as it is."""
    from servewatch import rule_slices, tools

    doc = yaml.safe_load(path.read_text())
    rule_paths = [path.parent / r for r in doc["rule_files"]]
    rule_docs = [yaml.safe_load(p.read_text()) for p in rule_paths]
    paths = []
    for i, part in enumerate(rule_slices.slices(doc, rule_docs)):
        folder = path.parent / f"{path.stem}-slice-{i}"
        folder.mkdir(exist_ok=True)  # a second run of the same file (other rules) overwrites
        names = []
        for k, (rule_path, rule_doc) in enumerate(zip(rule_paths, part.rule_docs, strict=True)):
            names.append(f"rules-{k}-{rule_path.name}")
            (folder / names[-1]).write_text(yaml.safe_dump(rule_doc, sort_keys=False, width=1000))
        body = {**doc, "rule_files": names, "tests": list(part.tests)}
        if "group_eval_order" in doc:
            body["group_eval_order"] = [g for g in doc["group_eval_order"] if g in part.group_names]
        paths.append(folder / path.name)
        paths[-1].write_text(yaml.safe_dump(body, sort_keys=False, width=1000))
    return tools.run("promtool", "test", "rules", *paths)
