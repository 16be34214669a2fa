"""Putting user data into pages safely.

Example texts, tokens, labels, names, paths and titles are user data. They reach pages in
two ways, each with its own escaping: JSON inside a <script> element (`script_json`), and
text in the Markdown pages (`inert_text`, applied by the page templates to every plain
string they print, see pages.environment). User text is never read as Markdown or HTML.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Inside <script>, only "</" and "<!--" can end or confuse the element; escaping every
# <, > and & as \u escapes keeps the JSON valid and the element closed. U+2028/9 are
# legal in JSON but were line terminators in older JavaScript.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_RE = re.compile("[<>&\u2028\u2029]")

# Characters that start HTML or Markdown syntax anywhere in a line, for Python-Markdown and
# the extensions in mkdocs.yml: HTML and entities (< > &), attribute quotes (" '), backslash
# escapes, code spans (`), emphasis (* _), links and images ([ ] ( ) !), attr_list ({ }),
# table cells (|), headings and toc anchors (#), strike-through and fences (~).
_INLINE = re.compile(r"""[<>&"'\\`*_\[\]()!{}|#~]""")
# ...and those that do only at the start of a line: list items ("- ", "+ ", "1. "), setext
# underlines and rules (= -), block quotes (>, already above), definition lists (:).
_LEADING = re.compile(r"^(?:[-+=:]|\d+\.(?= |$))")
# C0 controls other than whitespace, and DEL: Python-Markdown marks its placeholders with
# \x02 ... \x03, and none of them is printable text.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


def script_json(data: Any) -> str:
    """JSON text that is safe as the content of a <script type="application/json"> element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_RE.sub(lambda m: _SCRIPT_ESCAPES[m.group()], text)


def _entity(match: re.Match) -> str:
    return f"&#{ord(match.group())};"


def _last_entity(match: re.Match) -> str:
    return match.group()[:-1] + f"&#{ord(match.group()[-1])};"


def inert_text(text: str) -> str:
    """User text as one line of HTML that shows it literally, in HTML and in Markdown alike.

    Every character that HTML or Markdown could read as syntax becomes a numeric character
    reference (`[` -> `&#91;`): Python-Markdown passes references through untouched, in
    paragraphs, tables, md_in_html and raw HTML blocks and attributes, and the browser shows
    the character. Whitespace runs (newlines included) fold to one space, because a blank
    line would end a raw HTML block and let the rest be read as Markdown.
    """
    line = " ".join(_CONTROL.sub("\ufffd", text).split())
    line = _INLINE.sub(_entity, line)
    return _LEADING.sub(_last_entity, line)


# vl-convert aborts the whole process on a C0 control character in any chart text, and
# Vega-Lite fails on line separators and lone surrogates.
_CHART_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def chart_text(text: str, tooltip_title: bool = False) -> str:
    """User text (a model name, a token) for a Vega-Lite spec: what a chart cannot show becomes
    U+FFFD. A tooltip title is copied by Vega-Lite into an expression string, where a backslash
    starts an escape: there it becomes U+29F5 (reverse solidus operator), which looks the same."""
    text = _CHART_UNSAFE.sub("\ufffd", text)
    return text.replace("\\", "\u29f5") if tooltip_title else text
