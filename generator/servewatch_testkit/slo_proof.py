"""The rule files the generated SLO proof (promtool/slo.test.yaml) loads, laid out for a test file of
one's own: tests that cut the proof down or change a rule run promtool on what the proof reads."""

from __future__ import annotations

import posixpath
import tempfile
from pathlib import Path

from servewatch import yamlio

SLO_TEST = "promtool/slo.test.yaml"


def write_rule_files(files: dict[str, str], folder: Path) -> tuple[dict, list[str]]:
    """The generated SLO test file, parsed, and its `rule_files` for a test file in `folder`: each rule
    file it loads is written below `folder` (rules/slo.rules.yaml at that path, the others beside)."""
    body = yamlio.load(files[SLO_TEST])
    out = []
    for read in body["rule_files"]:
        source = posixpath.normpath(posixpath.join(posixpath.dirname(SLO_TEST), read))
        relative = read.removeprefix("../")
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(files[source])
        out.append(relative)
    return body, out


def promtool_sliced(path: Path):
    """`promtool test rules` on the test file at `path` as `servewatch test` runs it: the slices
    verify.sliced writes (each group of tests that observes the same rules beside only those rules:
    the same samples at the same steps, so the same verdict), all in one promtool run; the file
    itself when it runs whole."""
    from servewatch import tools, verify

    # a fresh folder per call: a test may prove the same file again on other rules
    scratch = Path(tempfile.mkdtemp(prefix=f"{path.stem}-slices-", dir=path.parent))
    cut = verify.sliced(path, yamlio.load(path.read_text()), scratch)
    return tools.run("promtool", "test", "rules", *([path] if cut is None else [s.test_file for s in cut]))


def first_failure(path: Path) -> str | None:
    """promtool's output on the first test of the file at `path` that fails, its tests run one at a
    time on the whole rule files, the cheapest first; None when every test passes. A mutant needs one
    failure to be caught: the rest of the proof would only cost time. promtool failing with no test
    named (a rule file that does not load) is not a test that caught anything: it raises."""
    from servewatch import promtool_cost, tools, verify
    from servewatch.promtool_runs import environment

    doc = yamlio.load(path.read_text())
    step = promtool_cost.interval_s(doc)
    for test in sorted(doc["tests"], key=lambda t: promtool_cost.test_cost(t, step, 0)):
        name = test["name"]
        res = tools.run("promtool", "test", "rules", verify.run_only(name), path, env=environment())
        if res.returncode == 0:
            continue
        said = res.stdout + res.stderr
        if name not in verify.failed_tests(said):
            raise AssertionError(f"promtool failed on {path} without failing {name!r}:\n{said}")
        return said
    return None
