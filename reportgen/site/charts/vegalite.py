"""Vega-Lite chart specs built with Altair from report data (plain lists in, plain dicts out)."""

from __future__ import annotations

import functools
import json
import textwrap
from collections.abc import Callable

import altair as alt

from reportgen.findings import formatting, names

CELL = 28  # pixels per heatmap cell
MATRIX_LABELS = "labels"  # the field of an attention matrix's cells that holds its tokens' labels (an array)
# Charts are built on this placeholder and get their rows in with_rows: Altair validates inline data
# row by row against the Vega-Lite schema, which took most of a build's time (an attention matrix of
# 64 tokens has 4,096 rows).
ROWS = alt.Data(values=[])


# Text at a size a reader can read on any screen (issue 28): Vega's defaults are 10 px for axis and legend
# labels; a chart is laid out for the width it has (charts.js, `narrow`) and never shrunk, so these are the
# sizes the page shows.
CONFIG = {"axis": {"labelFontSize": 11, "titleFontSize": 12},
          "legend": {"labelFontSize": 11, "titleFontSize": 12},
          "title": {"fontSize": 14}, "text": {"fontSize": 11}}
# How a chart changes where its container is narrower than the chart (charts.js): its legend goes under
# it, a colour bar lying down and a list of colours one per line, and axes of numbers keep fewer ticks.
NARROW_CONFIG = {"legend": {"orient": "bottom", "gradientDirection": "horizontal", "symbolDirection": "vertical",
                            "gradientLength": 180},
                 "axisQuantitative": {"tickCount": 4}}
NARROW_TITLE = 34  # characters per line of a title on a narrow chart (14 px text on a phone's 330 px)
MIN_STEP = 12  # px: the narrowest band that holds a label of 11 px text on a nominal axis
AXIS_ROOM = 110  # px: about what a band axis's labels, its title and padding take beside the bands


def with_rows(chart: alt.TopLevelMixin, rows: list[dict], description: str, bands: int = 0) -> dict:
    """The chart's Vega-Lite dict with `rows` as its data, `description` as its text
    alternative (Vega makes it the SVG's aria-label: what a screen reader says for the chart) and the
    site's text sizes; laid out anew for a narrow container (see narrow), with `bands` labelled columns."""
    # Not checked against the Vega-Lite schema here: that took 10-15% of a small site's build, the same
    # few shapes of spec each time. tests/site/test_chart_specs.py checks every kind of chart, rows included.
    spec = chart.to_dict(validate=False)
    spec["data"] = {"values": rows}
    titles = [layer.pop("title") for layer in spec.get("layer", []) if "title" in layer]
    if titles and "title" not in spec:  # a layered chart's title is the whole chart's, as narrow expects it
        spec["title"] = titles[0]
    spec["description"] = description
    spec["config"] = {**spec.get("config", {}), **CONFIG}
    return narrow(spec, bands * MIN_STEP + AXIS_ROOM if bands else 0)


@functools.cache
def page_defaults() -> dict:
    """What every chart of this module shares: its "$schema", its "config" and its narrow layout's "config". A page
    writes them once (reportgen.site.pages) and charts.js gives them back to each spec that lacks them: written
    in each of the patterns page's 48 charts they took 23 KB of it (issue 47)."""
    shared = with_rows(alt.Chart(ROWS).mark_rect(), [], "")
    return {"$schema": shared["$schema"], "config": shared["config"], "narrow": NARROW_CONFIG}


def narrow(spec: dict, min_width: int = 0) -> dict:
    """How `spec` is laid out where its container is narrower than the chart (charts.js reads it from
    `usermeta`, which Vega-Lite keeps for the page): as wide as the container, never narrower than
    `min_width` (a chart of labelled bands below it scrolls instead of squeezing its labels), its title
    in lines of NARROW_TITLE characters, NARROW_CONFIG over its config."""
    layout: dict = {"minWidth": min_width, "config": NARROW_CONFIG}
    title = spec.get("title")
    if isinstance(title, str) and len(title) > NARROW_TITLE:
        layout["title"] = textwrap.wrap(title, NARROW_TITLE)
    spec["usermeta"] = {**spec.get("usermeta", {}), "narrow": layout}
    return spec


