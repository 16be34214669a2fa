"""A small picture beside each finding that a picture says faster than the sentence (issue 15).

Plain Vega-Lite dicts from the report's own records (the finding's `numbers`, the statistics and
ablation records), no Altair: each is drawn once at build time as inline SVG (inline_svg.svg),
so it needs no script, prints, and shows with JavaScript off. A finding whose experiment did not
run, or whose numbers are all null, gets no picture. No user text goes into a picture: titles and
legends are the site's own words, pattern and metric names come from reportgen.findings.names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import NamedTuple

from markupsafe import Markup, escape

from reportgen.findings import formatting, names
from reportgen.findings.decoder import SEQ2SEQ_DECODER_PREFIX
from reportgen.report import Ablation, ExampleViews, Finding, HeadStatistic, Report
from reportgen.site.charts import attention_picture, inline_svg
from reportgen.site.export_cache import NO_CACHE, ExportCache

WIDTH, HEIGHT = 240, 140  # px, the whole picture with its axes and legend (a thumbnail)
HEATMAP_WIDTH, HEATMAP_HEIGHT = 170, 150  # px, the cells of a layers x heads thumbnail at most
MIN_EXTENT = 0.001  # the colour scale of a relative change reaches at least this far either side of 0 (0.1%)
MAX_CELL = 30  # px: a small model's cells, so that its thumbnail is about as wide as the others
MAX_TICKS = 12  # axis labels of a layer or head axis, at most
BLUE, ORANGE, RED, GREY = "#0072B2", "#E69F00", "#D55E00", "#999999"  # Okabe-Ito: told apart by colour-blind readers
FONT = 10  # px: the smallest text a reader is asked to read on any screen (issue 28)
_AXIS = {"labelFontSize": FONT, "titleFontSize": FONT, "titleFontWeight": "normal", "grid": False, "tickSize": 3,
         "labelPadding": 2, "titlePadding": 3, "domainColor": "#777", "tickColor": "#777", "labelColor": "#333",
         "titleColor": "#333"}
CONFIG = {"aria": False, "view": {"stroke": None}, "font": "sans-serif", "axis": _AXIS,
          "legend": {"labelFontSize": FONT, "titleFontSize": FONT, "titleFontWeight": "normal", "symbolSize": 30,
                     "padding": 0, "rowPadding": 1, "columnPadding": 6, "offset": 4, "labelLimit": 150},
          "line": {"strokeWidth": 1.5}, "point": {"size": 14, "filled": True, "opacity": 1}}
PERCENT = {"format": "~%"}


class Picture(NamedTuple):
    """A finding's picture as the findings page places it: the SVG and its caption (also its label), and for a
    pattern finding the attention of the head it names (attention_picture), linked to its view."""

    svg: Markup
    caption: Markup
    attention: Markup | None = None


def rendered(report: Report, cache: ExportCache = NO_CACHE,
             views: list[ExampleViews] | None = None) -> dict[str, Picture]:
    """Every finding's picture drawn as inline SVG (or taken from `cache`), by finding id; ids inside each
    SVG carry the finding's. With the examples' `views`, a pattern finding's picture has its head's attention."""
    drawers = {finding.id: drawer.__name__ for finding in report.findings
               if (drawer := _drawer(report, finding.id)) is not None}
    heads = attention_picture.pictures(report.findings, drawers, views) if views else {}
    return {finding_id: Picture(inline_svg.svg(spec, f"rg-pic-{finding_id}", spec["description"], cache),
                                Markup(escape(spec["description"])), heads.get(finding_id))
            for finding_id, spec in pictures(report).items()}


def pictures(report: Report) -> dict[str, dict]:
    """Vega-Lite specs by finding id, for the findings the report has and that have something to draw."""
    out = {}
    for finding in report.findings:
        draw = _drawer(report, finding.id)
        spec = draw(report, finding) if draw else None
        if spec is not None:
            out[finding.id] = spec
    return out


def _drawer(report: Report, finding_id: str) -> Callable[[Report, Finding], dict | None] | None:
    """What draws a finding's picture: a decoder pattern's head strip for a decoder's pattern findings and an
    encoder-decoder's decoder-group ones (ids with SEQ2SEQ_DECODER_PREFIX), else the finding's own drawer."""
    if finding_id == CROSS_FINDING:
        return cross_pattern
    if report.decoder is not None:
        # an encoder-decoder's decoder findings carry the prefix; a decoder's own are the decoder atlas's
        decoder_id = (finding_id.removeprefix(SEQ2SEQ_DECODER_PREFIX) if finding_id.startswith(SEQ2SEQ_DECODER_PREFIX)
                      else None if report.statistics is not None else finding_id)
        if decoder_id in _DECODER_DRAWERS:
            return decoder_pattern
    return _DRAWERS.get(finding_id)


# -- layout -----------------------------------------------------------------------------------------
def _picture(rows: list[dict], layers: list[dict], description: str, **extra) -> dict:
    """A thumbnail of `layers` over `rows`, its axes and legend fitted into WIDTH x HEIGHT."""
    return {"description": description, "width": WIDTH, "height": HEIGHT, "padding": 2,
            "autosize": {"type": "fit", "contains": "padding"}, "data": {"values": rows}, "layer": layers,
            "config": CONFIG, **extra}


def _x_fraction(title: str) -> dict:
    return {"field": "x", "type": "quantitative", "title": title, "axis": {**PERCENT, "tickCount": 4}}


def _y_change(field: str, title: str) -> dict:
    return {"field": field, "type": "quantitative", "title": title, "axis": {**PERCENT, "tickCount": 4}}


def _rule(value: float, colour: str, dash: list[int] | None = None, label: str | None = None) -> list[dict]:
    """A horizontal line at `value` (with its `label` at the left end), on the picture's y scale."""
    y, one = {"datum": value, "type": "quantitative"}, {"values": [{}]}  # one mark, not one per row
    rule = {"data": one, "mark": {"type": "rule", "color": colour, "strokeWidth": 1,
                                  **({"strokeDash": dash} if dash else {})}, "encoding": {"y": y}}
    if label is None:
        return [rule]
    text = {"data": one, "mark": {"type": "text", "align": "left", "baseline": "top", "dx": 2, "dy": 1,
                                  "fontSize": FONT, "color": colour},
            "encoding": {"x": {"value": 0}, "y": y, "text": {"value": label}}}
    return [rule, text]


