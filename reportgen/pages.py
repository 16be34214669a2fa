"""Markdown pages rendered from Jinja2 templates in site_src/templates.

Templates get plain data (the report dict and small per-page dicts), never tensors.
Autoescape is on; `|md` makes user text literal in Markdown, `|script_json` makes
data safe inside a <script type="application/json"> element.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from markupsafe import Markup

from reportgen.htmlsafe import markdown_text, script_json


def environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_one_line,
    )
    env.filters["md"] = lambda text: Markup(markdown_text(str(text)))
    env.filters["script_json"] = lambda data: Markup(script_json(data))
    env.filters["thousands"] = lambda n: f"{n:,}"
    return env


def _one_line(value):
    """Every plain string a template prints is folded to one line: a blank line in user
    text would end a raw HTML block and let the rest be read as Markdown."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return " ".join(value.split())
    return value


def render(env: jinja2.Environment, template: str, target: Path, **context) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(env.get_template(template).render(**context), encoding="utf-8")
