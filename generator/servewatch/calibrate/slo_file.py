"""The SLO proposals applied to the file that defines each SLO (specs/slos.yaml by default).

overrides.yaml tunes alerts, groups and scenarios only: an SLO's threshold and objective are said
once, where the SLO is. The edit is a round trip through ruamel.yaml like the overrides': the
user's comments, order and quoting stay; the evidence joins the threshold line's comment (after the
user's own, which is kept), and a description that names the old threshold ("within 2.5 s") is
updated with it, since it is what the burn-rate alerts tell on-call a good event is. A load test
of one model (--model) writes that model's `per_model` entry instead, made if missing.
"""

from __future__ import annotations

import io
import re

from .overrides import block, evidence_comment, plain, round_trip
from .proposal import Proposal
from .targets import CalibrateError


def _description(text: str, old: float, new: float) -> str:
    """`text` with the old threshold, where it is written as a duration in seconds, replaced."""
    pattern = rf"(?<![\d.]){re.escape(f'{old:g}')}(?=\s*(?:s|sec|seconds)\b)"
    return re.sub(pattern, f"{new:g}", text)


def apply(text: str, file: str, proposals: list[Proposal]) -> tuple[str, list[str]]:
    """`text` (the file defining the SLOs of `proposals`) with their proposed thresholds, and notes
    for what the edit cannot do itself."""
    y = round_trip()
    doc = y.load(text)
    notes = []
    for p in proposals:
        if p.field != "threshold" or p.value is None or p.proposed == p.current:
            continue
        try:
            slo = doc["slos"][p.slo]
            sli = slo["sli"]
            old = float(sli["threshold"])
        except (KeyError, TypeError, ValueError):
            raise CalibrateError(
                f"{file}: slos.{p.slo}.sli.threshold: not found where the SLO was loaded"
            ) from None
        if p.model:  # one model's load test: its own entry, the other models keep the SLO's threshold
            entry = block(block(slo, "per_model"), p.model)
            entry["threshold"] = plain(p.value)
            evidence_comment(entry, "threshold", f"{p.rule}; {p.evidence}", indent=8)
            continue
        sli["threshold"] = plain(p.value)
        evidence_comment(sli, "threshold", f"{p.rule}; {p.evidence}")
        description = slo.get("description")
        if isinstance(description, str):
            updated = _description(description, old, float(p.value))
            if updated != description:
                slo["description"] = type(description)(updated) if type(description) is not str else updated
            else:
                notes.append(
                    f"SLO {p.slo}: its description ({description!r}) does not name the threshold as "
                    f"{old:g} s: check it still says what a good event is"
                )
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue(), notes
