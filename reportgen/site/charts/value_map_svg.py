"""A layers x heads map of one number per head, drawn as inline SVG: an example page's attention entropy.

The head map's drawing (reportgen.site.charts.head_map_svg: cells as links with a <title>, the same axes, one Tab
stop with arrow keys and the readout line under it, head-maps.js), coloured on a sequential scale instead of by
label. Drawn at build time rather than by Vega in the browser: it was the only chart of an example page, and the
Vega bundle it needed was 62% of the page's 1.45 MB (issue 47).
"""

from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup, escape

from reportgen.site.charts.head_map_svg import CELL, FONT, LEFT, PITCH, SWATCH, TOP, axes

# ColorBrewer's single-hue "Blues" (Brewer, Hatchard and Harrower 2003), light to dark: more is darker, as in the
# patterns page's attention matrices; the ends are light enough for black text and dark enough for white.
LOW, HIGH = (0xf7, 0xfb, 0xff), (0x08, 0x30, 0x6b)
STEPS = 8  # swatches in the legend's colour bar
NONE = "#d9d9d9"  # a head with no value


def colour(value: float, low: float, high: float) -> str:
    """The scale's colour of `value` between `low` (lightest) and `high` (darkest), as #rrggbb."""
    t = 0.0 if high <= low else min(1.0, max(0.0, (value - low) / (high - low)))
    return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(LOW, HIGH, strict=True))


def value_map(grid: list[list[float | None]], title: str, what: str, link: Callable[[int, int], str],
              unit: str = "", digits: int = 2) -> Markup:
    """`grid` [layer][head] as an <svg> map: each cell a link (`link(layer, head)`) coloured by its value on
    the grid's own range, its tooltip "Layer 1, head 2: 1.23<unit>", a legend bar from the lowest to the
    highest value under it, named `what`. `title` opens its aria-label, which also names the extremes."""
    layers, heads = len(grid), len(grid[0]) if grid else 0
    known = [(value, layer, head) for layer, row in enumerate(grid) for head, value in enumerate(row)
             if value is not None]
    low, high = (min(known)[0], max(known)[0]) if known else (0.0, 0.0)
    parts = []
    for layer, row in enumerate(grid):
        for head, value in enumerate(row):
            fill = NONE if value is None else colour(value, low, high)
            said = "no value" if value is None else f"{value:.{digits}f}{unit}"
            # a path, not a <rect>: 72 cells of an example page, every byte 14 times over
            parts.append(f'<a href="{escape(link(layer, head))}">'
                         f'<path d="M{LEFT + head * PITCH} {TOP + layer * PITCH}h{CELL}v{CELL}h-{CELL}z" '
                         f'fill="{fill}"/><title>{escape(f"Layer {layer}, head {head}: {said}")}</title></a>')
    parts += axes(layers, heads)
    top = TOP + layers * PITCH + 10
    width = max(LEFT + heads * PITCH, LEFT + STEPS * SWATCH * 2 + 120)
    for step in range(STEPS):
        fill = colour(low + (high - low) * step / (STEPS - 1), low, high)
        parts.append(f'<rect x="{LEFT + step * SWATCH * 2}" y="{top}" width="{SWATCH * 2}" height="{SWATCH}" '
                     f'fill="{fill}"/>')
    baseline = top + SWATCH + FONT + 2
    parts.append(f'<text x="{LEFT}" y="{baseline}">{escape(f"{low:.{digits}f}")}</text>')
    parts.append(f'<text x="{LEFT + STEPS * SWATCH * 2}" y="{baseline}" text-anchor="end">'
                 f'{escape(f"{high:.{digits}f}")}</text>')
    parts.append(f'<text x="{LEFT + STEPS * SWATCH * 2 + 8}" y="{top + SWATCH - 2}">{escape(what)}</text>')
    height = baseline + 4
    label = f"{title}: a heatmap of {what} for {layers} layers x {heads} heads"
    if known:
        (most, *where_most), (least, *where_least) = max(known), min(known)
        label += (f"; highest {most:.{digits}f} at layer {where_most[0]} head {where_most[1]}, lowest "
                  f"{least:.{digits}f} at layer {where_least[0]} head {where_least[1]}")
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="rg-head-map-svg rg-value-map" role="group" '
                  f'aria-label="{escape(label)}" viewBox="0 0 {width} {height}" width="100%" font-family="sans-serif" '
                  f'font-size="{FONT}" fill="currentColor">{"".join(parts)}</svg>')