def change_texts(rows: list[dict], relative: str, absolute: str | None = None) -> list[dict]:
    """Writes each row's relative change (`relative`, a fraction) as every page writes a change
    (formatting.change: "-1.2%", and "0.0%", never "-0.0%", for one that rounds to zero) in `<relative>_text`,
    and its absolute change in metric units (`absolute`) in `<absolute>_text`: the tooltips show these
    texts, so a chart says what the findings say."""
    for row in rows:
        row[f"{relative}_text"] = formatting.change(row.get(relative))
        if absolute is not None:
            value = row.get(absolute)
            row[f"{absolute}_text"] = "n/a" if value is None else formatting.signed(value)
    return rows


def _share(value: float | None) -> str:
    return formatting.share(value, 3)


def extremes(rows: list[dict], place: Callable[[dict], str], text: Callable[[float | None], str] = _share,
             field: str = "value") -> str:
    """'highest: <place> (<value>); lowest: ...' over the rows that have a value: the two numbers a reader
    of a chart looks for first, for its text alternative."""
    known = [row for row in rows if row.get(field) is not None]
    if not known:
        return "no values"
    high, low = max(known, key=lambda row: row[field]), min(known, key=lambda row: row[field])
    return f"highest: {place(high)} ({text(high[field])}); lowest: {place(low)} ({text(low[field])})"


def _head(row: dict) -> str:
    """A head in a text alternative: "layer 3 head 1"; an encoder-decoder's row carries its layer's name
    (chartdata: "cross-attention layer 1")."""
    return f"{row.get('layer_name') or 'layer ' + str(row['layer'])} head {row['head']}"


def _layer_encoding(channel: type, title: str, labels: list[str] | None) -> alt.X | alt.Y:
    """The layer axis (`channel`: alt.X or alt.Y) of a chart over flat layers; with an encoder-decoder's
    `labels` (chartdata.layer_labels: "enc 0", "cross 1"), each flat layer is labelled by them. Without, the
    axis is what it always was."""
    if labels is None:
        return channel("layer:O", title=title)
    return channel("layer:O", title=title, axis=alt.Axis(labelExpr=f"{json.dumps(labels)}[datum.value]"))


def _layer_tooltip(labels: list[str] | None) -> alt.Tooltip:
    """The layer in a tooltip: its number, or with an encoder-decoder's `labels` the row's "layer_name"."""
    return alt.Tooltip("layer:O") if labels is None else alt.Tooltip("layer_name:N", title="layer")


def spoken(chart: alt.Chart, tooltip: list[alt.Tooltip]) -> alt.Chart:
    """`chart` with each mark's ARIA label written as its tooltip reads ("change in Spearman: -9.5%; p (corrected):
    ≤ 0.025"): Vega-Lite's own label lists every encoded field by the legend's or axis's format, which gave
    unrounded numbers ("−9.500316%") and the link's address (issue 47). The text is computed in the chart (a
    calculate transform), so the rows a reader downloads stay as they are."""
    parts = []
    for item in tooltip:
        spec = item.to_dict()
        field = json.dumps(spec["field"])
        value = f"format(datum[{field}], {json.dumps(spec['format'])})" if "format" in spec else f"datum[{field}]"
        parts.append(f"{json.dumps(str(spec.get('title', spec['field'])) + ': ')} + "
                     f"(isValid(datum[{field}]) ? {value} : 'n/a')")
    return chart.transform_calculate(aria=" + '; ' + ".join(parts)).encode(description="aria:N")


