"""Markdown pages rendered from Jinja2 templates in site_src/templates.

Templates get plain data (the report dict and small per-page dicts), never tensors.
Every plain string a template prints is made inert by the environment itself (`finalize`,
see `_inert`), so no template can print user text as Markdown or HTML by forgetting a
filter; markup the site builds on purpose (charts, views, anchors, internal links) is
`Markup`, made in Python. `|script_json` makes data safe inside a <script type="application/json">.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from reportgen.htmlsafe import inert_text, script_json


def environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_inert,
    )
    env.filters["script_json"] = lambda data: Markup(script_json(data))
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.filters["num"] = lambda x, digits=4: "undefined" if x is None else f"{x:.{digits}f}"
    return env


def _inert(value):
    """What a template prints, unless it is Markup: numbers as they are, anything else as
    text that neither Markdown nor HTML reads as syntax (`htmlsafe.inert_text`).

    Applied by Jinja to every `{{ ... }}`, before autoescape (which leaves the Markup alone).
    """
    if isinstance(value, Markup) or value is None or isinstance(value, (bool, int, float)):
        return value
    return Markup(inert_text(str(value)))


class Charts:
    """The `chart(id, spec)` function templates call: it places a chart and remembers it for export.

    Every chart gets a stable anchor (its id), a copy-link control and download links for
    PNG, SVG, CSV and JSON, which the site stage writes after rendering (see site.export_charts).
    """

    def __init__(self):
        self.recorded: list[tuple[str, str, dict]] = []  # (page stem, chart id, spec)
        self.page = ""

    def __call__(self, chart_id: str, spec: dict) -> Markup:
        self.recorded.append((self.page, chart_id, spec))
        stem = escape(f"charts/{self.page}--{chart_id}")
        links = " · ".join(f'<a href="{stem}.{ext}" download>{ext.upper()}</a>' for ext in ("png", "svg", "csv", "json"))
        return Markup(
            f'<div class="rg-chart" id="{escape(chart_id)}"></div>\n'
            f'<script type="application/json" data-rg-chart="{escape(chart_id)}">{script_json(spec)}</script>\n'
            f'<p class="rg-downloads">{links} · <button class="rg-copy-link" type="button" '
            f'data-anchor="{escape(chart_id)}">Copy link</button></p>'
        )


def render(env: jinja2.Environment, template: str, target: Path, recorder: Charts | None = None, **context) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if recorder is not None:
        recorder.page = target.stem
    text = env.get_template(template).render(chart=recorder, **context)
    target.write_text(text, encoding="utf-8")
