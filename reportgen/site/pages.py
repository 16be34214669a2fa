"""Markdown pages rendered from Jinja2 templates in site_src/templates.

Templates get plain data (the report dict and small per-page dicts), never tensors.
Every plain string a template prints is made inert by the environment itself (`finalize`,
see `_inert`), so no template can print user text as Markdown or HTML by forgetting a
filter, and it is shielded from the glossary's term links (glossary.shield); markup the site
builds on purpose (charts, views, anchors, internal links) is `Markup`, made in Python, and the
site's own sentences made in Python are `prose` (inert, but open to term links).
`|script_json` makes data safe inside a <script type="application/json">; `|pattern` prints a
pattern's name from reportgen.findings.names, `|metric` a metric's.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jinja2
import yaml
from markupsafe import Markup, escape

from reportgen.findings import formatting, names
from reportgen.report import Link, Span
from reportgen.site import exports
from reportgen.site.glossary import shield
from reportgen.site.htmlsafe import inert_text, script_json


@functools.lru_cache(maxsize=4)
def environment(templates: Path) -> jinja2.Environment:
    """The templates' environment, one per folder and process: Jinja keeps each template it compiled (and compiles
    it again when its file changes), so a second build in one process (`serve --watch`, the Python API, a
    notebook) renders without compiling ~50 templates anew."""
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
    env.filters["fixed"] = formatting.share
    env.filters["metric_value"] = lambda x: "\u2013" if x is None else formatting.metric_value(x)
    env.filters["sentence"] = sentence_markdown
    env.filters["links"] = links_markdown
    env.filters["pattern"] = lambda key: prose(names.name(key))
    # a flat layer (and head) of an ablation as every page writes it: an encoder-decoder's by its group
    env.filters["layer_name"] = lambda layer, groups=None: prose(names.layer_name(layer, groups))
    env.filters["head_name"] = lambda layer, head, groups=None: prose(names.head_name(layer, head, groups))
    env.filters["metric"] = names.metric
    env.filters["prose"] = prose  # a sentence the site made in Python (reportgen.site.story), open to term links
    env.filters["task_type"] = lambda key: names.TASK_TYPES.get(key, key)
    env.filters["task_data"] = names.task_data
    env.filters["plural"] = plural
    env.filters["anchor"] = anchor
    env.filters["change"] = formatting.change
    env.filters["signed"] = lambda x: "n/a" if x is None else formatting.signed(x)
    env.filters["interval"] = formatting.interval
    env.filters["percent"] = formatting.percent
    env.filters["margin"] = formatting.margin
    env.filters["p_text"] = formatting.p_text
    env.filters["duration"] = formatting.duration
    env.filters["experiment"] = lambda key: names.EXPERIMENT_NAMES.get(key, key.replace("_", " "))
    return env


def prose(text: str) -> Markup:
    """One of the site's own sentences (not user text), made inert for Markdown and HTML like any
    printed string, but left open to the glossary's term links."""
    return Markup(inert_text(text))


_ANCHOR = re.compile(r"[a-z0-9][a-z0-9-]*")


def anchor(name: str) -> Markup:
    """An element id the site names (a finding's, a section's, a glossary term's), printed as it is:
    checked to be a plain slug, so it needs no escaping and no glossary shield (which would write it
    with character references, unreadable to anything that compares ids as text)."""
    if not _ANCHOR.fullmatch(str(name)):
        raise ValueError(f"not an anchor: {name!r}")
    return Markup(name)


def plural(count: int, one: str, many: str) -> str:
    """`one` or `many` by count, for the words around a number ("1 head matters", "2 heads matter")."""
    return one if count == 1 else many


def sentence_markdown(spans: list[Span]) -> Markup:
    """A finding's sentence as one line of Markdown: every word inert (as any plain string a
    template prints), the emphasis and the links made here."""
    parts = []
    for span in spans:
        if span.style == "code":
            parts.append(f"<code>{escape(span.text)}</code>")
            continue
        text = _inert_keeping_edges(span.text)
        if span.link is not None:
            text = f"[{text}]({source_link(span.link)})"
        parts.append(f"**{text}**" if span.style == "strong" else text)
    return Markup("".join(parts))