def p_tooltip(rows: list[dict]) -> alt.Tooltip:
    """A corrected p-value in a tooltip: as the sentences write it, a bound at the permutation test's floor
    ("≤ 0.025", the rows' "p_text", reportgen.site.charts.chartdata), or the number where rows have no text."""
    if rows and all("p_text" in row for row in rows):
        return alt.Tooltip("p_text:N", title="p (corrected)")
    return alt.Tooltip("p_adjusted:Q", title="p (corrected)", format=".4f")


def _grid_size(rows: list[dict]) -> str:
    layers, heads = len({row["layer"] for row in rows}), len({row["head"] for row in rows})
    return f"{len(rows)} heads ({layers} layers x {heads} heads)"


def links(rows: list[dict]) -> tuple[dict, dict]:
    """(mark properties, encoding channels) that make each item of a mark a link to its row's "url".

    Vega-Lite gives every item of a mark with an href channel the pointer cursor, and writes a
    missing url as the text "undefined" (a link to no page). So where only some rows have a url,
    the link and the pointer are conditional on it, and rows without one get neither: nothing
    looks clickable that does nothing. Vega follows an item's href in the same tab (charts.js).
    """
    linked = sum(1 for row in rows if row.get("url"))
    if not linked:
        return {}, {}
    if linked == len(rows):
        return {}, {"href": alt.Href("url:N")}
    test = "isValid(datum.url) && datum.url !== ''"
    return ({"cursor": alt.expr(f"{test} ? 'pointer' : 'default'")},
            {"href": alt.condition(test, alt.Href("url:N"), alt.value(None))})


def head_rows(mean: list[list[float | None]], **fields: list[list]) -> list[dict]:
    """One row per head: {"layer", "head", "value", **fields}; the data behind a heatmap and its CSV."""
    return [{"layer": layer, "head": head, "value": value,
             **{name: grid[layer][head] for name, grid in fields.items()}}
            for layer, values in enumerate(mean) for head, value in enumerate(values)]


def head_heatmap(rows: list[dict], title: str, label: str, tooltips: dict[str, str] | None = None,
                 domain: tuple[float, float] | None = None, percent: bool = False,
                 layer_labels: list[str] | None = None, higher_is_better: bool = True,
                 url: str | None = None) -> dict:
    """A layers x heads heatmap of `rows` (see head_rows); the tooltip shows exact values.

    `tooltips` maps extra row fields to their titles. A row with a "url" field makes its cell a link
    (see links); a chart without any is not clickable and shows no pointer. `url`, a Vega expression of a
    row's address (reportgen.report.head_link_expression), links instead the rows whose "example" is set.
    `domain` fixes the colour scale (reportgen.findings.names.domain: 0-1 for every share of attention, so
    one colour is one value on every pattern); a domain around 0 (lower bound < 0) gets diverging
    colours (red for worse: reversed where `higher_is_better` is False, for changes of a loss). Values
    outside it take the colour of its end. Without one the scale follows the data.
    `percent`: the values are relative changes, shown in percent as every page writes them (change_texts).
    `layer_labels`: an encoder-decoder's label of each flat layer (see _layer_encoding); its rows then carry
    "layer_name".
    """
    if percent:
        change_texts(rows, "value")
        tooltip = [_layer_tooltip(layer_labels), alt.Tooltip("head:O"), alt.Tooltip("value_text:N", title=label)]
    else:
        tooltip = [_layer_tooltip(layer_labels), alt.Tooltip("head:O"),
                   alt.Tooltip("value:Q", title=label, format=".4f")]
    tooltip += [alt.Tooltip(f"{name}:Q", title=title_, format=".4f") for name, title_ in (tooltips or {}).items()]
    scale = alt.Scale(scheme="viridis")
    if domain is not None:
        diverging = {"scheme": "redblue", **({} if higher_is_better else {"reverse": True})}
        scale = alt.Scale(**(diverging if domain[0] < 0 else {"scheme": "viridis"}), domain=list(domain), clamp=True)
    chart = alt.Chart(ROWS, title=title)
    if url is not None:
        chart = chart.transform_calculate(url=f"isValid(datum.example) ? {url} : ''")
        mark, link = links([{"url": row.get("example") is not None} for row in rows])
    else:
        mark, link = links(rows)
    legend = alt.Legend(format="%") if percent else alt.Undefined
    chart = spoken(chart, tooltip).mark_rect(**mark).encode(
        x=alt.X("head:O", title="head"), y=_layer_encoding(alt.Y, "layer", layer_labels),
        color=alt.Color("value:Q", title=label, scale=scale, legend=legend), tooltip=tooltip, **link)
    text = formatting.change if percent else _share
    description = (f"{title}: a heatmap of {label} for each of {_grid_size(rows)}; "
                   f"{extremes(rows, _head, text)}.")
    return with_rows(chart.properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows, description,
                     len({row["head"] for row in rows}))


