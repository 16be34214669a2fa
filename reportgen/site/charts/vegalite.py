"""Vega-Lite chart specs built with Altair from report data (plain lists in, plain dicts out)."""

from __future__ import annotations

import json

import altair as alt

from reportgen.findings import names

CELL = 28  # pixels per heatmap cell
# Charts are built on this placeholder and get their rows after Altair has checked the spec:
# Altair validates inline data row by row against the Vega-Lite schema, which took most of a
# build's time (an attention matrix of 64 tokens has 4,096 rows). The spec is checked all the same.
ROWS = alt.Data(values=[])


def with_rows(chart: alt.TopLevelMixin, rows: list[dict]) -> dict:
    """The chart's Vega-Lite dict, validated, with `rows` as its data."""
    spec = chart.to_dict()
    spec["data"] = {"values": rows}
    return spec


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
                 domain: tuple[float, float] | None = None) -> dict:
    """A layers x heads heatmap of `rows` (see head_rows); the tooltip shows exact values.

    `tooltips` maps extra row fields to their titles. A row with a "url" field makes its cell a link
    (see links); a chart without any is not clickable and shows no pointer.
    `domain` fixes the colour scale (reportgen.findings.names.domain: 0-1 for every share of attention, so
    one colour is one value on every pattern); a domain around 0 (lower bound < 0) gets diverging
    colours. Values outside it take the colour of its end. Without one the scale follows the data.
    """
    tooltip = [alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("value:Q", title=label, format=".4f")]
    tooltip += [alt.Tooltip(f"{name}:Q", title=title_, format=".4f") for name, title_ in (tooltips or {}).items()]
    scale = alt.Scale(scheme="viridis")
    if domain is not None:
        scale = alt.Scale(scheme="redblue" if domain[0] < 0 else "viridis", domain=list(domain), clamp=True)
    mark, link = links(rows)
    chart = alt.Chart(ROWS, title=title).mark_rect(**mark).encode(
        x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"),
        color=alt.Color("value:Q", title=label, scale=scale), tooltip=tooltip, **link)
    return with_rows(chart.properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows)


def head_scatter(points: list[dict], title: str) -> dict:
    """The head-similarity map: one point per head, placed by MDS, coloured by its pattern label in the
    label's colour of the head map (reportgen.findings.names; `label` is the label's name, as names.name gives it)."""
    mark, link = links(points)
    shown = {point["label"] for point in points}
    colours = {names.name(key): colour for key, colour in names.label_colours().items() if names.name(key) in shown}
    scale = alt.Scale(domain=list(colours), range=list(colours.values())) if shown <= set(colours) else alt.Undefined
    chart = alt.Chart(ROWS, title=title).mark_circle(size=90, opacity=0.85, **mark).encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None),
        color=alt.Color("label:N", title="pattern", scale=scale),
        tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("label:N", title="pattern")], **link)
    return with_rows(chart.properties(width=420, height=360), points)


def attention_matrix(tokens: list[str], matrix: list[list[float]], title: str, link: str | None = None) -> dict:
    """One head's attention on one example: queries down, keys across.

    `link` (the head view of this head on this example, reportgen.report.head_link) makes each cell
    open it with the cell's query token pinned. The address is computed in the chart from the row's
    query index, so a matrix of 64 tokens carries one expression instead of 4,096 addresses.
    """
    rows = [{"q": q, "k": k, "query": f"{q}: {tokens[q]}", "key": f"{k}: {tokens[k]}", "weight": w}
            for q, row in enumerate(matrix) for k, w in enumerate(row)]
    order = [f"{i}: {t}" for i, t in enumerate(tokens)]
    chart = alt.Chart(ROWS, title=title)
    link_channels = {}
    if link is not None:
        chart = chart.transform_calculate(url=f"{json.dumps(link + '&token=')} + datum.q")
        link_channels = {"href": alt.Href("url:N")}
    chart = chart.mark_rect().encode(
        x=alt.X("key:N", sort=order, title="attended token"),
        y=alt.Y("query:N", sort=order, title="attending token"),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), legend=None),
        tooltip=[alt.Tooltip("query:N"), alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".4f")],
        **link_channels,
    )
    return with_rows(chart.properties(width=alt.Step(14), height=alt.Step(14)), rows)