def links_markdown(links: list[Link]) -> Markup:
    return Markup(" · ".join(f"[{inert_text(link.label)}]({source_link(link.href)})" for link in links))


def source_link(href: str) -> str:
    """A link to a built page (example-1.html#...) as Markdown names it: the source page (.md),
    which MkDocs checks and rewrites. Only the site's own pages are linked from findings."""
    page, _, anchor = href.partition("#")
    if "/" in page or ":" in page or not page.endswith(".html"):
        raise ValueError(f"not a page of the site: {href!r}")
    return page.removesuffix(".html") + ".md" + (f"#{anchor}" if anchor else "")


def _inert_keeping_edges(text: str) -> str:
    """inert_text, keeping one space at either end (the pieces of a sentence are joined as they are)."""
    lead = " " if text[:1].isspace() else ""
    trail = " " if text[-1:].isspace() and text.strip() else ""
    return lead + inert_text(text) + trail


def _inert(value):
    """What a template prints, unless it is Markup: numbers as they are, anything else as
    text that neither Markdown nor HTML reads as syntax (`htmlsafe.inert_text`) and in which
    no glossary term is found (`glossary.shield`): it may be user text.

    Applied by Jinja to every `{{ ... }}`, before autoescape (which leaves the Markup alone).
    """
    if isinstance(value, Markup) or value is None or isinstance(value, (bool, int, float)):
        return value
    return Markup(shield(inert_text(str(value))))


BESIDE_FORMATS = ("csv", "json")  # the downloads of a chart drawn beside another (Charts.beside)
PICTURES = ("png", "svg")  # the formats a partial site leaves out (Charts.pictures)


class Charts:
    """The `chart(id, spec)` function templates call: it places a chart and remembers it for export.

    Every chart gets a stable anchor (its id), a copy-link control and download links for
    PNG, SVG, CSV and JSON, which the site stage writes after rendering (see exports.export_charts).
    `chart.grid(id, prefix, specs)` places several charts side by side, each drawn on its own, and offers
    them together as one picture and one table (exports.GRID_FORMATS); `chart.beside(id, [(id, spec), ...])`
    places charts side by side that keep their own ids and downloads.

    `pictures=False` (a partial site, written while the experiments run) offers the data only: drawing the
    pictures took 4 to 5 s of the default build's 10-second first site, which readers wait for; the finished
    site draws them (the drawn pages' charts show the same data).
    """

    def __init__(self, pictures: bool = True):
        self.recorded: list[exports.Recorded] = []
        self.page = ""
        self.pictures = pictures

    def __call__(self, chart_id: str, spec: dict, formats: tuple[str, ...] = exports.FORMATS) -> Markup:
        formats = self.offered(formats)
        self.recorded.append(exports.Recorded(self.page, chart_id, spec, formats))
        return Markup(_placed(chart_id, spec) + self._downloads(chart_id, formats))

    def drawn(self, chart_id: str, spec: dict, picture: Markup, formats: tuple[str, ...] = BESIDE_FORMATS) -> Markup:
        """A chart drawn at build time (`picture`, inline SVG) in place of the Vega one: a page whose only chart
        this is loads no Vega bundle (issue 47). `spec` is still recorded, for its downloads (`formats`)."""
        formats = self.offered(formats)
        self.recorded.append(exports.Recorded(self.page, chart_id, spec, formats))
        return Markup(f'<figure class="rg-chart-drawn" id="{escape(chart_id)}">{picture}</figure>\n'
                      + self._downloads(chart_id, formats))

    def grid(self, grid_id: str, prefix: str, specs: list[dict]) -> Markup:
        """`specs` in a grid (reportgen.css .rg-grid), a cell each, three to a row on a laptop and one on
        a phone, with the ids <prefix>-1, <prefix>-2, ...; the downloads are the whole grid's."""
        formats = self.offered(exports.GRID_FORMATS)
        self.recorded.append(exports.Recorded(self.page, grid_id, exports.side_by_side(specs), formats))
        cells = "".join(f'<div class="rg-grid-cell">\n{_placed(f"{prefix}-{number}", spec)}</div>\n'
                        for number, spec in enumerate(specs, 1))
        return Markup(f'<div class="rg-grid" id="{escape(grid_id)}">\n{cells}</div>\n'
                      + self._downloads(grid_id, formats))

    def beside(self, row_id: str, charts: list[tuple[str, dict]]) -> Markup:
        """(chart id, spec) pairs side by side, each placed and recorded under its own id, two to a row on a
        laptop, one under the other on a phone (the grid's columns fit, auto-fit, the charts it holds).

        The first chart is offered in every format; the others, drawn beside it from the same inputs (a
        statistic's contribution heatmap beside its weight heatmap), as data only (BESIDE_FORMATS): as PNG and
        SVG too they added 430 KB to the default site (issue 13 halved it), and the page draws them."""
        cells = "".join(f'<div class="rg-grid-cell">\n'
                        f'{self(chart_id, spec, exports.FORMATS if index == 0 else BESIDE_FORMATS)}</div>\n'
                        for index, (chart_id, spec) in enumerate(charts))
        return Markup(f'<div class="rg-grid rg-beside" id="{escape(row_id)}">\n{cells}</div>\n')

    def offered(self, formats: tuple[str, ...]) -> tuple[str, ...]:
        """The downloads of a chart: `formats`, less the pictures where this site draws none."""
        return formats if self.pictures else tuple(fmt for fmt in formats if fmt not in PICTURES)

    def _downloads(self, anchor: str, formats: tuple[str, ...]) -> str:
        stem = escape(f"charts/{self.page}--{anchor}")
        links = " · ".join(f'<a href="{stem}.{ext}" download>{ext.upper()}</a>' for ext in formats)
        return (f'<p class="rg-downloads">{links} · <button class="rg-copy-link" type="button" '
                f'data-anchor="{escape(anchor)}">Copy link</button></p>')