def head_scatter(points: list[dict], title: str) -> dict:
    """The head-similarity map: one point per head, placed by MDS, coloured by its pattern label in the
    label's colour of the head map (reportgen.findings.names; `label` is the label's name, as names.name gives it)."""
    mark, link = links(points)
    shown = {point["label"] for point in points}
    colours = {names.name(key): colour for key, colour in names.label_colours().items() if names.name(key) in shown}
    scale = alt.Scale(domain=list(colours), range=list(colours.values())) if shown <= set(colours) else alt.Undefined
    tooltip = [alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("label:N", title="pattern")]
    chart = spoken(alt.Chart(ROWS, title=title), tooltip).mark_circle(size=90, opacity=0.85, **mark).encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None),
        color=alt.Color("label:N", title="pattern", scale=scale), tooltip=tooltip, **link)
    counts = {label: sum(1 for point in points if point["label"] == label) for label in sorted(shown)}
    description = (f"{title}: a map of {len(points)} heads, heads with similar attention close together, "
                   "coloured by pattern: " + ", ".join(f"{label} {count}" for label, count in counts.items()) + ".")
    return with_rows(chart.properties(width=420, height=360), points, description)


def attention_matrix(tokens: list[str], matrix: list[list[float]], title: str, link: str | None = None) -> dict:
    """One head's attention on one example: queries down, keys across.

    `link` (the head view of this head on this example, reportgen.report.head_link) makes each cell
    open it with the cell's query token pinned. The address is computed in the chart from the row's
    query index, so a matrix of 64 tokens carries one expression instead of 4,096 addresses.

    The data is one row per query, {"q", "w": its weights}: the chart flattens it into cells and names each
    by its tokens' labels ("3: the"), written once in the chart (a calculate of the array, MATRIX_LABELS), the
    axes ordered by the tokens' indexes. A row per cell with its two labels made the patterns page 999 KB of HTML
    (issue 47); the downloads are a row per cell again (matrix_rows).
    """
    rows = [{"q": q, "w": list(row)} for q, row in enumerate(matrix)]
    order = [f"{i}: {t}" for i, t in enumerate(tokens)]
    tooltip = [alt.Tooltip("query:N"), alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".4f")]
    # the labels' array made once a query row, before the rows are flattened into cells that share it
    chart = alt.Chart(ROWS, title=title).transform_calculate(
        **{MATRIX_LABELS: json.dumps(order, ensure_ascii=False)}).transform_flatten(
        ["w"], as_=["weight"]).transform_window(column="row_number()", groupby=["q"]).transform_calculate(
        k="datum.column - 1", query=f"datum.{MATRIX_LABELS}[datum.q]", key=f"datum.{MATRIX_LABELS}[datum.column - 1]")
    chart = spoken(chart, tooltip)
    link_channels = {}
    if link is not None:
        chart = chart.transform_calculate(url=f"{json.dumps(link + '&token=')} + datum.q")
        link_channels = {"href": alt.Href("url:N")}
    chart = chart.mark_rect().encode(
        x=alt.X("key:N", sort=alt.EncodingSortField("k", op="min"), title="attended token"),
        y=alt.Y("query:N", sort=alt.EncodingSortField("q", op="min"), title="attending token"),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), legend=None),
        tooltip=tooltip, **link_channels,
    )
    cells = [(w, q, k) for q, row in enumerate(matrix) for k, w in enumerate(row) if w is not None]
    top = ""
    if cells:
        weight, q, k = max(cells)
        top = f"; the largest weight, {_share(weight)}, is from token {order[q]} to token {order[k]}"
    description = (f"{title}: a matrix of attention weights over {len(tokens)} tokens, each row a token "
                   f"attending and each column a token attended, darker for more weight{top}.")
    return with_rows(chart.properties(width=alt.Step(14), height=alt.Step(14)), rows, description, len(tokens))


