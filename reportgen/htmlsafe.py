"""Putting user data into pages safely.

Example texts, tokens, labels and titles are user data. They reach pages in three
ways, each with its own escaping: HTML text (Jinja autoescape / `html.escape`),
JSON inside a <script> element (`script_json`), and Markdown (`markdown_text`).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

# Inside <script>, only "</" and "<!--" can end or confuse the element; escaping every
# <, > and & as \u escapes keeps the JSON valid and the element closed. U+2028/9 are
# legal in JSON but were line terminators in older JavaScript.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_RE = re.compile("[<>&\u2028\u2029]")
_MARKDOWN_RE = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def script_json(data: Any) -> str:
    """JSON text that is safe as the content of a <script type="application/json"> element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_RE.sub(lambda m: _SCRIPT_ESCAPES[m.group()], text)


def markdown_text(text: str) -> str:
    """User text as inline Markdown that shows literally: HTML-escaped, Markdown punctuation backslash-escaped."""
    return html.escape(_MARKDOWN_RE.sub(r"\\\1", " ".join(text.split())), quote=True)
