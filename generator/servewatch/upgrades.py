"""`servewatch defaults diff | take`: what a new servewatch release changed in the default specs, for
a team that copied them (`servewatch init --full`), and taking it file by file.

`init --full` records, in specs/.servewatch-defaults.json, the servewatch version and a hash of every
default file as it was copied. Against that record each file is one of: up to date; changed by the
release only (take it); changed by the team only (nothing to take); changed by both (merge by hand,
the diff shows how); new in the release; removed by the release. Without a record (a copy made
before records existed) a file can only be "differs from the installed default".

A specs folder that says `extends: servewatch` (the default of `init`) needs none of this: it
follows the installed defaults on every upgrade; `diff` lists what it replaces of them.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import ServewatchError
from .spec import layers
from .spec.loader import SPEC_SUFFIXES, extends_defaults, load, spec_files

RECORD = ".servewatch-defaults.json"

# state -> (what it means, whether `take` applies without --force)
STATES = {
    "release": ("changed by the release, not by you: take it", True),
    "new": ("new in the release: take it", True),
    "yours": ("changed by you, not by the release: nothing to take", False),
    "both": ("changed by you and by the release: merge the diff by hand", False),
    "removed": ("removed by the release: delete it once nothing of yours needs it", False),
    "differs": (
        "differs from the installed default (no record of the copy: who changed it is unknown)",
        False,
    ),
}


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def installed_version() -> str:
    """The installed servewatch's version (what `--version` says)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("servewatch")
    except PackageNotFoundError:
        return "unknown"


def default_bytes(specs: Path) -> dict[str, bytes]:
    """rel path -> a default spec file's bytes as `init` writes it into `specs`."""
    from .init import with_modeline

    root = layers.defaults_dir()
    out = {}
    for path in spec_files(root):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        out[rel] = with_modeline(data, specs / rel, specs) if path.suffix in (".yaml", ".yml") else data
    return out


def write_record(specs: Path, files: dict[str, bytes]) -> None:
    _save_record(specs, {rel: _hash(data) for rel, data in files.items()})


