"""Anchors, dashboard links and runbook URLs: what a page can be linked by."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

ANCHOR_RE = re.compile(r'<a id="([^"]+)"></a>')
SECTIONS = {
    "meaning": "What it means",
    "not-meaning": "What it does not mean",
    "impact": "Impact",
    "dashboards": "Dashboards",
    "investigation": "Investigation",
    "causes": "Likely causes",
    "actions": "Actions",
}


def page_path(alert: str) -> str:
    return f"runbooks/{alert}.md"


def anchor(name: str) -> str:
    return f'<a id="{name}"></a>'


def anchors(text: str) -> set[str]:
    return set(ANCHOR_RE.findall(text))


def scoped_vars(config, vars: dict[str, str]) -> dict[str, str]:
    """A link's variables with the cluster first when config names a cluster label: every
    servewatch board then has a `cluster` variable, and a link without it opens another cluster's
    series of the same name."""
    if not config.cluster_label or "cluster" in vars:
        return dict(vars)
    return {"cluster": config.cluster_label, **vars}


def dashboard_url(
    config,
    uid: str,
    slug: str,
    vars: dict[str, str],
    values: dict[str, str] | None = None,
    tokens: dict[str, str] | None = None,
) -> str:
    """Grafana link with `var-X` set from label values; placeholders `<label>` where a value is unknown."""
    url = config.dashboard_url.format(uid=uid, slug=slug or uid)
    parts = []
    for var, label in (scoped_vars(config, vars) if vars else {}).items():
        label = _token(label, tokens or {})
        if values is not None:
            if label in values:
                parts.append(f"var-{quote(var)}={quote(values[label], safe='')}")
        else:
            parts.append(f"var-{var}=<{label}>")
    return f"{url}?{'&'.join(parts)}" if parts else url


def _token(label: str, tokens: dict[str, str]) -> str:
    m = re.fullmatch(r"\[\[([a-z_]+)\]\]", label)
    return tokens.get(m.group(1), label) if m else label


def runbook_url(config, alert: str) -> str:
    return config.runbook_url.format(alert=alert, alert_lower=alert.lower())


def resolve(url: str, files: dict[str, str]) -> tuple[str | None, str | None, str | None]:
    """(generated file, anchor, problem) for a runbook_url: the file is found by its path under
    runbooks/ (or, failing that, by its name), the anchor must be one of the page's `<a id>`s."""
    parts = urlsplit(url)
    path, fragment = parts.path, parts.fragment or None
    rel = None
    if "runbooks/" in path:
        candidate = "runbooks/" + path.rsplit("runbooks/", 1)[1]
        rel = candidate if candidate in files else None
    if rel is None:
        name = path.rsplit("/", 1)[-1]
        matches = [f for f in files if f.startswith("runbooks/") and f.rsplit("/", 1)[-1] == name]
        rel = matches[0] if len(matches) == 1 else None
    if rel is None:
        return None, fragment, f"{url}: no generated runbook page at {path}"
    if fragment and fragment not in anchors(files[rel]):
        return rel, fragment, f"{url}: {rel} has no anchor #{fragment}"
    return rel, fragment, None