def _placed(chart_id: str, spec: dict) -> str:
    """Where charts.js draws a chart: its element and, beside it, its spec as the page carries it (_page_spec)."""
    return (f'<div class="rg-chart" id="{escape(chart_id)}"></div>\n'
            f'<script type="application/json" data-rg-chart="{escape(chart_id)}">{script_json(_page_spec(spec))}'
            '</script>\n')


def _page_spec(spec: dict) -> dict:
    """`spec` less what the page writes once for all its charts (vegalite.page_defaults: charts.js puts it back),
    a whole number written as one ("0", not "0.0": the patterns page's attention matrices are mostly zeros;
    issue 47)."""
    from reportgen.site.charts import vegalite  # Altair: only where a page has a chart

    defaults = vegalite.page_defaults()
    page = {key: value for key, value in spec.items() if key not in ("$schema", "config") or value != defaults[key]}
    narrow = (spec.get("usermeta") or {}).get("narrow")
    if narrow and narrow.get("config") == defaults["narrow"]:
        page["usermeta"] = {**spec["usermeta"], "narrow": {key: value for key, value in narrow.items()
                                                           if key != "config"}}
    if "data" in page:
        page["data"] = _whole_numbers(page["data"])
    return page


def _chart_defaults() -> str:
    from reportgen.site.charts import vegalite

    return (f'\n<script type="application/json" data-rg-chart-defaults>{script_json(vegalite.page_defaults())}'
            '</script>\n')


def _whole_numbers(value):
    """`value` with every whole float an integer (the same number to a chart, two bytes fewer in the page)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    return value


def render(env: jinja2.Environment, template: str, target: Path, recorder: Charts | None = None,
           front_matter: dict | None = None, **context) -> None:
    """Renders `template` into the Markdown page `target`; `front_matter` (the site's own settings, such
    as Material's `hide`) goes before it as YAML, where MkDocs reads a page's metadata."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if recorder is not None:
        recorder.page = target.stem
    text = env.get_template(template).render(chart=recorder, **context)
    if 'data-rg-chart="' in text:  # what its charts share, once (_page_spec)
        text += _chart_defaults()
    if front_matter:
        text = f"---\n{yaml.safe_dump(front_matter, sort_keys=True)}---\n\n{text}"
    target.write_text(text, encoding="utf-8")
