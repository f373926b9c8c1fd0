"""The one translator from pydantic's validation errors to spec errors, for every schema in spec/.

Each error becomes `file:line: field: message`. pydantic's error location also names the union
member it tried (a query kind, `float`, a class name) and `[key]` for a mapping key: those are not
part of the document, so the schema is walked alongside the location to drop them. The walk also
knows which model or Literal each error lands in, which gives "did you mean" for a misspelt key or
value at any depth, and the fields allowed where an unknown one was written.
"""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import SpecError
from .source import SourceDoc


def schema_errors(exc: ValidationError, model: type[BaseModel], doc: SourceDoc) -> list[SpecError]:
    """Every error of validating `doc.data` against `model`, located in `doc`."""
    out = []
    for err in exc.errors():
        path, landed, holder = _walk(model, err["loc"])
        out.append(SpecError(_message(err, path, landed, holder), doc.locate(path)))
    return out


def did_you_mean(word, options) -> str:
    """'; did you mean X?' for the option `word` is closest to: first one that differs only in case
    (difflib ranks 'MiB' far from 'mib'), then a near spelling."""
    options = [str(o) for o in options]
    same = [o for o in options if o.lower() == str(word).lower()]
    close = same or difflib.get_close_matches(str(word), options, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _message(err: dict, path: tuple, landed, holder) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        keys = _keys(holder) if holder else []
        noun = getattr(holder, "key_noun", "field")
        if getattr(holder, "lists_keys", False):  # a fixed set of names, not fields
            known = f"; known: {', '.join(keys)}"
        else:
            known = f" (allowed: {', '.join(keys)})" if keys else ""
        return f"unknown {noun} {path[-1]!r}{did_you_mean(path[-1], keys)}{known}"
    if kind == "missing":
        return f"missing required field {path[-1]!r}"
    if kind in ("union_tag_not_found", "union_tag_invalid"):  # a union told apart by one field
        discriminator = ctx["discriminator"].strip("'")
        if kind == "union_tag_not_found":
            return f"missing required field {discriminator!r}"
        tags = [t.strip().strip("'") for t in ctx["expected_tags"].split(",")]
        what = f"{path[-1]} {discriminator}" if path and isinstance(path[-1], str) else discriminator
        return f"unknown {what} {ctx['tag']!r}{did_you_mean(ctx['tag'], tags)}; use one of {', '.join(tags)}"
    message = err["msg"].removeprefix("Value error, ")
    if kind == "literal_error" and get_origin(landed) is Literal:
        message += did_you_mean(err["input"], get_args(landed))
    return message


def _walk(model: type[BaseModel], loc: tuple) -> tuple[tuple, object, type[BaseModel] | None]:
    """(the location as a path in the document, the type it lands in, the model holding its last key)."""
    path: list = []
    current: object = model
    holder: type[BaseModel] | None = None
    key_type: object = None
    discriminator: str | None = None  # pydantic keeps a field's discriminator on the field
    for part in loc:
        current, named = _unwrap(current)
        discriminator = named or discriminator
        members = _members(current)
        if members:  # pydantic names the member it tried; the document has no such key
            current, discriminator = _member(members, discriminator, part), None
            continue
        if part == "[key]":  # the error is in the mapping key just passed, not its value
            current = key_type
            continue
        path.append(part)
        if isinstance(current, type) and issubclass(current, BaseModel):
            holder = current
            field = _field(current, part)
            current, discriminator = (field.annotation, field.discriminator) if field else (None, None)
        elif get_origin(current) is dict:
            (key_type, current), discriminator = get_args(current), None
        elif get_origin(current) in (tuple, list):
            current, discriminator = get_args(current)[0], None
        else:
            current = None
    current, _ = _unwrap(current)
    return tuple(path), current, holder


def _unwrap(tp) -> tuple[object, str | None]:
    """The type without Annotated and None, and the discriminator an Annotated union names."""
    discriminator = None
    while get_origin(tp) is Annotated:
        args = get_args(tp)
        tp = args[0]
        discriminator = next((m.discriminator for m in args[1:] if getattr(m, "discriminator", None)), None)
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return _unwrap(rest[0])
        tp = Union[tuple(rest)]
    return tp, discriminator


def _members(tp) -> tuple:
    return get_args(tp) if get_origin(tp) in (Union, types.UnionType) else ()


def _member(members: tuple, discriminator: str | None, tag):
    """The union member pydantic names by `tag`: a discriminator value, a class name or a type name."""
    for m in members:
        if not (isinstance(m, type) and issubclass(m, BaseModel)):
            continue
        if m.__name__ == tag:
            return m
        field = m.model_fields.get(discriminator) if discriminator else None
        if field is not None and tag in get_args(field.annotation):
            return m
    return None


def _field(model: type[BaseModel], key):
    return next((f for name, f in model.model_fields.items() if key in (name, f.alias)), None)


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]
