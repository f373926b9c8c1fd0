"""`servewatch test`: check the generated rule files and run promtool's unit tests on them."""

from __future__ import annotations

from pathlib import Path

from . import tools


def rule_files(root: Path) -> list[Path]:
    return sorted((root / "rules").glob("*.rules.yaml"))


def test_files(root: Path, extra: list[Path] = ()) -> list[Path]:
    return sorted((root / "promtool").glob("*.test.yaml")) + list(extra)


def run(root: Path, extra_tests: list[Path] = (), echo=print) -> bool:
    ok = True
    rules = rule_files(root)
    if not rules:
        echo("servewatch: no rule files under rules/; run `servewatch generate` first")
        return False
    res = tools.run("promtool", "check", "rules", "--lint=all", "--lint-fatal", *rules)
    echo((res.stdout + res.stderr).strip())
    ok &= res.returncode == 0
    tests = test_files(root, list(extra_tests))
    res = tools.run("promtool", "test", "rules", *tests)
    out = (res.stdout + res.stderr).strip()
    echo(out)
    ok &= res.returncode == 0
    return ok
