"""The patching page's charts (report.Patching): each direction's layers x heads effect, the heads x positions effect,
each cell linking to the head's view on the patched prompt (the example that is the first pair's clean prompt), and
the agreement table's rows. Plain report data in, Vega-Lite dicts and plain rows out."""

from __future__ import annotations

import altair as alt
from markupsafe import Markup

from reportgen.findings import formatting, names
from reportgen.report import Patching, PatchingEffects, PositionEffects, group_layer, head_link
from reportgen.site.charts import vegalite
from reportgen.site.token_text import shown_tokens

# What each direction's cell shows, as a share of the logit difference: what the head restores when patched from the
# clean run, and what is lost when it is patched from the corrupted run (1 - effect), so that in both charts 0 is
# "patching this head moves nothing" and 100% "it moves the whole behaviour".
SHOWN = {"denoising": ("restored", "Share of the logit difference restored, each head patched from the clean run"),
         "noising": ("lost", "Share of the logit difference lost, each head patched from the corrupted run")}


def shown_value(direction: str, effect: float | None) -> float | None:
    if effect is None:
        return None
    return effect if direction == "denoising" else 1.0 - effect


def _link(patching: Patching, layer: int, head: int, groups: list[str] | None, token: int | None = None) -> str | None:
    """The head's view on the patched prompt, with the query at `token` pinned; None without that example. Built
    here from numbers, so marked as markup on purpose (templates print plain strings as inert text)."""
    if patching.example is None:
        return None
    group, within = group_layer(layer, groups)
    return Markup(head_link(patching.example, within, head, token=token, group=group))


def effect_chart(patching: Patching, effects: PatchingEffects, groups: list[str] | None) -> dict:
    """Layers x heads of one direction's effect (diverging around 0, in percent, from -100% to 100%), the interval
    and the corrected p-value in each cell's tooltip."""
    word, title = SHOWN[effects.direction]
    rows = []
    for layer, values in enumerate(effects.effect):
        for head, effect in enumerate(values):
            low, high = (shown_value(effects.direction, effects[end][layer][head]) for end in ("low", "high"))
            row = {"layer": layer, "head": head, "value": shown_value(effects.direction, effect), "effect": effect,
                   "ci_low": min(low, high) if low is not None else None,
                   "ci_high": max(low, high) if high is not None else None,
                   "estimate": shown_value(effects.direction, effects.estimate[layer][head]) if effects.estimate
                   else None, "p_adjusted": effects.p_adjusted[layer][head],
                   "significant": effects.significant[layer][head], "url": _link(patching, layer, head, groups)}
            if groups:
                row["layer_name"] = names.layer_name(layer, groups)
            rows.append(row)
    labels = [names.layer_label(layer, groups) for layer in range(len(effects.effect))] if groups else None
    return vegalite.head_heatmap(rows, title, f"share {word}", {"ci_low": "95% CI low", "ci_high": "95% CI high",
                                                                "estimate": "attribution's estimate",
                                                                "p_adjusted": "p (Holm-corrected)"},
                                 domain=(-1.0, 1.0), percent=True, layer_labels=labels)


def position_chart(patching: Patching, positions: PositionEffects, groups: list[str] | None) -> dict:
    """Heads (rows) x positions of the first pair's clean prompt (columns, its tokens), one direction's effect."""
    word, _ = SHOWN[positions.direction]
    tokens = shown_tokens(positions.tokens)
    head_names = [names.head_name(layer, head, groups) for layer, head in positions.heads]
    rows = [{"row": head_names[index], "position": at, "token": f"{at}: {tokens[at]}",
             "value": shown_value(positions.direction, value), "effect": value,
             "url": _link(patching, layer, head, groups, at)}
            for index, (layer, head) in enumerate(positions.heads) for at, value in enumerate(positions.effect[index])]
    vegalite.change_texts(rows, "value")
    tooltip = [alt.Tooltip("row:N", title="head"), alt.Tooltip("token:N", title="position"),
               alt.Tooltip("value_text:N", title=f"share {word}")]
    mark, link = vegalite.links(rows)
    extent = max([abs(row["value"]) for row in rows if row["value"] is not None] + [1e-9])
    chart = vegalite.spoken(alt.Chart(vegalite.ROWS, title=f"Share of the logit difference {word}, each head "
                                      f"patched at one position ({positions.direction})"), tooltip)
    chart = chart.mark_rect(**mark).encode(
        x=alt.X("token:N", title="position (token of the clean prompt)", sort=alt.EncodingSortField("position")),
        y=alt.Y("row:N", title="head", sort=head_names),
        color=alt.Color("value:Q", title=f"share {word}", legend=alt.Legend(format="%"),
                        scale=alt.Scale(scheme="redblue", domain=[-extent, extent])),  # blue: more, as above
        tooltip=tooltip, **link)
    best = max((row for row in rows if row["value"] is not None), key=lambda row: row["value"], default=None)
    top = f"; the largest, {formatting.change(best['value'])}, is {best['row']} at {best['token']}" if best else ""
    description = (f"Each of {len(head_names)} heads patched at each of {len(tokens)} positions alone "
                   f"({positions.direction}): a heatmap of the share of the logit difference {word}{top}.")
    return vegalite.with_rows(chart.properties(width=alt.Step(vegalite.CELL), height=alt.Step(vegalite.CELL)), rows,
                              description, len(tokens))


def agreement_rows(patching: Patching, groups: list[str] | None) -> list[dict]:
    """One row per direction: Spearman's rho, the overlap of the tops, and the heads where they differ."""
    return [{"direction": a.direction, "spearman": a.spearman, "overlap": a.overlap, "top": a.top,
             "disagree": [{"name": names.head_name(layer, head, groups), "url": _link(patching, layer, head, groups)}
                          for layer, head in a.disagree]}
            for a in patching.agreement]


def significant_rows(patching: Patching, groups: list[str] | None) -> dict[str, list[dict]]:
    """Per direction, the significant heads as the page's table lists them, largest effect first."""
    out = {}
    for effects in patching.directions:
        cells = [(layer, head) for layer, row in enumerate(effects.significant) for head, hit in enumerate(row) if hit]
        cells.sort(key=lambda c: -abs(shown_value(effects.direction, effects.effect[c[0]][c[1]]) or 0.0))
        out[effects.direction] = [_significant_row(patching, effects, layer, head, groups) for layer, head in cells]
    return out


def _significant_row(patching: Patching, effects: PatchingEffects, layer: int, head: int,
                     groups: list[str] | None) -> dict:
    """A head of the page's table, its share as the charts show it: restored (denoising) or lost (noising)."""
    shown = [shown_value(effects.direction, effects[key][layer][head]) for key in ("effect", "low", "high")]
    low, high = sorted(shown[1:])
    return {"name": names.head_name(layer, head, groups), "url": _link(patching, layer, head, groups),
            "share": f"{formatting.percent(shown[0])} {SHOWN[effects.direction][0]}",
            "ci": f"[{formatting.percent(low)}, {formatting.percent(high)}]",
            "p": formatting.p_number(effects.p_adjusted[layer][head], patching.alpha)}


def patching_charts(patching: Patching, groups: list[str] | None) -> dict:
    """Every chart of the patching page, by key: "<direction>" and "positions-<direction>"."""
    charts = {effects.direction: effect_chart(patching, effects, groups) for effects in patching.directions}
    charts.update({f"positions-{p.direction}": position_chart(patching, p, groups) for p in patching.positions})
    return charts
