"""Vega-Lite chart specs built with Altair from report data (plain lists in, plain dicts out)."""

from __future__ import annotations

import altair as alt


def head_heatmap(mean: list[list[float]], std: list[list[float]] | None, title: str,
                 label: str, link: str | None = None) -> dict:
    """A layers x heads heatmap; the tooltip shows the exact value and its spread over examples.

    `link`, when given, is a URL template with {layer} and {head}: clicking a cell opens it.
    """
    rows = []
    for layer, values in enumerate(mean):
        for head, value in enumerate(values):
            row = {"layer": layer, "head": head, "value": value}
            if std is not None:
                row["std"] = std[layer][head]
            if link is not None:
                row["url"] = link.format(layer=layer, head=head)
            rows.append(row)
    tooltip = [alt.Tooltip("layer:O", title="layer"), alt.Tooltip("head:O", title="head"),
               alt.Tooltip("value:Q", title=label, format=".4f")]
    if std is not None:
        tooltip.append(alt.Tooltip("std:Q", title="std over examples", format=".4f"))
    chart = alt.Chart(alt.Data(values=rows), title=title).mark_rect().encode(
        x=alt.X("head:O", title="head"),
        y=alt.Y("layer:O", title="layer"),
        color=alt.Color("value:Q", title=label, scale=alt.Scale(scheme="viridis")),
        tooltip=tooltip,
        **({"href": alt.Href("url:N")} if link is not None else {}),
    ).properties(width=alt.Step(28), height=alt.Step(28))
    return chart.to_dict()
