"""Plans kept in servewatch's cache folder (diskcache.py) under everything the model they are designed
from holds: the validated spec and the dashboard panel map its alerts' dashboard_url read
(`Model.with_dashboard_panels`). A model is made of these two, the code (diskcache.key's first part)
and the catalog as read (the code's own, or a copy another folder holds), so a plan designed from
the model alone is fully decided by this key.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TypeVar

from .. import catalog, diskcache
from ..model import Model

T = TypeVar("T")


def made_from(model: Model) -> str:
    """Everything a plan of `model` is made from besides the code: the validated spec as the model
    holds it, not the files it was read from, so a spec changed in memory after loading
    (`dataclasses.replace`, `model_copy(update=...)`) is designed anew; the panel each alert's
    dashboard_url opens; and the catalog's files as read. Where the spec files are (`files`,
    `sources`, `root`) is left out, so two copies of the same specs in other folders share one
    design."""
    return model.planned("made_from", _made_from)


def _made_from(model: Model) -> str:
    spec = model.spec
    parts = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    for where in ("files", "sources", "root", "written"):
        parts.pop(where, None)
    made = {"spec": parts, "panels": model.dashboard_panels, "catalog": catalog.load().read_from}
    return json.dumps(made, sort_keys=True, default=_plain)


def _plain(value):
    """A validated spec part as JSON data: pydantic models by their dump, dataclasses by field."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def kept_or_designed(
    model: Model,
    kind: str,
    design: Callable[[Model], T],
    to_json: Callable[[Model, T], str],
    from_json: Callable[[Model, object], T],
) -> T:
    """The plan of `kind` kept for `model`'s key, else `design(model)`, kept for the next build. An
    entry is `{"kind": kind, "plan": to_json(model, plan)}`: one that is damaged, of another kind,
    or that `from_json` cannot read (ValueError, TypeError, KeyError, IndexError) is designed
    again. A design that fails is not kept."""
    key = diskcache.key(made_from(model))
    text = diskcache.get(kind, key)
    if text is not None:
        try:
            entry = json.loads(text)
            if isinstance(entry, dict) and entry.get("kind") == kind:
                return from_json(model, entry["plan"])
        except (ValueError, TypeError, KeyError, IndexError):
            pass  # a damaged entry is designed again, as is one of another kind
    plan = design(model)
    diskcache.put(kind, key, f'{{"kind": {json.dumps(kind)}, "plan": {to_json(model, plan)}}}')
    return plan
