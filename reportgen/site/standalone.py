"""One input's attention views with everything inline: a single HTML file (`reportgen view`) or a
notebook output (reportgen.notebook).

The site's example pages load the views' scripts and style from assets/ beside them; a file that is
e-mailed or opened from a download folder, or a notebook output, has nothing beside it, so here the
scripts (views-*.js, in their load order) and views.css go inside, minified (rjsmin, rcssmin: the
comments that explain the code are half its bytes), with the payload of `views.combined_payload`.
The file gets the same kind of Content-Security-Policy as the site, with its one script and one
style allowed by their SHA-256 hashes, so nothing else runs and nothing is requested.

A notebook output carries the scripts too, wrapped so that they run once per page however many
outputs show views (several outputs, or an exported notebook): each output then only starts its own
view (views-start.js `startAll`). Its views never own the notebook's URL hash (data-rgv-hash="off").
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
from pathlib import Path

from reportgen import __version__
from reportgen.site.htmlsafe import script_json
from reportgen.site.sources import site_sources
from reportgen.site.views import (
    FILES_SCRIPT,
    HEATMAP_SCRIPT,
    HEATMAP_STYLE,
    QK_LONG_SCRIPT,
    VIEW_SCRIPTS,
    needs_heatmaps,
    needs_qk_pages,
)

# What a file written by `reportgen view` carries in its <head>: the marker that lets a later
# `reportgen view --out` overwrite it, and nothing that reportgen did not write.
MARKER = '<meta name="generator" content="reportgen view">'
VIEWS = ("head", "model", "qk")
POLICY = ("default-src 'none'; script-src {script}; style-src {style}; img-src data:; "
          "base-uri 'none'; form-action 'none'")
PAGE_STYLE = """
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; }
main { max-width: 70rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 0.5rem; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 0.25rem; }
.rgq-input { margin: 0.25rem 0; overflow-wrap: anywhere; }
.rgq-note, .rgq-foot { color: #57606a; font-size: 0.9rem; margin: 0.25rem 0; }
a { color: #0550ae; }
@media (max-width: 600px) { main { padding: 0.5rem; } h1 { font-size: 1.15rem; } h2 { margin-top: 1rem; } }
"""


@functools.cache
def inline_assets(heatmaps: bool = True, qk_pages: bool = True) -> tuple[str, str]:
    """(script, style): the views' scripts in their load order and views.css, minified, less views-files.js (the
    data is inline: no data files to load); without `heatmaps`, less
    views-heatmap.js and views-heatmap.css, which only inputs past LONG_ROW tokens use (views.needs_heatmaps);
    without `qk_pages`, less views-qk-long.js, which only query/key views past QK_PAGE tokens use
    (views.needs_qk_pages).

    Why minified: the seed pair's file must stay within 15% of bertviz's head view, and the
    scripts' comments are a third of the file (issue 29)."""
    import rcssmin
    import rjsmin

    assets = site_sources()[0] / "assets"
    script = ";\n".join(rjsmin.jsmin((assets / "javascripts" / name).read_text(encoding="utf-8"))
                        for name in VIEW_SCRIPTS if name != FILES_SCRIPT and (heatmaps or name != HEATMAP_SCRIPT)
                        and (qk_pages or name != QK_LONG_SCRIPT))
    style = "\n".join(rcssmin.cssmin((assets / "stylesheets" / name).read_text(encoding="utf-8"))
                      for name in ("views.css", HEATMAP_STYLE) if heatmaps or name != HEATMAP_STYLE)
    if "</" in script or "</" in style:  # would end the element early; the sources never need it
        raise ValueError("a view script or style contains '</', which cannot go inside an HTML element")
    return script, style


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _label(payload: dict) -> str:
    return html.escape(payload.get("name") or payload.get("text") or "example", quote=True)


def page_html(payload: dict, title: str, lines: list[str] = ()) -> str:
    """The single-file page of one input: its head and model views and, where the payload has them, its
    query/key view, with `lines` (plain text: the model, a truncation warning) under the title."""
    script, views_style = inline_assets(needs_heatmaps(payload), needs_qk_pages(payload))
    style = PAGE_STYLE + views_style
    policy = POLICY.format(script=_sha256(script), style=_sha256(style))
    label = _label(payload)
    first = "Source" if "target" in payload else "Text"  # an encoder-decoder reads a source and a target
    text = f'<p class="rgq-input"><strong>{first}:</strong> {html.escape(payload["text"])}</p>'
    if payload.get("pair"):
        text += f'<p class="rgq-input"><strong>Pair:</strong> {html.escape(payload["pair"])}</p>'
    if "target" in payload:
        text += f'<p class="rgq-input"><strong>Target:</strong> {html.escape(payload["target"])}</p>'
    notes = "".join(f'<p class="rgq-note">{html.escape(line)}</p>' for line in lines)
    qk = ""
    if "qk" in payload:
        qk = ('<h2 id="query-key">Query/key view</h2>'
              '<p class="rgq-note">Why a head attends where it does: for one query token, each key\'s '
              'vector, the products with the query\'s and the weight they give after the softmax, beside '
              'the model\'s own weight.</p>'
              f'<div class="rgv" data-rgv="qk" data-rgv-source="rgv-data" data-rgv-hash="off" '
              f'aria-label="query/key view: {label}"><noscript>The views need JavaScript.</noscript></div>')
    contents = ' <a href="#query-key">Query/key view</a> below.' if qk else ""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">{MARKER}'
        f"<title>{html.escape(title)}</title><style>{style}</style></head>\n<body><main>\n"
        f"<h1>{html.escape(title)}</h1>{text}{notes}"
        '<p class="rgq-note" id="views">Each line joins a token on the left to a token it attends to on the right, '
        f'as thick as the weight; the model view shows every head of every layer at once.{contents}</p>\n'
        f'<div class="rgv" data-rgv="views" data-rgv-source="rgv-data" aria-label="attention views: {label}">'
        "<noscript>The views need JavaScript.</noscript></div>\n"
        f"{qk}\n"
        f'<script type="application/json" id="rgv-data">{script_json(payload)}</script>\n'
        f'<p class="rgq-foot">Written by reportgen {html.escape(__version__)} (<code>reportgen view</code>); '
        "this file needs no network and no other file.</p>\n"
        f"</main><script>{script}</script></body></html>\n"
    )