def delta_heatmap(rows: list[dict], title: str, label: str) -> dict:
    """Layers x heads of a change in the metric (diverging colours around 0); significant cells ringed.

    Rows: {"layer", "head", "value", "significant", ...tooltip fields, optional "url"}. The star is
    drawn on top of its cell, so it carries the cell's tooltip and link: hovering or clicking a
    significant head does what it does on any other head.
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    tooltip = [alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("value:Q", title=label, format="+.4f"),
               alt.Tooltip("metric:Q", title="metric with the head masked", format=".4f"),
               alt.Tooltip("p_adjusted:Q", title="p (corrected)", format=".4f"),
               alt.Tooltip("significant:N", title="significant")]
    mark, link = links(rows)
    base = alt.Chart(ROWS, title=title).encode(
        x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"), tooltip=tooltip, **link)
    cells = base.mark_rect(**mark).encode(
        color=alt.Color("value:Q", title=label, scale=alt.Scale(scheme="redblue", domain=[-extent, extent])))
    stars = base.mark_text(text="*", fontSize=16, baseline="middle", **mark).transform_filter("datum.significant")
    return with_rows((cells + stars).properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows)


def pair_heatmap(rows: list[dict], order: list[str], title: str, label: str) -> dict:
    """One cell per pair of heads (a triangle: each pair once), the heads in `order` on both axes;
    colour = the pair's interaction (diverging around 0), significant cells starred.

    Rows: {"first", "second" (head labels of `order`), "value", "change", "interaction", "ci_low",
    "ci_high", "p_value", "p_adjusted", "significant", optional "url"}. As in delta_heatmap, the star
    carries its cell's tooltip and link. Many heads get smaller cells, so that every pair of 72 heads
    fits a page width that scrolls rather than one that runs on for metres.
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    step = max(10, min(CELL, 540 // max(len(order), 1)))
    tooltip = [alt.Tooltip("first:N", title="first head"), alt.Tooltip("second:N", title="second head"),
               alt.Tooltip("change:Q", title="change with both masked", format="+.4f"),
               alt.Tooltip("interaction:Q", title="interaction", format="+.4f"),
               alt.Tooltip("ci_low:Q", title="95% CI low", format="+.4f"),
               alt.Tooltip("ci_high:Q", title="95% CI high", format="+.4f"),
               alt.Tooltip("value:Q", title=label, format="+.4f"),
               alt.Tooltip("p_value:Q", title="p", format=".4f"),
               alt.Tooltip("p_adjusted:Q", title="p (corrected)", format=".4f"),
               alt.Tooltip("significant:N", title="significant")]
    mark, link = links(rows)
    base = alt.Chart(ROWS, title=title).encode(
        x=alt.X("first:N", sort=order, title="first head"), y=alt.Y("second:N", sort=order, title="second head"),
        tooltip=tooltip, **link)
    cells = base.mark_rect(**mark).encode(
        color=alt.Color("value:Q", title=label, scale=alt.Scale(scheme="redblue", domain=[-extent, extent])))
    stars = base.mark_text(text="*", fontSize=min(16, step), baseline="middle", **mark).transform_filter(
        "datum.significant")
    return with_rows((cells + stars).properties(width=alt.Step(step), height=alt.Step(step)), rows)


def metric_curves(rows: list[dict], title: str, x_title: str, y_title: str, band: dict | None = None,
                  rules: list[dict] = ()) -> dict:
    """Lines of the mean over seeds with a band for the spread, one colour per `group`.

    Rows: {"x", "mean", "low", "high", "group"}. `band` ({"low", "high", "label"}) shades a
    horizontal band, e.g. the baseline's 95% CI as a relative change; `rules` ([{"y", "label"}])
    draws labelled horizontal lines, e.g. the non-inferiority margin.
    """
    base = alt.Chart().encode(  # no data of its own: the rows are the layered chart's (with_rows)
        x=alt.X("x:Q", title=x_title, axis=alt.Axis(format="%")),
        color=alt.Color("group:N", title=None))
    spread = base.mark_area(opacity=0.2).encode(y=alt.Y("low:Q", title=y_title), y2="high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title=y_title),
        tooltip=[alt.Tooltip("group:N"), alt.Tooltip("x:Q", title="fraction masked", format=".0%"),
                 alt.Tooltip("mean:Q", format="+.4f"), alt.Tooltip("low:Q", format="+.4f"),
                 alt.Tooltip("high:Q", format="+.4f")])
    layers = [spread, line]
    guides = [{"y": 0.0, "label": ""}, *rules]
    if band is not None:
        tooltip = [alt.Tooltip("label:N", title="band"), alt.Tooltip("low:Q", format="+.2%"),
                   alt.Tooltip("high:Q", format="+.2%")]
        layers.insert(0, alt.Chart(alt.Data(values=[band])).mark_rect(color="gray", opacity=0.15).encode(
            y="low:Q", y2="high:Q", tooltip=tooltip))
        guides.append({"y": band["high"], "label": band["label"]})
    lines = alt.Chart(alt.Data(values=guides)).encode(y="y:Q")
    layers += [lines.mark_rule(strokeDash=[4, 4], color="gray"),
               lines.mark_text(align="left", baseline="bottom", x=4, dy=-2, color="#555").encode(text="label:N")]
    spec = with_rows(alt.layer(*layers, title=title).properties(width=460, height=280), rows)
    for layer in spec["layer"]:  # the layers without data of their own draw the rows
        if layer.get("data") == {"name": "empty"}:
            del layer["data"]
    return spec


def layer_bars(rows: list[dict], title: str, label: str) -> dict:
    """One bar per layer: the change in the metric with that whole layer masked; significant bars starred.

    A row's "url" (the model view at that layer) makes its bar a link; its star carries the same
    link and tooltip, so the star never hides them.
    """
    mark, link = links(rows)
    base = alt.Chart(ROWS, title=title).encode(
        x=alt.X("layer:O", title="layer masked"),
        tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("value:Q", title=label, format="+.4f"),
                 alt.Tooltip("p_adjusted:Q", title="p (corrected)", format=".4f"),
                 alt.Tooltip("significant:N")], **link)
    bars = base.mark_bar(**mark).encode(
        y=alt.Y("value:Q", title=label),
        color=alt.condition("datum.value < 0", alt.value("#c62828"), alt.value("#1565c0")))
    stars = base.mark_text(text="*", dy=-8, fontSize=16, **mark).encode(y="value:Q").transform_filter(
        "datum.significant")
    return with_rows((bars + stars).properties(width=alt.Step(40), height=240), rows)


def difference_heatmap(rows: list[dict], title: str, names: tuple[str, str]) -> dict:
    """Layers x heads of `b - a` between two models (diverging colours around 0).

    Rows: {"layer", "head", "value" (= b - a), "a", "b"}.
    """
    extent = max([abs(r["value"]) for r in rows if r["value"] is not None] + [1e-9])
    chart = alt.Chart(ROWS, title=title).mark_rect().encode(
        x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"),
        color=alt.Color("value:Q", title=f"{names[1]} - {names[0]}",
                        scale=alt.Scale(scheme="redblue", domain=[-extent, extent])),
        tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"),
                 alt.Tooltip("a:Q", title=names[0], format=".4f"), alt.Tooltip("b:Q", title=names[1], format=".4f"),
                 alt.Tooltip("value:Q", title="difference", format="+.4f")])
    return with_rows(chart.properties(width=alt.Step(CELL), height=alt.Step(CELL)), rows)


def grouped_bars(rows: list[dict], title: str, x_title: str, y_title: str) -> dict:
    """Bars per x value, one colour per `group` side by side. Rows: {"x", "group", "value"}."""
    chart = alt.Chart(ROWS, title=title).mark_bar().encode(
        x=alt.X("x:O", title=x_title), xOffset="group:N", y=alt.Y("value:Q", title=y_title),
        color=alt.Color("group:N", title=None),
        tooltip=[alt.Tooltip("group:N"), alt.Tooltip("x:O", title=x_title), alt.Tooltip("value:Q", format="+.4f")])
    return with_rows(chart.properties(width=alt.Step(22), height=240), rows)
