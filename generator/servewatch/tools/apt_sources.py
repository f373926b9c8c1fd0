"""Which Debian mirror this machine's apt uses: read from its sources, never written down anywhere.

Both formats apt reads are understood: one-line ``sources.list`` entries and deb822 ``*.sources``
stanzas. The first Debian source that is not a security archive wins; its Signed-By keyring is
reused when it is a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import ToolError

DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Suite names (before any "-updates"/"-backports" suffix) that mark a Debian archive.
DEBIAN_SUITES = {
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "duke",
    "sid",
    "oldoldstable",
    "oldstable",
    "stable",
    "testing",
    "unstable",
    "experimental",
}
ONE_LINE_RE = re.compile(r"\s*deb\s+(?:\[(?P<options>[^\]]*)\]\s*)?(?P<uri>\S+)\s+(?P<suite>\S+)")


@dataclass(frozen=True)
class Source:
    uri: str
    suites: tuple[str, ...]
    signed_by: str | None = None


def deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    """The stanzas of a deb822 file as {lower-case field: value}; continuation lines are kept."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif line[0] in " \t" and key:  # continuation line
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()


def deb822_sources(text: str) -> Iterator[Source]:
    for st in deb822_stanzas(text):
        if "deb" not in st.get("types", "").split() or st.get("enabled", "yes").lower() == "no":
            continue
        uris = st.get("uris", "").split()
        if uris:
            yield Source(uris[0], tuple(st.get("suites", "").split()), st.get("signed-by"))


def one_line_sources(text: str) -> Iterator[Source]:
    for line in text.splitlines():
        m = ONE_LINE_RE.match(line.split("#")[0])
        if m:
            options = dict(o.split("=", 1) for o in (m["options"] or "").split() if "=" in o)
            yield Source(m["uri"], (m["suite"],), options.get("signed-by"))


def is_debian_archive(uri: str, suite: str) -> bool:
    """A Debian archive (not a security one, not a CD, not another distribution's suite)."""
    return (
        not uri.startswith("cdrom:")
        and "security" not in uri
        and not suite.endswith(("-security", "/updates"))
        and suite.split("-")[0].split("/")[0] in DEBIAN_SUITES
    )


def configured_sources(apt_etc: Path) -> list[Source]:
    """Every deb source in apt's order: sources.list, then sources.list.d/*.list, then *.sources."""
    found: list[Source] = []
    try:
        found += one_line_sources((apt_etc / "sources.list").read_text())
    except OSError:
        pass
    for part in sorted((apt_etc / "sources.list.d").glob("*.list")):
        found += one_line_sources(part.read_text())
    for part in sorted((apt_etc / "sources.list.d").glob("*.sources")):
        found += deb822_sources(part.read_text())
    return found


def debian_mirror(apt_etc: Path = Path("/etc/apt")) -> tuple[str, str]:
    """(mirror URI, Signed-By keyring file) of the first non-security Debian source apt uses."""
    for source in configured_sources(apt_etc):
        if any(is_debian_archive(source.uri, suite) for suite in source.suites):
            keyring = (source.signed_by or "").strip()
            # Signed-By may also hold an inline key block or a fingerprint; only a file path is reusable.
            if not keyring.startswith("/"):
                keyring = DEFAULT_KEYRING
            return source.uri.rstrip("/"), keyring
    raise ToolError(
        f"no Debian mirror is configured in {apt_etc}/sources.list(.d); "
        "cannot fetch tools from Debian's archive."
    )
