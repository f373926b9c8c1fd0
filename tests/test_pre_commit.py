"""The pre-commit hooks other repositories use: their entry points on a repository made by
`servewatch init`, and once through pre-commit itself (try-repo, which installs servewatch)."""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, run_servewatch, run_servewatch_process

HOOKS = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
BAD_RULE = """\
groups:
  - name: team
    rules:
      - record: pod:vllm_kv_cache_usage:max
        expr: max by (pod) (vllm:gpu_cache_usage_perc)
"""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def sh(*cmd, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=900, env=env
    )


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A repository as `servewatch init` and `servewatch generate` leave it, committed."""
    root = tmp_path_factory.mktemp("users") / "monitoring"
    root.mkdir()
    for args in (("init", "."), ("generate",)):
        res = run_servewatch(*args, cwd=root)
        assert res.returncode == 0, res.stderr
    env = {**os.environ, **GIT_ENV}
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "monitoring")):
        assert sh("git", *args, cwd=root, env=env).returncode == 0
    return root


@pytest.fixture
def user_repo(made, tmp_path):
    return shutil.copytree(made, tmp_path / "monitoring", symlinks=True)


def run_hook(hook_id: str, cwd) -> subprocess.CompletedProcess:
    """The hook's entry as pre-commit runs it: entry, then args, no file names, in a process of its own."""
    hook = HOOKS[hook_id]
    command = shlex.split(hook["entry"]) + hook.get("args", [])
    assert command[0] == "servewatch"
    return run_servewatch_process(*command[1:], cwd=cwd)


def test_the_hooks_run_servewatch_on_the_whole_repository():
    assert set(HOOKS) == {"servewatch-generate-check", "servewatch-lint"}
    for hook in HOOKS.values():
        assert hook["language"] == "python" and hook["pass_filenames"] is False
    changed = re.compile(HOOKS["servewatch-generate-check"]["files"])
    for path in (
        "specs/config.yaml",
        "specs/alerts/gpu.yaml",
        "rules/gpu.rules.yaml",
        ".servewatch-manifest",
    ):
        assert changed.search(path), path
    assert not changed.search("README.md") and not changed.search("deploy/specs/x.yaml")
    assert re.search(HOOKS["servewatch-lint"]["files"], "rules/team.rules.yaml")


def test_generate_check_hook_passes_then_stops_a_stale_output(user_repo):
    assert run_hook("servewatch-generate-check", user_repo).returncode == 0
    rules = user_repo / "rules" / "gpu.rules.yaml"
    rules.write_text(rules.read_text().replace("> 0.95", "> 0.5"))
    res = run_hook("servewatch-generate-check", user_repo)
    assert res.returncode == 1 and "rules/gpu.rules.yaml (committed)" in res.stdout


def test_lint_hook_passes_then_stops_a_removed_vllm_metric(user_repo):
    assert run_hook("servewatch-lint", user_repo).returncode == 0
    (user_repo / "rules" / "team.rules.yaml").write_text(BAD_RULE)
    res = run_hook("servewatch-lint", user_repo)
    assert res.returncode == 1
    assert "team.rules.yaml" in res.stdout + res.stderr


@pytest.mark.integration
def test_pre_commit_installs_and_runs_the_hooks(user_repo, tmp_path):
    """pre-commit clones this repository, installs servewatch from it into a fresh virtualenv (from the
    package index, like `make setup`) and runs both hooks: a stale output fails, lint passes."""
    pytest.importorskip("pre_commit")
    rules = user_repo / "rules" / "vllm.rules.yaml"
    rules.write_text(rules.read_text().replace("> 50", "> 5"))
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    res = sh(sys.executable, "-m", "pre_commit", "try-repo", REPO, "--all-files", cwd=user_repo, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert re.search(r"servewatch outputs match the specs\.+Failed", out), out
    assert "rules/vllm.rules.yaml (committed)" in out
    assert re.search(r"servewatch lint\.+Passed", out), out
