"""A small picture of the attention of the head a pattern finding names, on the example it names (issue 47).

A published interpretability report shows the head it makes a claim about: beside each pattern finding's
chart of every head, this draws the first head its sentence names (the strongest) on its strongest example,
queries down and keys across, as the example page's heatmap draws it (the square root of the weight as the
cell's darkness, so that small weights still show; views-heatmap.js heatAlpha). The weights are the ones the
page's views carry (their 8-bit encoding, decoded as the browser decodes it: views.group_attention,
attention_encoding.head_decoder), so the picture and the view it links to agree. A longer input is
max-pooled to at most MAX_CELLS cells a side, as the model view's thumbnails are, so that a sharp head stays
sharp. Inline SVG drawn at build time: no script, it prints, and the whole picture is one link to the head view.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from markupsafe import Markup, escape

from reportgen.report import ExampleViews, Finding, head_link
from reportgen.site.attention_encoding import head_decoder
from reportgen.site.charts.value_map_svg import colour
from reportgen.site.htmlsafe import chart_text
from reportgen.site.views import group_attention

SIDE = 150  # px: the cells' square
MAX_CELLS = 48  # cells a side at most: a longer input is max-pooled to this many
LABELLED = 16  # tokens a side at most that get their labels; past it, the first and last positions only
LABEL_ROOM = 64  # px left of and above the cells where their tokens are labelled
INDEX_ROOM = 18  # px where only the first and last positions are
FONT = 10  # px: the smallest text the site asks anyone to read (issue 28)
FAINT = 0.5 / 255  # a weight under the 8-bit step draws nothing
PATTERN_STATS = ("positional", "delimiter", "decoder_pattern", "cross_pattern")  # finding_pictures' drawers


class Attention(NamedTuple):
    """The picture's input: one head's weights [T, S] on one example, with the tokens of both sides."""

    weights: np.ndarray
    queries: list[str]
    keys: list[str]


def named_head(finding: Finding) -> dict | None:
    """The first head a pattern finding's sentence names (its strongest passing head, else its strongest), with
    the example where it shows the pattern most; None where it names none or no example has it."""
    numbers = finding.numbers or {}
    heads = numbers.get("heads") or ([numbers["strongest"]] if numbers.get("strongest") else [])
    head = heads[0] if heads else None
    example = head.get("example") if head is not None else None
    return head if example is not None and example >= 0 else None


def head_attention(views: ExampleViews, layer: int, head: int, group: str | None = None) -> Attention:
    """The head's weights as its example page carries them, and the tokens of its queries and keys."""
    payload = views.payload
    if group in (None, "encoder") or "groups" not in payload:
        encoded, queries, keys = payload["attention"], views.tokens, views.tokens
    else:
        entry = next(entry for entry in payload["groups"] if entry["name"] == group)
        encoded, queries, keys = group_attention(payload, group)[0], entry["queries"], entry["keys"]
    return Attention(head_decoder(encoded)(layer, head), list(queries), list(keys))


