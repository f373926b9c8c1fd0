"""The documented Python entry points (servewatch/__init__.py, README "From Python")."""

from __future__ import annotations

import gc

import pytest

import servewatch
from servewatch import generate
from servewatch.errors import SpecErrors


def test_main_runs_a_command_and_returns_its_exit_status(repo, specs_with, capsys):
    assert servewatch.main(["check", "--specs", str(repo / "specs")]) == 0
    assert "specs OK" in capsys.readouterr().out
    bad = specs_with({"config.yaml": [("fb_units: mib", "fb_units: MiB")]})
    assert servewatch.main(["check", "--specs", str(bad)]) == 2
    assert "did you mean 'mib'?" in capsys.readouterr().err


def test_main_leaves_the_callers_garbage_collector_as_it_found_it(repo, specs_with, capsys):
    """A command collects garbage less often while it runs (cli.fewer_collections); the program that
    called it gets its own thresholds back, whether the command passed or refused the specs."""
    theirs = gc.get_threshold()
    gc.set_threshold(123, 4, 5)
    try:
        assert servewatch.main(["check", "--specs", str(repo / "specs")]) == 0
        assert gc.get_threshold() == (123, 4, 5)
        bad = specs_with({"config.yaml": [("fb_units: mib", "fb_units: MiB")]})
        assert servewatch.main(["check", "--specs", str(bad)]) == 2
        assert gc.get_threshold() == (123, 4, 5)
    finally:
        gc.set_threshold(*theirs)


def test_build_returns_the_outputs_without_writing(default_build, repo, specs_with):
    model, files = servewatch.build(repo / "specs")
    assert files == default_build[1] and model.alerts()
    with pytest.raises(SpecErrors) as caught:
        servewatch.build(specs_with({"config.yaml": [("fb_units: mib", "fb_units: MiB")]}))
    assert "config.yaml:" in str(caught.value.errors[0])


def test_the_entry_points_are_the_commands_own(repo):
    assert servewatch.build is generate.build
    with pytest.raises(AttributeError):
        servewatch.nothing_of_that_name  # noqa: B018
