"""servewatch from Python: the same entry points as the command line.

    import servewatch
    code = servewatch.main(["generate", "--specs", "specs", "--out", "."])  # the CLI, exit status back
    model, files = servewatch.build("specs")  # the model and every output as {path: text}, nothing written

`main` prints what the command prints and returns its exit status (never exits the interpreter);
`build` raises servewatch.errors.SpecErrors for invalid specs (each error with file, line and field).
Both are loaded on first use, so importing a part of servewatch stays cheap.
"""

from __future__ import annotations

__all__ = ["build", "main"]


def __getattr__(name: str):
    if name == "main":
        from .cli import main

        return main
    if name == "build":
        from .generate import build

        return build
    raise AttributeError(f"module 'servewatch' has no attribute {name!r}")