def _legend_colours(domain: list[str], colours: list[str]) -> dict:
    """A colour channel keyed on `group`, with its legend above the plot."""
    return {"field": "group", "type": "nominal", "sort": domain, "scale": {"domain": domain, "range": colours},
            "legend": {"orient": "top", "direction": "horizontal", "title": None}}


def _ticks(count: int) -> list[int]:
    """At most MAX_TICKS evenly spaced labels of a layer or head axis, so that they never overlap."""
    step = math.ceil(count / MAX_TICKS)
    return list(range(0, count, step))


def _present(rows: list[dict], *fields: str) -> list[dict]:
    """The rows in which every one of `fields` was measured (report.json's null is None)."""
    return [row for row in rows if all(row[field] is not None for field in fields)]


# -- ablation ---------------------------------------------------------------------------------------
def _metric(ablation: Ablation) -> str:
    return names.metric(ablation.task.metric)


def _higher(ablation: Ablation) -> bool:
    """Whether a higher value of the primary metric is better (a loss: lower is)."""
    return ablation.task.higher_is_better[ablation.task.metric]


def _layer_axis(ablation: Ablation, axis: dict) -> dict:
    """A layer axis of an ablation picture; an encoder-decoder's flat layers labelled by their group and their
    layer within it ("enc 0", "cross 1": names.layer_label), every other model's as it was."""
    if not ablation.groups:
        return axis
    labels = [names.layer_label(layer, ablation.groups) for layer in range(ablation.layers)]
    return {**axis, "labelExpr": f"{json.dumps(labels)}[datum.value]"}


def _experiment(report: Report, name: str):
    """An ablation experiment's record, or None where ablation or the experiment was off."""
    return getattr(report.ablation, name) if report.ablation else None


