"""The head map drawn as inline SVG, and as a PNG for link previews (issue 15).

Drawn here in Python rather than by Vega in the browser: the map is the first thing on the findings
page, so it must show at once, with JavaScript off, in print and in a link preview. Each cell is an
<a> holding a <rect> and a <title> (the browser's tooltip, read out by screen readers as the link's
name), so a click opens the head's view with no script. Every text that reaches the SVG goes
through markupsafe.escape; the model name (user text) appears only in the aria-label.

The drawing is made of plain attributes (no CSS, no ids, no fonts to fetch), so the same SVG is
inlined in the page and rendered to PNG by vl-convert's resvg, and several maps can share a page.
"""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup, escape

from reportgen.findings import formatting, names
from reportgen.report import Example, Report
from reportgen.site.charts import png_palette
from reportgen.site.charts.head_map import Cell, HeadMap, example_map, findings_maps
from reportgen.site.export_cache import NO_CACHE, ExportCache, drawn
from reportgen.site.htmlsafe import chart_text

CELL = 24  # side of a cell, in SVG units (px at scale 1)
GAP = 2  # between cells
PITCH = CELL + GAP
LEFT = 46  # room for the layer axis: its title, rotated, and the layer numbers
TOP = 34  # room for the head axis: its title and the head numbers
LINE = 18  # legend line height
FONT = 12
CHAR = 6.6  # an estimate of the average character width at FONT (no font metrics at build time)
MIN_WIDTH = 340  # the legend's lines need about this much
LEGEND_WIDTH = 330  # the legend beside the grid (link previews): its longest line, "masking it alone ..."
SWATCH = 12
PREVIEW_SHAPE = (1200, 630)  # pixels: the 1.91:1 image Open Graph and Twitter's large card show uncropped
PREVIEW_MARGIN = 16
MARK = "#111111"  # the significance outline
def _glyph_colour(fill: str) -> str:
    """Black on a light cell, white on a dark one (WCAG relative luminance, sRGB, threshold 0.4)."""
    channels = [int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return "#000000" if luminance > 0.4 else "#ffffff"


def _label_text(cell: Cell) -> str:
    """The cell's pattern and the value it rests on, e.g. "Same word in the other sentence 0.67"."""
    if cell.label == "mixed":
        return f"{names.name('mixed')}: no pattern passes its threshold"
    name = names.name(cell.label)
    if cell.value is None:
        return name
    if cell.statistic != cell.label:  # broad rests on the effective share: say which number it is
        return f"{name} ({names.name(cell.statistic).lower()} {formatting.share(cell.value)})"
    return f"{name} {formatting.share(cell.value)}"


def tooltip(head_map: HeadMap, cell: Cell) -> str:
    """What hovering a cell shows: its pattern, entropy and single-head masking result. On an example's
    map (one per example page, so every byte counts 14 times over) the masking result, the same on every
    example, is given only where it is significant: the mark shows which cells have one."""
    parts = [f"Layer {cell.layer}, head {cell.head}: {_label_text(cell)}"]
    if cell.entropy is not None:
        parts.append(f"entropy {cell.entropy:.2f} nats")
    masked = cell.masking
    shown = masked is not None and masked.relative is not None
    if shown and (masked.significant or head_map.scope != "example"):
        verdict = ", significant" if masked.significant else ""
        test = formatting.p_text(masked.p_adjusted, masked.p_value, masked.permutations)
        parts.append(f"masking it alone: {formatting.change(masked.relative)} "
                     f"{names.metric(head_map.metric)}{verdict} ({test})")
    return "; ".join(parts)


def _mark(left: float, top: float, sign: int, colour: str) -> str:
    """A significant head: a dark outline, and + or − (the sign of the metric's change) drawn as strokes."""
    centre_x, centre_y, arm = left + CELL / 2, top + CELL / 2, CELL * 0.28
    glyph = f"M{centre_x - arm:g} {centre_y:g}h{2 * arm:g}"
    if sign > 0:
        glyph += f"M{centre_x:g} {centre_y - arm:g}v{2 * arm:g}"
    outline = (f'<rect x="{left + 1:g}" y="{top + 1:g}" width="{CELL - 2}" height="{CELL - 2}" fill="none" '
               f'stroke="{MARK}" stroke-width="2"/>')
    return outline + (f'<path d="{glyph}" fill="none" stroke="{colour}" stroke-width="2.5"/>' if sign else "")


def _cell(drawn: HeadMap, cell: Cell) -> str:
    left, top = LEFT + cell.head * PITCH, TOP + cell.layer * PITCH
    colour = names.colour(cell.label)
    marked = cell.masking is not None and cell.masking.significant
    mark = _mark(left, top, cell.masking.sign, _glyph_colour(colour)) if marked else ""
    return (f'<a href="{escape(cell.link)}">'
            f'<rect x="{left}" y="{top}" width="{CELL}" height="{CELL}" fill="{colour}"/>'
            f'{mark}<title>{escape(tooltip(drawn, cell))}</title></a>')


def _text(left: float, baseline: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{left:g}" y="{baseline:g}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def axes(layers: int, heads: int) -> list[str]:
    """Head numbers above a grid of `layers` x `heads` cells, layer numbers left of it, each axis titled
    (the head map's, and reportgen.site.charts.value_map_svg's)."""
    middle_x = LEFT + (heads * PITCH - GAP) / 2
    middle_y = TOP + (layers * PITCH - GAP) / 2
    parts = [_text(middle_x, 11, "head", "middle"),
             _text(11, middle_y, "layer", "middle", f' transform="rotate(-90 11 {middle_y:g})"')]
    parts += [_text(LEFT + head * PITCH + CELL / 2, TOP - 6, str(head), "middle") for head in range(heads)]
    parts += [_text(LEFT - 6, TOP + layer * PITCH + CELL / 2 + FONT * 0.35, str(layer), "end")
              for layer in range(layers)]
    return parts


def legend_entries(head_map: HeadMap) -> list[tuple[str, str]]:
    """(label key, legend text) for each label on the map, in the table's order ("mixed" last)."""
    present = {cell.label for cell in head_map.cells}
    return [(key, names.name(key) + (" (no pattern)" if key == "mixed" else ""))
            for key in names.label_colours() if key in present]


def _legend(head_map: HeadMap, left: float, top: float, width: float) -> tuple[list[str], float]:
    """Colour swatches flowed into lines `width` wide from (left, top), then the significance marks;
    returns (parts, bottom)."""
    parts, across, line = [], 0.0, top  # the next item's offset in its line, and the line's top
    for key, text in legend_entries(head_map):
        item = SWATCH + 5 + len(text) * CHAR + 14
        if across and across + item > width:
            across, line = 0.0, line + LINE
        parts.append(f'<rect x="{left + across:g}" y="{line:g}" width="{SWATCH}" height="{SWATCH}" '
                     f'fill="{names.colour(key)}"/>')
        parts.append(_text(left + across + SWATCH + 5, line + SWATCH - 2, text))
        across += item
    if head_map.metric is not None:
        metric = names.metric(head_map.metric)
        for sign, verb in ((1, "raises"), (-1, "lowers")):
            line += LINE
            parts.append(f'<rect x="{left:g}" y="{line:g}" width="{SWATCH}" height="{SWATCH}" fill="#ffffff" '
                         f'stroke="{MARK}"/>')
            arm, middle_x, middle_y = SWATCH * 0.3, left + SWATCH / 2, line + SWATCH / 2
            glyph = f"M{middle_x - arm:g} {middle_y:g}h{2 * arm:g}"
            glyph += f"M{middle_x:g} {middle_y - arm:g}v{2 * arm:g}" if sign > 0 else ""
            parts.append(f'<path d="{glyph}" fill="none" stroke="#000000" stroke-width="2"/>')
            parts.append(_text(left + SWATCH + 5, line + SWATCH - 2, f"masking it alone {verb} {metric} significantly"))
    return parts, line + SWATCH


def _grid_size(head_map: HeadMap) -> tuple[float, float]:
    """(right, bottom) edge of the grid with its axes."""
    return LEFT + head_map.heads * PITCH - GAP, TOP + head_map.layers * PITCH - GAP


def _drawing(head_map: HeadMap, legend_beside: bool) -> tuple[str, float, float]:
    """(the map's elements, width, height): the legend under the grid (the page: narrow screens), or
    beside it (the PNG: link previews are wide)."""
    right, bottom = _grid_size(head_map)
    if legend_beside:
        legend, legend_bottom = _legend(head_map, right + 24, TOP, LEGEND_WIDTH)
        width, height = right + 24 + LEGEND_WIDTH, max(bottom, legend_bottom)
    else:
        width = max(right, MIN_WIDTH)
        legend, legend_bottom = _legend(head_map, 0, bottom + 14, width)
        height = legend_bottom
    cells = [_cell(head_map, cell) for cell in head_map.cells]
    body = "".join([*cells, *axes(head_map.layers, head_map.heads), *legend])
    return body, width, height + 2


def _svg(head_map: HeadMap, body: str, view_box: str, extra: str = "") -> Markup:
    where = "on this example" if head_map.scope == "example" else "over the inputs"
    # The model's name is user text: escaped, and without the control characters XML (the PNG's resvg) refuses.
    label = (f"Head map of {chart_text(head_map.model)}: {head_map.layers} layers x {head_map.heads} heads, "
             f"coloured by each head's main pattern {where}")
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="rg-head-map-svg" role="group" '
                  f'aria-label="{escape(label)}" viewBox="{view_box}"{extra} font-family="sans-serif" '
                  f'font-size="{FONT}" fill="currentColor">{body}</svg>')


def svg(head_map: HeadMap) -> Markup:
    """The map as one <svg> element for the page: it scales to its container (viewBox, width 100%;
    head-map.css caps it). role="group", not "img": an img's children are presentational, which would
    hide the cells' links from assistive technology; the aria-label names the map and each link is
    named by its <title>."""
    body, width, height = _drawing(head_map, legend_beside=False)
    return _svg(head_map, body, f"0 0 {width:g} {height:g}", ' width="100%"')


def preview_svg(head_map: HeadMap) -> tuple[str, float]:
    """(the map for a link preview, its width in SVG units): legend beside the grid, centred on a white
    PREVIEW_SHAPE canvas with a margin, the shape link previews show uncropped."""
    body, width, height = _drawing(head_map, legend_beside=True)
    ratio = PREVIEW_SHAPE[0] / PREVIEW_SHAPE[1]
    canvas_width = max(width + 2 * PREVIEW_MARGIN, (height + 2 * PREVIEW_MARGIN) * ratio)
    canvas_height = canvas_width / ratio
    left, top = (canvas_width - width) / 2, (canvas_height - height) / 2
    box = f"{-left:g} {-top:g} {canvas_width:g} {canvas_height:g}"
    background = (f'<rect x="{-left:g}" y="{-top:g}" width="{canvas_width:g}" height="{canvas_height:g}" '
                  f'fill="#ffffff"/>')
    return str(_svg(head_map, background + body, box)), canvas_width


def png(head_map: HeadMap, cache: ExportCache = NO_CACHE) -> bytes:
    """The map as a PREVIEW_SHAPE PNG (1200 x 630 pixels, what Open Graph and Twitter cards show) on white,
    in indexed colour (png_palette: the same pixels in a fraction of the bytes); from `cache`, by its
    drawing, when a build drew it before."""
    import vl_convert

    drawing, width = preview_svg(head_map)
    scale = PREVIEW_SHAPE[0] / width
    inputs = ["head-map-png", drawing, scale]
    return cache.get_bytes(inputs, "png", lambda: drawn(
        inputs, lambda: png_palette.indexed(vl_convert.svg_to_png(drawing, scale=scale))))


# -- the pages ----------------------------------------------------------------------------------------
PNG_NAME = "{page}--head-map.png"  # in docs/charts, beside the chart exports: index--head-map.png, ...


def figure(drawn: HeadMap) -> dict:
    """What a page template prints of a map: its id, model name (user text, escaped by the template),
    the metric its marks are about (names.metric) and the SVG."""
    return {"id": drawn.id, "model": drawn.model, "metric": names.metric(drawn.metric) if drawn.metric else None,
            "svg": svg(drawn)}


def write_png(drawn: HeadMap, charts: Path, page: str, cache: ExportCache = NO_CACHE) -> Path:
    """The map's link-preview PNG, charts/<page>--head-map.png (reportgen.site.previews points og:image at it)."""
    charts.mkdir(parents=True, exist_ok=True)
    target = charts / PNG_NAME.format(page=page)
    target.write_bytes(png(drawn, cache))
    return target


def findings_figures(report: Report, charts: Path, cache: ExportCache = NO_CACHE) -> list[dict]:
    """The findings page's maps (the model's, then the comparison model's); writes the first one's PNG."""
    maps = findings_maps(report)
    write_png(maps[0], charts, "index", cache)
    return [figure(drawn) for drawn in maps]


def example_figure(report: Report, example: Example, charts: Path, cache: ExportCache = NO_CACHE) -> dict:
    """An example page's map (the labels on that example); writes its PNG."""
    drawn = example_map(report, example)
    write_png(drawn, charts, f"example-{example.id}", cache)
    return figure(drawn)
