"""Markdown pieces the generated pages share: a table, a cell's text, a JSON value in code."""

from __future__ import annotations

import json
from typing import Any, Iterable


def cell(text: str) -> str:
    """Text safe in one table cell: no line breaks, pipes escaped, HTML's angle brackets as entities."""
    text = " ".join(str(text).split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A Markdown table (the `tables` extension) of already-formatted cells."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(value: Any) -> str:
    """A value as it is written in YAML/JSON, in a code span."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return "`" + text.replace("`", "'") + "`"