def random_fraction(report: Report, _finding: Finding) -> dict | None:
    """The mean relative change per fraction masked at random, the paired 95% CI as a band, the margin."""
    sweep = _experiment(report, "random_fraction")
    test = sweep.non_inferiority if sweep else None
    if test is None:
        return None
    rows = _present([{"x": fraction, "mean": mean, "low": ci[0], "high": ci[1], "ok": ok}
                     for fraction, mean, ci, ok in zip(sweep.fractions, sweep.relative_mean, test.change_ci,
                                                       test.non_inferior, strict=True)], "mean")
    if not rows:
        return None
    x, y = _x_fraction("heads masked at random"), _y_change("mean", f"change in {_metric(report.ablation)}")
    band = {"mark": {"type": "area", "color": BLUE, "opacity": 0.2}, "transform": [
        {"filter": "isValid(datum.low) && isValid(datum.high)"}], "encoding": {"x": x, "y": {**y, "field": "low"},
                                                                               "y2": {"field": "high"}}}
    points = {"mark": {"type": "point"}, "encoding": {"x": x, "y": y, "color": {
        "condition": {"test": "datum.ok", "value": BLUE}, "value": RED}}}
    margin = formatting.margin(test.margin)
    higher = _higher(report.ablation)
    sign, side = ("\u2212", "below") if higher else ("+", "above")
    layers = [band, *_rule(0.0, GREY), *_rule(-test.margin if higher else test.margin, RED, [3, 2],
                                              f"{sign}{margin} margin"),
              {"mark": {"type": "line", "color": BLUE}, "encoding": {"x": x, "y": y}}, points]
    return _picture(rows, layers, f"Relative change in {_metric(report.ablation)} with heads masked at random: "
                    f"mean over seeds, the paired 95% CI as the band, red points where the CI reaches {side} the "
                    f"{sign}{margin} margin (dashed).")


def layer_halves(report: Report, _finding: Finding) -> dict | None:
    """The mean relative change per fraction with heads masked only in the lower or only in the upper layers."""
    halves = _experiment(report, "layer_halves")
    if halves is None:
        return None
    groups = ["lower layers", "upper layers"]
    rows = _present([{"x": fraction, "mean": mean, "group": group}
                     for group, sweep in zip(groups, (halves.lower, halves.upper), strict=True)
                     for fraction, mean in zip(halves.fractions, sweep.relative_mean, strict=True)], "mean")
    if not rows:
        return None
    x, y = _x_fraction("share of all heads masked"), _y_change("mean", f"change in {_metric(report.ablation)}")
    colour = _legend_colours(groups, [BLUE, ORANGE])
    layers = [*_rule(0.0, GREY), {"mark": {"type": "line", "point": True},
                                   "encoding": {"x": x, "y": y, "color": colour}}]
    within = " of each group (encoder, decoder self-, cross-attention)" if report.ablation.groups else ""
    return _picture(rows, layers, f"Relative change in {_metric(report.ablation)} with heads masked only in the "
                    f"lower or only in the upper layers{within} (mean over seeds).")


def single_heads(report: Report, finding: Finding) -> dict | None:
    """The relative change in the metric with each head masked alone, in percent as every change on the site;
    the heads the sentence names outlined."""
    tests = _experiment(report, "single_heads")
    numbers = finding.numbers
    if tests is None or "worst" not in numbers:
        return None
    named = {(head["layer"], head["head"]) for head in numbers.get("significant") or [numbers["worst"]]}
    if not numbers.get("significant"):  # the sentence names the largest drop and the largest gain
        named.add((numbers["best"]["layer"], numbers["best"]["head"]))
    rows = _present([{"layer": layer, "head": head, "value": value, "named": (layer, head) in named}
                     for layer, values in enumerate(tests.relative) for head, value in enumerate(values)], "value")
    if not rows:
        return None
    extent = max(MIN_EXTENT, *(abs(row["value"]) for row in rows))
    higher = _higher(report.ablation)
    outline = "significant heads" if numbers.get("significant") else (
        "the largest drop and gain" if higher else "the largest rise and fall")
    colours = "red: a loss, blue: a gain" if higher else "red: a rise, worse; blue: a fall, better"
    description = (f"Relative change in {_metric(report.ablation)} with one head masked, per layer and head "
                   f"({colours}); outlined: {outline}.")
    return _head_grid(rows, report.layers, report.heads, (-extent, extent), description, reverse=not higher,
                      ablation=report.ablation)