def _save_record(specs: Path, hashes: dict[str, str]) -> None:
    record = {"servewatch": installed_version(), "files": dict(sorted(hashes.items()))}
    (specs / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _read_record(specs: Path) -> dict[str, str] | None:
    path = specs / RECORD
    if not path.is_file():
        return None
    try:
        files = json.loads(path.read_text())["files"]
        assert isinstance(files, dict)
        return {str(k): str(v) for k, v in files.items()}
    except (ValueError, KeyError, TypeError, AssertionError):
        raise ServewatchError(
            f"{path}: not a record servewatch wrote; delete it or run `init --full` again"
        ) from None


@dataclass(frozen=True)
class FileState:
    path: str
    state: str
    diff: str  # unified diff: yours -> the installed default

    @property
    def takeable(self) -> bool:
        return STATES[self.state][1]


def states(specs: Path) -> list[FileState]:
    """Every default spec file that is not as the installed servewatch ships it."""
    installed = default_bytes(specs)
    record = _read_record(specs)
    yours = {
        p.relative_to(specs).as_posix(): p.read_bytes() for p in specs.rglob("*") if p.suffix in SPEC_SUFFIXES
    }
    out = []
    for rel in sorted(set(installed) | set(record or {})):
        mine, theirs = yours.get(rel), installed.get(rel)
        if mine == theirs:
            continue
        copied = (record or {}).get(rel)
        if theirs is None:
            if copied is None or mine is None:
                continue  # a file of the team's own, or gone on both sides
            state = "removed"
        elif mine is None:
            if copied is not None:
                continue  # the team deleted it on purpose
            state = "new"
        elif record is None:
            state = "differs"
        elif _hash(mine) == copied:
            state = "release"
        elif _hash(theirs) == copied:
            state = "yours"
        else:
            state = "both"
        out.append(FileState(rel, state, _diff(rel, mine, theirs)))
    return out


def _diff(rel: str, mine: bytes | None, theirs: bytes | None) -> str:
    def lines(data):
        return data.decode("utf-8", "replace").splitlines(keepends=True) if data is not None else []

    return "".join(
        difflib.unified_diff(
            lines(mine),
            lines(theirs),
            f"specs/{rel} (yours)",
            f"specs/{rel} (servewatch {installed_version()})",
        )
    )


def take(specs: Path, paths: list[str], force: bool) -> list[str]:
    """Write the installed default over each of `paths` (all takeable ones when empty); returns them.
    Nothing is written when one of them cannot be taken."""
    found = {s.path: s for s in states(specs)}
    chosen = paths or [s.path for s in found.values() if s.takeable]
    for rel in chosen:
        state = found.get(rel)
        if state is None:
            known = layers.defaults_dir() / rel
            raise ServewatchError(
                f"{rel}: up to date with servewatch {installed_version()}"
                if known.is_file()
                else f"{rel}: not a default spec file of servewatch {installed_version()}"
            )
        if not state.takeable and not force:
            raise ServewatchError(
                f"{rel}: {STATES[state.state][0]}; --force takes it anyway, losing your edits"
            )
    installed = default_bytes(specs)
    record = _read_record(specs) or {}
    for rel in chosen:
        target = specs / rel
        if rel in installed:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(installed[rel])
            record[rel] = _hash(installed[rel])
        else:
            target.unlink(missing_ok=True)
            record.pop(rel, None)
    _save_record(specs, record)
    return chosen


def replaced(specs: Path) -> dict[str, list[str]]:
    """For a folder over the defaults: kind -> the default names it replaces."""
    spec = load(specs)
    root = layers.defaults_dir().as_posix()
    out: dict[str, list[str]] = {}
    for (kind, name), (doc, _) in sorted(spec.sources.items()):
        merged = kind in ("config", "dashboard", "alertmanager") or kind.startswith("override")
        if not merged and not doc.file.startswith(root) and _in_defaults(kind, name):
            out.setdefault(kind, []).append(name)
    return out


@cache
def _default_sources() -> dict:
    return load(layers.defaults_dir()).sources


def _in_defaults(kind: str, name: str) -> bool:
    return (kind, name) in _default_sources()


# -- the command line ------------------------------------------------------------------------------
def add_cli(sub) -> None:
    p = sub.add_parser(
        "defaults",
        help="what a new servewatch changed in the default specs you copied, and taking it",
        description=__doc__.split("\n\n")[0].replace("\n", " "),
    )
    cmds = p.add_subparsers(dest="defaults_command", required=True, metavar="{diff,take}")
    d = cmds.add_parser(
        "diff",
        help="per file: what the installed servewatch's defaults changed, and the diff",
        epilog="Exit status: 0 nothing to take or merge; 1 a file can be taken or needs merging; "
        "2 the specs are invalid or the command was misused.",
    )
    d.add_argument("--specs", default="specs", help="specs folder (default: specs)")
    d.add_argument("--stat", action="store_true", help="the list of files only, no diff")
    d.set_defaults(func=cmd_diff)
    t = cmds.add_parser(
        "take",
        help="write the installed defaults over files the release changed and you did not",
        epilog="Exit status: 0 taken; 2 a file cannot be taken (you changed it: --force), or misuse.",
    )
    t.add_argument(
        "paths", nargs="*", metavar="FILE", help="paths under specs/ (default: every takeable one)"
    )
    t.add_argument("--specs", default="specs", help="specs folder (default: specs)")
    t.add_argument("--force", action="store_true", help="take a file you changed too, losing your edits")
    t.set_defaults(func=cmd_take)


def cmd_diff(args) -> int:
    specs = Path(args.specs)
    if not specs.is_dir():
        raise ServewatchError(f"specs folder {specs} does not exist")
    if extends_defaults(specs):
        print(
            f"servewatch: {specs} extends the default specs of servewatch {installed_version()}: "
            "it follows them"
        )
        for kind, names in replaced(specs).items():
            print(f"  you replace the default {kind}(s): {', '.join(names)}")
        return 0
    found = states(specs)
    if not found:
        print(f"servewatch: {specs} holds the default specs of servewatch {installed_version()} as they are")
        return 0
    act = [s for s in found if s.state in ("release", "new", "both", "differs")]
    print(f"servewatch: {len(found)} default spec file(s) differ from servewatch {installed_version()}'s:")
    for s in found:
        print(f"  {s.path}: {STATES[s.state][0]}")
    if not args.stat:
        print("".join(s.diff for s in found), end="")
    return 1 if act else 0


def cmd_take(args) -> int:
    specs = Path(args.specs)
    if not specs.is_dir():
        raise ServewatchError(f"specs folder {specs} does not exist")
    if extends_defaults(specs):
        raise ServewatchError(f"{specs} extends the installed defaults: there is nothing to take")
    taken = take(specs, [p.removeprefix("specs/") for p in args.paths], args.force)
    if not taken:
        print("servewatch: nothing to take")
    for rel in taken:
        print(f"servewatch: took specs/{rel} from servewatch {installed_version()}")
    return 0