def max_pool(weights: np.ndarray, cells: int = MAX_CELLS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pooled, query edges, key edges): each cell the largest weight of its block of queries x keys, at most
    `cells` a side (a cell never smaller than a token); edges[i] is the first token of cell i."""
    rows, cols = weights.shape
    q_edges = np.floor(np.arange(min(rows, cells) + 1) * rows / min(rows, cells)).astype(int)
    k_edges = np.floor(np.arange(min(cols, cells) + 1) * cols / min(cols, cells)).astype(int)
    by_rows = np.maximum.reduceat(weights, q_edges[:-1], axis=0)
    return np.maximum.reduceat(by_rows, k_edges[:-1], axis=1), q_edges, k_edges


def picture(attention: Attention, layer: int, head: int, example: int, group: str | None = None) -> Markup:
    """The head's attention on the example as an <svg> wrapped in one link to its head view there (the link
    named by what the picture shows), and its <figcaption>."""
    pooled, q_edges, k_edges = max_pool(np.nan_to_num(attention.weights))
    rows, cols = pooled.shape
    cell = SIDE / max(rows, cols)
    left, top = (_room(attention.queries), _room(attention.keys))
    parts = [f'<rect x="{left}" y="{top}" width="{cols * cell:g}" height="{rows * cell:g}" fill="#fff" '
             'stroke="#999" stroke-width="0.5"/>']
    for r, c in zip(*np.nonzero(pooled >= FAINT), strict=True):
        fill = colour(math.sqrt(min(1.0, float(pooled[r, c]))), 0.0, 1.0)
        parts.append(f'<path d="M{left + c * cell:.1f} {top + r * cell:.1f}h{cell:.2f}v{cell:.2f}h-{cell:.2f}z" '
                     f'fill="{fill}"/>')
    parts += _labels(attention.queries, q_edges, cell, (left, top), across=False)
    parts += _labels(attention.keys, k_edges, cell, (left, top), across=True)
    width, height = left + cols * cell + 4, top + rows * cell + 4
    pooled = rows < attention.weights.shape[0] or cols < attention.weights.shape[1]
    label = _label(attention, layer, head, example, pooled)
    link = head_link(example, layer, head, group=group)
    where = f"Layer {layer}, head {head} on example {example + 1}, where it shows the pattern most"
    pooled_said = ", each cell the largest weight of a block of tokens" if pooled else ""
    return Markup(f'<a href="{escape(link)}" class="rg-attention-link" aria-label="{escape(label)}">'
                  f'<svg xmlns="http://www.w3.org/2000/svg" class="rg-attention-picture" aria-hidden="true" '
                  f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
                  f'font-family="sans-serif" font-size="{FONT}" fill="currentColor">{"".join(parts)}</svg></a>'
                  f'<figcaption>{escape(where)}: its attention, queries down and keys across, darker for more '
                  f'weight{pooled_said}.<span class="rg-interactive"> Click it for its view.</span></figcaption>')


def _room(tokens: list[str]) -> int:
    return LABEL_ROOM if len(tokens) <= LABELLED else INDEX_ROOM


def _labels(tokens: list[str], edges: np.ndarray, cell: float, corner: tuple[float, float],
            across: bool) -> list[str]:
    """Each token's label where a side has at most LABELLED tokens; past that its first and last positions.
    `corner`: the cells' top left."""
    count, (left, top) = len(tokens), corner
    shown = range(count) if count <= LABELLED else (0, count - 1)
    parts = []
    for index in shown:
        at = int(np.searchsorted(edges, index, side="right")) - 1  # the cell holding the token
        text = escape(_short(f"{index} {chart_text(tokens[index])}" if count <= LABELLED else str(index)))
        if across:  # keys across the top, written upwards
            middle = left + (at + 0.5) * cell + FONT * 0.35
            parts.append(f'<text transform="translate({middle:.1f} {top - 3}) rotate(-90)">{text}</text>')
        else:
            middle = top + (at + 0.5) * cell + FONT * 0.35
            parts.append(f'<text x="{left - 3}" y="{middle:.1f}" text-anchor="end">{text}</text>')
    return parts


def _short(text: str, most: int = 11) -> str:
    return text if len(text) <= most else text[:most - 1] + "\u2026"


def _label(attention: Attention, layer: int, head: int, example: int, pooled: bool) -> str:
    """What the picture shows, for a screen reader and as the link's name: the head, the example, the axes and
    the largest weight with its two tokens."""
    weights = np.nan_to_num(attention.weights)
    q, k = np.unravel_index(int(np.argmax(weights)), weights.shape)
    return (f"Attention of layer {layer}, head {head} on example {example + 1} ({len(attention.queries)} queries "
            f"down, {len(attention.keys)} keys across{', each cell the largest weight of a block' if pooled else ''}"
            f"), darker for more weight; its largest weight, {weights[q, k]:.2f}, is from token {q} "
            f"\u201c{chart_text(attention.queries[q])}\u201d to token {k} \u201c{chart_text(attention.keys[k])}\u201d. "
            "Opens the head view.")


def pictures(findings: list[Finding], drawers: dict[str, str], views: list[ExampleViews]) -> dict[str, Markup]:
    """By finding id, the attention picture of each pattern finding (`drawers`: finding id -> the name of its
    chart's drawer, finding_pictures) that names a head on an example the site has."""
    out = {}
    for finding in findings:
        head = named_head(finding) if drawers.get(finding.id) in PATTERN_STATS else None
        if head is None or head["example"] >= len(views):
            continue
        group = head.get("group")  # an encoder-decoder's decoder and cross findings name their heads' group
        attention = head_attention(views[head["example"]], head["layer"], head["head"], group)
        out[finding.id] = picture(attention, head["layer"], head["head"], head["example"], group)
    return out