def fragment_html(payload: dict, view: str = "head") -> str:
    """A notebook output of one view ("head", "model" or "qk") of one input, scripts and style inline.

    The scripts are run only by the first output of the page that carries them (or a newer reportgen's);
    later outputs start their own view with the loaded ones."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
    if view == "qk" and "qk" not in payload:
        raise ValueError("this input has no query/key data (attention given without a model run, "
                         "or more tokens than the query/key view takes)")
    script, style = inline_assets()
    build = hashlib.sha256(script.encode("utf-8")).hexdigest()[:16]
    kind = "qk" if view == "qk" else "views"
    start = ' data-rgv-view="model"' if view == "model" else ""
    return (
        f'<div class="rgq-output"><style>{style}</style>'
        f'<div class="rgv" data-rgv="{kind}" data-rgv-hash="off"{start} '
        f'aria-label="attention views: {_label(payload)}">'
        f'<script type="application/json" class="rgv-data">{script_json(payload)}</script>'
        '<p class="rgv-needs-js">The attention view needs JavaScript: run the cell again, or trust the notebook '
        "(JupyterLab: File &gt; Trust Notebook).</p></div>"
        f'<script>if (!window.reportgenViews || window.reportgenViews.build !== "{build}") {{\n{script};\n'
        f'window.reportgenViews.build = "{build}";\n}} else window.reportgenViews.startAll();</script></div>'
    )


def write_page(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file beside it, so that a failed write leaves the old file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
