"""Each page's Content-Security-Policy lists the hashes of the inline scripts that page holds.

The policy (site_src/overrides/main.html) allows no 'unsafe-inline' script: one that escaping let
through would not run. The scripts a page does need inline are Material's own (the storage scope in
<head>, the navigation opened at the page's anchor), and they differ between pages (the scope's base
URL), so after MkDocs has written a page each executable inline script's SHA-256 replaces the
placeholder source 'rg-inline-scripts' (CSP Level 2 hash sources). Script elements of other types
(`application/json`: chart specs, the views' data) are data, never run, and need no hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

PLACEHOLDER = "'rg-inline-scripts'"
# An inline script: its attributes and its text. A script's text cannot hold "</script" (the HTML
# parser ends it there; reportgen's JSON escapes it), so the shortest match is the element.
_SCRIPT = re.compile(r"<script(?P<attrs>(?:\s[^>]*)?)>(?P<text>.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
_TYPE = re.compile(r"""\stype\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
_SRC = re.compile(r"\ssrc\s*=", re.IGNORECASE)
_POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="[^"]*">')
_JAVASCRIPT_TYPES = {"", "module", "text/javascript", "application/javascript", "application/ecmascript",
                     "text/ecmascript"}


def inline_script_hashes(page: str) -> list[str]:
    """The CSP hash source ('sha256-...') of every inline script of `page` that a browser would run,
    in order, each once."""
    hashes: list[str] = []
    for script in _SCRIPT.finditer(page):
        attrs = script.group("attrs")
        declared = _TYPE.search(attrs)
        kind = next((value for value in declared.groups() if value is not None), "") if declared else ""
        if _SRC.search(attrs) or kind.strip().lower() not in _JAVASCRIPT_TYPES:
            continue
        digest = hashlib.sha256(script.group("text").encode("utf-8")).digest()
        source = f"'sha256-{base64.b64encode(digest).decode('ascii')}'"
        if source not in hashes:
            hashes.append(source)
    return hashes


def pin_inline_scripts(page: str) -> str:
    """`page` with its policy's placeholder replaced by the hashes of its inline scripts (none: removed).

    Only in the policy, the page's first such <meta>: user text elsewhere may spell the placeholder."""
    policy = _POLICY.search(page)
    if policy is None or PLACEHOLDER not in policy.group():
        raise ValueError("the page has no Content-Security-Policy to pin (site_src/overrides/main.html)")
    pinned = policy.group().replace(" " + PLACEHOLDER, "".join(" " + source for source in inline_script_hashes(page)))
    return page[:policy.start()] + pinned + page[policy.end():]


def pin_site(site_dir: Path) -> None:
    """Every page in `site_dir` pinned: all of them were written by MkDocs with reportgen's template."""
    for path in sorted(site_dir.rglob("*.html")):
        path.write_text(pin_inline_scripts(path.read_text(encoding="utf-8")), encoding="utf-8")