def _head_grid(rows: list[dict], layers: int, heads: int, domain: tuple[float, float], description: str,
               reverse: bool = False, ablation: Ablation | None = None) -> dict:
    """A layers x heads heatmap of `value` with the rows marked `named` outlined; `reverse`: blue for
    negative values (a change in a metric where lower is better); an encoder-decoder's `ablation` labels
    its flat layers by their group (_layer_axis)."""
    step = max(3, min(HEATMAP_WIDTH // heads, HEATMAP_HEIGHT // layers, MAX_CELL))  # whole pixels: shorter paths
    x = {"field": "head", "type": "ordinal", "title": "head", "axis": {"values": _ticks(heads), "labelAngle": 0}}
    y_axis = {"values": _ticks(layers)}
    y = {"field": "layer", "type": "ordinal", "title": "layer",
         "axis": _layer_axis(ablation, y_axis) if ablation is not None else y_axis}
    colour = {"field": "value", "type": "quantitative", "title": None,  # the caption says what it is
              "scale": {"scheme": "redblue", "domain": list(domain), **({"reverse": True} if reverse else {})},
              "legend": {"orient": "right", "gradientLength": max(40, step * layers), "gradientThickness": 8,
                         "tickCount": 3, "format": ".1~%"}}
    cells = {"mark": {"type": "rect"}, "encoding": {"x": x, "y": y, "color": colour}}
    outline = {"mark": {"type": "rect", "filled": False, "stroke": "black", "strokeWidth": 1.5},
               "transform": [{"filter": "datum.named"}], "encoding": {"x": x, "y": y}}
    return {"description": description, "width": step * heads, "height": step * layers,
            "padding": 2, "data": {"values": rows}, "layer": [cells, outline], "config": CONFIG}


def whole_layers(report: Report, _finding: Finding) -> dict | None:
    """The relative change with each whole layer masked; a star over each significant one."""
    tests = _experiment(report, "whole_layers")
    if tests is None:
        return None
    rows = _present([{"layer": layer, "value": value, "significant": significant}
                     for layer, value, significant in zip(tests.layers, tests.relative, tests.significant,
                                                          strict=True)], "value")
    if not rows:
        return None
    x = {"field": "layer", "type": "ordinal", "title": "layer masked",
         "axis": _layer_axis(report.ablation, {"labelAngle": 0})}
    y = _y_change("value", f"change in {_metric(report.ablation)}")
    worse = "datum.value < 0" if _higher(report.ablation) else "datum.value > 0"
    bars = {"mark": {"type": "bar"}, "encoding": {"x": x, "y": y, "color": {
        "condition": {"test": worse, "value": RED}, "value": BLUE}}}
    stars = {"mark": {"type": "text", "text": "*", "fontSize": 12, "baseline": "middle", "dy": 4},
             "transform": [{"filter": "datum.significant"}], "encoding": {"x": x, "y": y}}
    return _picture(rows, [bars, *_rule(0.0, GREY), stars],
                    f"Relative change in {_metric(report.ablation)} with a whole layer masked; * significant "
                    "(corrected).")


def importance(report: Report, _finding: Finding) -> dict | None:
    """The pruning curve of the importance order against the random orders' mean and range, with the margin."""
    ranked = _experiment(report, "importance")
    if ranked is None:
        return None
    pruning, orders = ranked.pruning, ranked.random_order
    spread = [[value for value in column if value is not None] for column in zip(*orders.relative, strict=True)]
    random_group = f"{orders.orders} random orders"
    groups = ["least important first", random_group]
    rows = [{"x": fraction, "mean": value, "group": groups[0]}
            for fraction, value in zip(pruning.fractions, pruning.relative, strict=True)]
    rows += [{"x": fraction, "mean": mean, "low": min(values, default=None), "high": max(values, default=None),
              "group": random_group}
             for fraction, mean, values in zip(pruning.fractions, orders.relative_mean, spread, strict=True)]
    rows = _present(rows, "mean")
    if not rows:
        return None
    x, y = _x_fraction("heads pruned"), _y_change("mean", f"change in {_metric(report.ablation)}")
    band = {"mark": {"type": "area", "color": GREY, "opacity": 0.25}, "transform": [
        {"filter": "isValid(datum.low) && isValid(datum.high)"}], "encoding": {"x": x, "y": {**y, "field": "low"},
                                                                               "y2": {"field": "high"}}}
    margin = [] if ranked.non_inferiority is None else _rule(
        (-1 if _higher(report.ablation) else 1) * ranked.non_inferiority.margin, RED, [3, 2])
    lines = {"mark": {"type": "line"}, "encoding": {"x": x, "y": y, "color": _legend_colours(groups, [BLUE, GREY])}}
    return _picture(rows, [band, *_rule(0.0, GREY), *margin, lines],
                    f"Relative change in {_metric(report.ablation)} as heads are pruned least important first "
                    "(Michel et al. 2019), against random orders (mean, and their range as the band)"
                    + ("; dashed: the margin." if margin else "."))


# -- patterns ---------------------------------------------------------------------------------------
def _named(numbers: dict, first_only: bool = False) -> set[tuple[int, int]]:
    """The heads a pattern finding's sentence names: the passing heads it lists, else its strongest."""
    heads = numbers.get("heads") or ([numbers["strongest"]] if numbers.get("strongest") else [])
    return {(head["layer"], head["head"]) for head in (heads[:1] if first_only else heads)}


def _head_strip(statistic: HeadStatistic, named: set[tuple[int, int]], threshold: float, null: float | None,
                title: str, description: str) -> dict | None:
    """Every head's mean as a dot in its layer's column, the layer's mean as a bar, the label threshold
    dashed, what a uniform head scores dotted; the heads the sentence names in colour."""
    rows = _present([{"layer": layer, "head": head, "value": value, "named": (layer, head) in named}
                     for layer, values in enumerate(statistic.mean) for head, value in enumerate(values)], "value")
    if not rows:
        return None
    layers = len(statistic.mean)
    x = {"field": "layer", "type": "ordinal", "title": "layer", "axis": {"values": _ticks(layers), "labelAngle": 0}}
    y = {"field": "value", "type": "quantitative", "title": title, "scale": {"domain": [0, 1]},
         "axis": {"tickCount": 3}}
    bars = {"mark": {"type": "bar", "color": "#dddddd"}, "encoding": {"x": x, "y": {**y, "aggregate": "mean"}}}
    # Squares for the heads, in one colour (written once for all of them), circles for the named ones.
    dots = [{"mark": {"type": "point", "shape": "square", "size": 9, "color": BLUE},
             "transform": [{"filter": f"{'' if named_layer else '!'}datum.named"}],
             "encoding": {"x": x, "xOffset": {"field": "head", "type": "ordinal"}, "y": y}}
            for named_layer in (False, True)]
    dots[1]["mark"].update(shape="circle", size=22, color=RED)
    guides = _rule(threshold, "#333", [3, 2]) + (_rule(null, GREY, [1, 2]) if null is not None else [])
    return _picture(rows, [bars, *guides, *dots], description)


def _uniform(numbers: dict) -> float | None:
    return (numbers.get("null") or {}).get("uniform")


def positional(report: Report, finding: Finding) -> dict | None:
    """Previous- or next-token heads: each head's mean weight on that neighbour, by layer."""
    numbers = finding.numbers
    stat = numbers["stat"]
    name = names.name(stat).lower()
    return _head_strip(report.statistics[stat], _named(numbers), numbers["threshold"], _uniform(numbers),
                       f"{name} share", f"Mean attention on the {name} per head (dots) and layer (bars); dashed: "
                       f"Clark et al.'s threshold {numbers['threshold']}, dotted: a uniform head; in red the "
                       "heads the finding names.")


def delimiter(report: Report, finding: Finding) -> dict | None:
    """Delimiter heads: each head's share of attention on [CLS], [SEP] and punctuation, by layer."""
    numbers = finding.numbers
    return _head_strip(report.statistics.delimiter, _named(numbers, first_only=True), numbers["threshold"],
                       _uniform(numbers), "delimiter share",
                       f"Share of attention on {names.name('delimiter')} per head (dots) and mean per layer "
                       f"(bars); dashed: the threshold {formatting.percent(numbers['threshold'])}, dotted: a "
                       "uniform head; in red the strongest head.")


def broad(report: Report, finding: Finding) -> dict | None:
    """Broad heads: each head's effective share, by layer."""
    numbers = finding.numbers
    return _head_strip(report.statistics.effective_share, set(), numbers["threshold"], None, "effective share",
                       f"{names.name('effective_share')} per head (dots) and mean per layer (bars); dashed: the "
                       f"threshold {numbers['threshold']} a broad head reaches.")


def delimiter_contribution(report: Report, _finding: Finding) -> dict | None:
    """The no-op test's heads: the share of weight on [CLS]/[SEP] beside the share of what they pass on."""
    contribution = report.statistics.contribution
    test = contribution.delimiter if contribution else None
    if test is None:
        return None
    rows = _present([{"head": f"L{head.layer} H{head.head}", "weight": head.weight,
                      "contribution": head.contribution} for head in test.heads], "weight", "contribution")
    if not rows:
        return None
    y = {"field": "head", "type": "nominal", "sort": None, "title": None}
    x = {"field": "share", "type": "quantitative", "title": f"share on {names.name('cls_sep')}",
         "scale": {"domain": [0, 1]}, "axis": {"tickCount": 3}}
    link = {"mark": {"type": "rule", "color": GREY}, "encoding": {
        "y": y, "x": {"field": "weight", "type": "quantitative"}, "x2": {"field": "contribution"}}}
    kinds = ["weight", "contribution"]
    dots = {"mark": {"type": "point", "size": 24}, "transform": [{"fold": kinds, "as": ["group", "share"]}],
            "encoding": {"y": y, "x": x, "color": _legend_colours(kinds, [GREY, BLUE])}}
    return _picture(rows, [link, dots], f"Per head with most weight on {names.name('cls_sep')}: the share of its "
                    "attention weight there (grey) and the share of what it passes on from there (blue).")


def decoder_pattern(report: Report, finding: Finding) -> dict | None:
    """A decoder pattern's heads: each head's mean share on the pattern's keys, by layer, beside the uniform
    causal head's."""
    numbers = finding.numbers
    statistic = report.decoder[numbers["stat"]]
    if statistic is None:
        return None
    name = names.name(numbers["stat"]).lower()
    return _head_strip(statistic, _named(numbers), numbers["threshold"], numbers.get("null"), f"{name} share",
                       f"{names.name(numbers['stat'])} score per head (dots) and mean per layer (bars); dashed: the "
                       f"threshold {numbers['threshold']}, dotted: a uniform causal head; in red the heads the "
                       "finding names.")


def cross_pattern(report: Report, finding: Finding) -> dict | None:
    """The cross-attention heads' share on the source's special tokens, by layer, beside a uniform head's."""
    numbers = finding.numbers
    return _head_strip(report.cross.source_special, _named(numbers), numbers["threshold"], numbers.get("null"),
                       "share on special tokens", f"Cross-attention on the source's special tokens per head (dots) and "
                       f"mean per layer (bars); dashed: the threshold {numbers['threshold']}, dotted: a uniform head "
                       "over the source; in red the heads the finding names.")


CROSS_FINDING = "cross-patterns-source-special"
_DECODER_DRAWERS = {"patterns-induction", "patterns-previous-token", "patterns-duplicate-token", "patterns-sink",
                    "patterns-delimiter"}
_DRAWERS: dict[str, Callable[[Report, Finding], dict | None]] = {
    "patterns-previous-token": positional, "patterns-next-token": positional, "patterns-delimiter": delimiter,
    "patterns-delimiter-contribution": delimiter_contribution, "patterns-broad": broad,
    "ablation-single-heads": single_heads, "ablation-random-fraction": random_fraction,
    "ablation-layer-halves": layer_halves, "ablation-whole-layers": whole_layers, "ablation-importance": importance,
}