def matrix_rows(spec: dict) -> list[dict] | None:
    """An attention matrix's rows as a table a reader downloads, a row per cell ({"q", "k", "query", "key",
    "weight"}), or None for any other chart: its data is a row per query (attention_matrix), and its labels are
    the array its chart computes once (MATRIX_LABELS)."""
    values = spec.get("data", {}).get("values") or []
    labels = next((step["calculate"] for step in spec.get("transform", []) if step.get("as") == MATRIX_LABELS), None)
    if not values or set(values[0]) != {"q", "w"} or labels is None:
        return None
    order = json.loads(labels)
    return [{"q": row["q"], "k": k, "query": order[row["q"]], "key": order[k], "weight": weight}
            for row in values for k, weight in enumerate(row["w"])]


def delta_heatmap(rows: list[dict], title: str, label: str, higher_is_better: bool = True,
                  layer_labels: list[str] | None = None) -> dict:
    """Layers x heads of a relative change in the metric (diverging colours around 0, in percent, red for
    worse: a fall where higher is better, a rise where lower is better, as for a loss); significant cells starred.

    Rows: {"layer", "head", "value" (relative change), "delta" (absolute change), "significant", ...tooltip
    fields, optional "url"}. The star is drawn on top of its cell, so it carries the cell's tooltip and
    link: hovering or clicking a significant head does what it does on any other head.
    `layer_labels`: an encoder-decoder's label of each flat layer (see _layer_encoding); its rows then carry
    "layer_name".
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    change_texts(rows, "value", "delta")
    tooltip = [_layer_tooltip(layer_labels), alt.Tooltip("head:O"), alt.Tooltip("value_text:N", title=label),
               alt.Tooltip("delta_text:N", title="absolute change"),
               alt.Tooltip("metric:Q", title="metric with the head masked", format=".4f"), p_tooltip(rows),
               alt.Tooltip("significant:N", title="significant")]
    mark, link = links(rows)
    base = spoken(alt.Chart(ROWS, title=title), tooltip).encode(
        x=alt.X("head:O", title="head"), y=_layer_encoding(alt.Y, "layer", layer_labels), tooltip=tooltip, **link)
    cells = base.mark_rect(**mark).encode(
        color=alt.Color("value:Q", title=label, scale=_diverging(extent, higher_is_better),
                        legend=alt.Legend(format="%")))
    stars = base.mark_text(text="*", fontSize=16, baseline="middle", **mark).transform_filter("datum.significant")
    starred = [_head(row) for row in rows if row.get("significant")]
    colours = "red for a loss and blue for a gain" if higher_is_better else "red for a rise (worse) and blue for a fall"
    description = (f"{title}: a heatmap of the {label}, in percent, for each of {_grid_size(rows)}, "
                   f"{colours}; {extremes(rows, _head, formatting.change)}; significant: "
                   f"{', '.join(starred) if starred else 'none'}.")
    return with_rows((cells + stars).properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows, description,
                     len({row["head"] for row in rows}))


def pair_heatmap(rows: list[dict], order: list[str], title: str, label: str, higher_is_better: bool = True) -> dict:
    """One cell per pair of heads (a triangle: each pair once), the heads in `order` on both axes;
    colour = the pair's relative interaction (diverging around 0, in percent; red where the pair together
    is worse than its parts add up to, read in the metric's direction), significant cells starred.

    Rows: {"first", "second" (head labels of `order`), "value" (interaction relative to the unmasked
    metric), "interaction" (absolute), "relative" and "change" (the pair's change, relative and absolute),
    "ci_low", "ci_high" (relative), "p_value", "p_adjusted", "significant", optional "url"}. As in
    delta_heatmap, the star carries its cell's tooltip and link. Many heads get smaller cells, so that every
    pair of 72 heads fits a page width that scrolls rather than one that runs on for metres.
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    step = max(MIN_STEP, min(CELL, 540 // max(len(order), 1)))
    change_texts(change_texts(change_texts(change_texts(rows, "value", "interaction"), "relative", "change"),
                              "ci_low"), "ci_high")
    tooltip = [alt.Tooltip("first:N", title="first head"), alt.Tooltip("second:N", title="second head"),
               alt.Tooltip("relative_text:N", title="change with both masked"),
               alt.Tooltip("change_text:N", title="absolute change with both masked"),
               alt.Tooltip("value_text:N", title=label),
               alt.Tooltip("interaction_text:N", title="absolute interaction"),
               alt.Tooltip("ci_low_text:N", title="95% CI low"),
               alt.Tooltip("ci_high_text:N", title="95% CI high"),
               alt.Tooltip("p_value:Q", title="p", format=".4f"),
               alt.Tooltip("p_adjusted:Q", title="p (corrected)", format=".4f"),
               alt.Tooltip("significant:N", title="significant")]
    mark, link = links(rows)
    base = spoken(alt.Chart(ROWS, title=title), tooltip).encode(
        x=alt.X("first:N", sort=order, title="first head"), y=alt.Y("second:N", sort=order, title="second head"),
        tooltip=tooltip, **link)
    cells = base.mark_rect(**mark).encode(
        color=alt.Color("value:Q", title=label, scale=_diverging(extent, higher_is_better),
                        legend=alt.Legend(format="%")))
    stars = base.mark_text(text="*", fontSize=min(16, step), baseline="middle", **mark).transform_filter(
        "datum.significant")
    description = (f"{title}: a heatmap of the {label}, in percent, of {len(rows)} pairs among {len(order)} "
                   f"heads; {extremes(rows, lambda row: row['first'] + ' with ' + row['second'], formatting.change)}"
                   f"; significant pairs: {sum(1 for row in rows if row.get('significant'))}.")
    return with_rows((cells + stars).properties(width=alt.Step(step), height=alt.Step(step)), rows, description,
                     len(order))


def metric_curves(rows: list[dict], title: str, x_title: str, y_title: str, band: dict | None = None,
                  rules: list[dict] = ()) -> dict:
    """Lines of the mean relative change over seeds, in percent, with a band for the spread, one colour
    per `group`.

    Rows: {"x", "mean", "low", "high", "group", optional "absolute" (the mean change in metric units)}.
    `band` ({"low", "high", "label"}) shades a horizontal band, e.g. the baseline's 95% CI as a relative
    change; `rules` ([{"y", "label"}]) draws labelled horizontal lines, e.g. the non-inferiority margin.
    """
    for row in change_texts(rows, "mean", "absolute"):
        row["range_text"] = formatting.interval([row.get("low"), row.get("high")])
    base = alt.Chart().encode(  # no data of its own: the rows are the layered chart's (with_rows)
        x=alt.X("x:Q", title=x_title, axis=alt.Axis(format="%")),
        color=alt.Color("group:N", title=None))
    y_axis = alt.Axis(format="%")
    spread = base.mark_area(opacity=0.2).encode(y=alt.Y("low:Q", title=y_title, axis=y_axis), y2="high:Q")
    tooltip = [alt.Tooltip("group:N"), alt.Tooltip("x:Q", title=x_title, format=".0%"),
               alt.Tooltip("mean_text:N", title=y_title)]
    if any(row.get("absolute") is not None for row in rows):
        tooltip.append(alt.Tooltip("absolute_text:N", title="absolute change"))
    tooltip.append(alt.Tooltip("range_text:N", title="range"))
    line = spoken(base, tooltip).mark_line(point=True).encode(y=alt.Y("mean:Q", title=y_title, axis=y_axis),
                                                             tooltip=tooltip)
    layers = [spread, line]
    guides = [{"y": 0.0, "label": ""}, *rules]
    if band is not None:
        band = {**band, "range_text": formatting.interval([band["low"], band["high"]])}
        tooltip = [alt.Tooltip("label:N", title="band"), alt.Tooltip("range_text:N", title="range")]
        layers.insert(0, alt.Chart(alt.Data(values=[band])).mark_rect(color="gray", opacity=0.15).encode(
            y="low:Q", y2="high:Q", tooltip=tooltip))
        guides.append({"y": band["high"], "label": band["label"]})
    lines = alt.Chart(alt.Data(values=guides)).encode(y="y:Q")
    layers += [lines.mark_rule(strokeDash=[4, 4], color="gray"),
               lines.mark_text(align="left", baseline="bottom", x=4, dy=-2, color="#555").encode(text="label:N")]
    description = f"{title}: lines of the {y_title}, in percent, against the {x_title}; " + "; ".join(
        _curve_summary(rows, group) for group in dict.fromkeys(row["group"] for row in rows)) + "."
    spec = with_rows(alt.layer(*layers, title=title).properties(width=460, height=280), rows, description)
    for layer in spec["layer"]:  # the layers without data of their own draw the rows
        if layer.get("data") == {"name": "empty"}:
            del layer["data"]
    return spec


def _curve_summary(rows: list[dict], group: str) -> str:
    """A curve in words: its group and where it ends."""
    points = [row for row in rows if row["group"] == group and row.get("mean") is not None]
    if not points:
        return f"{group}: no values"
    last = max(points, key=lambda row: row["x"])
    return f"{group}: {formatting.change(last['mean'])} at {formatting.percent(last['x'])}"


def layer_bars(rows: list[dict], title: str, label: str, higher_is_better: bool = True,
               layer_labels: list[str] | None = None) -> dict:
    """One bar per layer: the relative change in the metric, in percent, with that whole layer masked, red
    where it is worse (a fall, or a rise where lower is better); significant bars starred.

    Rows: {"layer", "value" (relative change), "delta" (absolute change), "p_adjusted", "significant",
    optional "url"}. A row's "url" (the model view at that layer) makes its bar a link; its star carries
    the same link and tooltip, so the star never hides them. `layer_labels`: an encoder-decoder's label of
    each flat layer (see _layer_encoding); its rows then carry "layer_name".
    """
    change_texts(rows, "value", "delta")
    mark, link = links(rows)
    tooltip = [_layer_tooltip(layer_labels), alt.Tooltip("value_text:N", title=label),
               alt.Tooltip("delta_text:N", title="absolute change"), p_tooltip(rows), alt.Tooltip("significant:N")]
    base = spoken(alt.Chart(ROWS, title=title), tooltip).encode(
        x=_layer_encoding(alt.X, "layer masked", layer_labels), tooltip=tooltip, **link)
    bars = base.mark_bar(**mark).encode(
        y=alt.Y("value:Q", title=label, axis=alt.Axis(format="%")),
        color=alt.condition("datum.value < 0" if higher_is_better else "datum.value > 0", alt.value("#c62828"),
                            alt.value("#1565c0")))
    stars = base.mark_text(text="*", dy=-8, fontSize=16, **mark).encode(y="value:Q").transform_filter(
        "datum.significant")
    starred = [row for row in rows if row.get("significant")]
    significant = (", ".join(row["layer_name"] for row in starred) or "none" if layer_labels is not None
                   else _layers([str(row["layer"]) for row in starred]))
    def place(row: dict) -> str:
        return row.get("layer_name") or f"layer {row['layer']}"

    description = (f"{title}: bars of the {label}, in percent, for each of {len(rows)} layers; "
                   f"{extremes(rows, place, formatting.change)}; significant: {significant}.")
    return with_rows((bars + stars).properties(width=alt.Step(40), height=240), rows, description)


def _layers(numbers: list[str]) -> str:
    """'layer 5', 'layers 4, 5' or 'none'."""
    return f"layer{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}" if numbers else "none"


def difference_heatmap(rows: list[dict], title: str, names: tuple[str, str], percent: bool = False,
                       higher_is_better: bool = True) -> dict:
    """Layers x heads of `b - a` between two models (diverging colours around 0; for changes of a
    lower-is-better metric, `higher_is_better` False, red is where b rose more, which is worse).

    Rows: {"layer", "head", "value" (= b - a), "a", "b"}. `percent`: a and b are relative changes (the
    tooltip writes them as every page does) and their difference is in percentage points.
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    if percent:
        change_texts(change_texts(rows, "a"), "b")
        for row in rows:
            row["value_text"] = points(row["value"])
        tooltip = [alt.Tooltip("a_text:N", title=names[0]), alt.Tooltip("b_text:N", title=names[1]),
                   alt.Tooltip("value_text:N", title="difference")]
    else:
        tooltip = [alt.Tooltip("a:Q", title=names[0], format=".4f"), alt.Tooltip("b:Q", title=names[1], format=".4f"),
                   alt.Tooltip("value:Q", title="difference", format="+.4f")]
    tooltip = [alt.Tooltip("layer:O"), alt.Tooltip("head:O"), *tooltip]
    chart = spoken(alt.Chart(ROWS, title=title), tooltip).mark_rect().encode(
        x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"),
        color=alt.Color("value:Q", title=f"{names[1]} - {names[0]}",
                        scale=_diverging(extent, higher_is_better),
                        legend=alt.Legend(format="%") if percent else alt.Undefined),
        tooltip=tooltip)
    text = points if percent else _share
    description = (f"{title}: a heatmap of {names[1]} minus {names[0]} for each of {_grid_size(rows)}; "
                   f"{extremes(rows, _head, text)}.")
    return with_rows(chart.properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows, description,
                     len({row["head"] for row in rows}))


def _diverging(extent: float, higher_is_better: bool = True) -> alt.Scale:
    """Red below 0 and blue above, or the reverse for a lower-is-better metric (a loss rising is red)."""
    return alt.Scale(scheme="redblue", domain=[-extent, extent], **({} if higher_is_better else {"reverse": True}))


def points(value: float | None) -> str:
    """A difference of two relative changes, in percentage points: "+0.4 pp", "0.0 pp" (never "-0.0 pp")."""
    return formatting.change(value).replace("%", " pp")


def grouped_bars(rows: list[dict], title: str, x_title: str, y_title: str) -> dict:
    """Bars of a relative change per x value, in percent, one colour per `group` side by side.
    Rows: {"x", "group", "value" (relative change), optional "delta" (absolute change)}."""
    change_texts(rows, "value", "delta")
    tooltip = [alt.Tooltip("group:N"), alt.Tooltip("x:O", title=x_title), alt.Tooltip("value_text:N", title=y_title)]
    if any(row.get("delta") is not None for row in rows):
        tooltip.append(alt.Tooltip("delta_text:N", title="absolute change"))
    chart = spoken(alt.Chart(ROWS, title=title), tooltip).mark_bar().encode(
        x=alt.X("x:O", title=x_title), xOffset="group:N", y=alt.Y("value:Q", title=y_title, axis=alt.Axis(format="%")),
        color=alt.Color("group:N", title=None), tooltip=tooltip)
    groups = ", ".join(dict.fromkeys(str(row["group"]) for row in rows))
    def place(row: dict) -> str:
        return f"{row['group']}, {x_title} {row['x']}"

    description = (f"{title}: bars of the {y_title}, in percent, per {x_title}, one colour per model ({groups}); "
                   f"{extremes(rows, place, formatting.change)}.")
    return with_rows(chart.properties(width=alt.Step(22), height=240), rows, description)
