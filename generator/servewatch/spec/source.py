"""Reading spec files into plain data while remembering the line of every field.

YAML goes through the safe loader only; Jsonnet is evaluated with imports confined to the specs
folder, so a spec can never run code or read files outside it. Whatever a file holds, reading it
ends in data or in a SpecError with the file and, where there is one, the line: text that is not
UTF-8, nesting deeper than any spec needs and aliases that expand without bound are refused here.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import yamlio
from ..errors import Location, SpecError

# Far above what the default specs use (about 45 KiB, 1,500 values and 8 levels in the largest file),
# far below what would make a run slow or deep enough to exhaust Python's stack.
MAX_BYTES = 2 * 1024 * 1024
MAX_VALUES = 100_000  # after YAML aliases are expanded: a "billion laughs" file stops here
MAX_DEPTH = 32

# Byte-order marks of encodings a spec must not be in; UTF-8's own mark is accepted and dropped.
FOREIGN_BOMS = {
    codecs.BOM_UTF32_LE: "UTF-32",
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}


@dataclass
class SourceDoc:
    """One spec file's data plus a map from field path to line (1-based)."""

    file: str
    data: dict
    lines: dict[tuple, int] = field(default_factory=dict)

    def locate(self, path: tuple) -> Location:
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                return Location(self.file, line, dotted(path))
        return Location(self.file, None, dotted(path))


def dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def read_text(path: Path, display: str) -> str:
    """A spec file's text: UTF-8 (with or without a byte-order mark), not too large, not binary."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read the file: {exc.strerror or exc}", Location(display)) from None
    return decode(data, display)


def decode(data: bytes, display: str) -> str:
    if len(data) > MAX_BYTES:
        raise SpecError(
            f"the file is larger than {MAX_BYTES // 1024} KiB; a spec is never that big", Location(display)
        )
    for bom, name in FOREIGN_BOMS.items():
        if data.startswith(bom):
            raise SpecError(f"the file is {name} text; save it as UTF-8", Location(display, 1))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} cannot be decoded); save it as UTF-8",
            Location(display, line),
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise SpecError("the file holds a NUL character: it is not a text file", Location(display, line))
    return text


class _Converter:
    """Composed YAML nodes -> plain data, recording each path's line, within the limits above."""

    PLAIN_TAGS = (
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
        yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
    )

    def __init__(self, file: str, text: str):
        self.file = file
        self.lines: dict[tuple, int] = {}
        self.values = 0
        self.text_lines = _LineIndex(text)

    def line(self, node: yaml.Node) -> int:
        return self.text_lines.line(node.start_mark.index)

    def where(self, node: yaml.Node, path: tuple = ()) -> Location:
        return Location(self.file, self.line(node), dotted(path) or None)

    def plain(self, node: yaml.Node, path: tuple):
        self.values += 1
        if self.values > MAX_VALUES:
            raise SpecError(
                f"the file expands to more than {MAX_VALUES} values (YAML aliases that multiply?)",
                self.where(node, path),
            )
        if len(path) > MAX_DEPTH:
            raise SpecError(f"nested deeper than {MAX_DEPTH} levels", self.where(node, path))
        self.lines[path] = self.line(node)
        if not isinstance(node, yaml.ScalarNode) and node.tag not in self.PLAIN_TAGS:
            raise SpecError(
                f"not valid YAML: tag {node.tag!r} is not allowed in specs", self.where(node, path)
            )
        if isinstance(node, yaml.MappingNode):
            out = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SpecError("mapping keys must be plain scalars", self.where(key_node, path))
                key = self.scalar(key_node)
                if not isinstance(key, str | int | float | bool | None):  # a date, bytes
                    raise SpecError(
                        f"mapping key {key_node.value!r} is not a name", self.where(key_node, path)
                    )
                if key in out:
                    raise SpecError(f"duplicate key {key!r}", self.where(key_node, path + (key,)))
                out[key] = self.plain(value_node, path + (key,))
                self.lines[path + (key,)] = self.line(key_node)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.plain(item, path + (i,)) for i, item in enumerate(node.value)]
        return self.scalar(node)

    def scalar(self, node: yaml.ScalarNode):
        if node.tag == _STR_TAG:  # most scalars: what SafeLoader's construct_yaml_str gives, at once
            return node.value
        constructor = _scalar_constructor()
        try:
            return constructor.construct_object(node, deep=True)
        except (yaml.constructor.ConstructorError, ValueError, OverflowError) as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise SpecError(f"not valid YAML: {problem}", self.where(node)) from None
        finally:
            constructor.constructed_objects.clear()  # keyed by node: it would keep every node alive


_constructors = threading.local()
_STR_TAG = "tag:yaml.org,2002:str"


def _scalar_constructor() -> yaml.SafeLoader:
    """One YAML constructor per thread for every scalar of every file (a new one per scalar cost a
    tenth of `generate`); constructing a scalar leaves nothing behind but the cache cleared after it."""
    if not hasattr(_constructors, "loader"):
        _constructors.loader = yaml.SafeLoader("")
    return _constructors.loader


