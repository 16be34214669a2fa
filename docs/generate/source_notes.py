"""What a class's source says about each of its fields: the comment on the field's line, or the comment lines just
above it. The report's records document their fields that way (reportgen/report/), so the reference reads them."""

from __future__ import annotations

import ast
import inspect
import textwrap


def field_notes(cls: type) -> dict[str, str]:
    """Field name -> its comment, for the fields `cls` itself declares."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    notes = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            notes[node.target.id] = _comment(lines, node.lineno - 1, node.end_lineno - 1)
    return {name: note for name, note in notes.items() if note}


def _comment(lines: list[str], first: int, last: int) -> str:
    """The trailing comment of the field's last line, else the comment block just above its first line."""
    trailing = _trailing(lines[last])
    if trailing:
        return trailing
    above = []
    row = first - 1
    while row >= 0 and lines[row].strip().startswith("#"):
        above.insert(0, lines[row].strip().lstrip("#").strip())
        row -= 1
    return " ".join(above)


def _trailing(line: str) -> str:
    """A line's `# comment` outside any string literal."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[index + 1:].strip()
    return ""