class _LineIndex:
    """Line numbers as editors count them (YAML also breaks lines at U+0085, U+2028 and U+2029)."""

    def __init__(self, text: str):
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def line(self, index: int) -> int:
        return bisect.bisect_left(self.newlines, index) + 1


def parse_yaml(text: str, display: str) -> SourceDoc:
    try:
        node = yaml.compose(text, Loader=yamlio.SAFE_LOADER)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: it knows where, not the line
        line = _LineIndex(text).line(exc.position)
        raise SpecError(
            f"not valid YAML: character U+{exc.character:04X} is not allowed", Location(display, line)
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = _LineIndex(text).line(mark.index) if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is not None and text[mark.index : mark.index + 1] == "\t":
            column = mark.index - text.rfind("\n", 0, mark.index)
            problem = (
                f"a tab character at column {column}: YAML indents with spaces only; "
                "replace the tab with spaces"
            )
        raise SpecError(f"not valid YAML: {problem}", Location(display, line)) from None
    if node is None:
        return SourceDoc(display, {}, {})
    converter = _Converter(display, text)
    data = converter.plain(node, ())
    if not isinstance(data, dict):
        raise SpecError("a spec file must be a mapping at the top level", Location(display, 1))
    return SourceDoc(display, data, converter.lines)


# A frame of a Jsonnet error's stack trace: "\t<file>:<line>:<col>[-<end>]\t<what>"
JSONNET_FRAME_RE = re.compile(r"^\s*(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)(?:-\d+|-\(\d+:\d+\))?(?:\s|$)")
# A static error names its place on its first line: "STATIC ERROR: <file>:<line>:<col>[-<end>]: <message>"
JSONNET_STATIC_RE = re.compile(
    r"^STATIC ERROR: (?P<file>.+?):(?P<line>\d+):(?P<col>\d+)(?:-[\d:()-]+)?: (?P<msg>.*)$"
)


def read_jsonnet(path: Path, display: str, specs_root: Path) -> SourceDoc:
    import _jsonnet  # the `jsonnet` package

    root = specs_root.resolve()
    main = path.resolve()
    root_display = Path(display[: -len(path.relative_to(specs_root).as_posix())] or ".")

    def shown(file: str) -> str | None:
        """How the specs folder shows `file`, when it is one of the spec files."""
        target = Path(file)
        if target == main:
            return display
        if root in target.parents:
            return (root_display / target.relative_to(root)).as_posix()
        return None

    def confined_import(base: str, rel: str):
        target = (Path(base) / rel).resolve()
        if root not in target.parents and target != root:
            raise RuntimeError(f"import {rel!r} leaves the specs folder")
        if not target.is_file():
            raise RuntimeError(f"import {rel!r} not found")
        try:
            text = read_text(target, rel)
        except SpecError as exc:
            raise RuntimeError(f"import {rel!r}: {exc.message}") from None
        return str(target), text.encode("utf-8")

    text = read_text(path, display)
    try:
        out = _jsonnet.evaluate_snippet(str(main), text, import_callback=confined_import)
    except RuntimeError as exc:
        raise _jsonnet_error(str(exc), shown, display) from None
    except UnicodeError:  # the result holds a lone surrogate (std.char(55296)): not text
        raise SpecError(
            "Jsonnet error: the result holds a character that is not valid Unicode (a lone surrogate?)",
            Location(display),
        ) from None
    data = json.loads(out)
    if not isinstance(data, dict):
        raise SpecError("a spec file must evaluate to an object", Location(display))
    _check_plain(data, display)
    return SourceDoc(display, data, {})


def _jsonnet_error(text: str, shown, display: str) -> SpecError:
    """Jsonnet's own message at Jsonnet's own file:line:col, the innermost frame in a spec file."""
    lines = text.strip().splitlines() or ["(no message)"]
    first = lines[0]
    static = JSONNET_STATIC_RE.match(first)
    if static and shown(static["file"]):
        return SpecError(
            f"Jsonnet error: {static['msg']}",
            Location(shown(static["file"]), int(static["line"]), column=int(static["col"])),
        )
    for frame in lines[1:]:
        m = JSONNET_FRAME_RE.match(frame)
        if m and shown(m["file"]):
            return SpecError(
                f"Jsonnet error: {first.removeprefix('RUNTIME ERROR: ')}",
                Location(shown(m["file"]), int(m["line"]), column=int(m["col"])),
            )
    return SpecError(f"Jsonnet error: {first}", Location(display))


def _check_plain(data, display: str) -> None:
    """The limits YAML is held to, for what Jsonnet produced (iteratively: depth is what is checked)."""
    count, todo = 0, [(data, 0)]
    while todo:
        value, depth = todo.pop()
        count += 1
        if count > MAX_VALUES:
            raise SpecError(f"the result has more than {MAX_VALUES} values", Location(display))
        if depth > MAX_DEPTH:
            raise SpecError(f"the result is nested deeper than {MAX_DEPTH} levels", Location(display))
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        todo.extend((child, depth + 1) for child in children)
