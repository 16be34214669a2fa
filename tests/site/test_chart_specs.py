"""Issue 28, the charts read by anyone on any screen: every chart spec says what it shows (its description,
which Vega makes the SVG's aria-label), asks for text of 10 px or more, carries its own layout for a
narrow screen (charts.js), and writes every change as the site does: relative, in percent, with the
absolute change beside it in the tooltip, and never "-0.0%".

The specs only, built from hand-made rows (no model, no browser): the drawn pages are checked in
tests/site/browser/test_chart_text_browser.py.
"""

from __future__ import annotations

import functools

import pytest

from reportgen.site import exports
from reportgen.site.charts import vegalite
from tests.helpers import spec_items

MIN_FONT = 10  # px


def heads(layers: int = 2, heads_: int = 3, value=lambda layer, head: 0.01 * (layer - head)) -> list[dict]:
    """Rows of a delta heatmap, head (1, 2) significant; the value of head (0, 0) a change that rounds to zero."""
    rows = [{"layer": layer, "head": head, "value": value(layer, head), "delta": value(layer, head) * 0.9,
             "metric": 0.8, "p_adjusted": 0.5, "significant": (layer, head) == (1, 2)}
            for layer in range(layers) for head in range(heads_)]
    rows[0]["value"], rows[0]["delta"] = -0.00004, -0.00003
    return rows


def curves() -> list[dict]:
    return [{"x": x, "mean": -x / 10 - 0.00001, "low": -x / 5, "high": 0.0, "absolute": -x / 12,
             "group": "random heads"} for x in (0.0, 0.25, 0.5)]


@functools.cache  # no test changes them
def every_chart() -> dict[str, dict]:
    """One chart of every kind vegalite.py makes, by name."""
    rows = heads()
    bars = [{"layer": layer, "value": -0.02 * layer - 0.00002, "delta": -0.018 * layer, "p_adjusted": 0.01,
             "significant": layer == 1} for layer in range(3)]
    pairs = [{"first": "L0 H1", "second": "L1 H2", "value": -0.00001, "interaction": -0.00001, "relative": -0.03,
              "change": -0.027, "ci_low": -0.01, "ci_high": 0.008, "p_value": 0.2, "p_adjusted": 0.4,
              "significant": False}]
    points = [dict(row, x=row["layer"], y=row["head"], label="Previous token") for row in rows]
    return {
        "heatmap": vegalite.head_heatmap(vegalite.head_rows([[0.1, 0.9], [0.5, None]]), "Share of attention on X",
                                         "share", domain=(0.0, 1.0)),
        "percent heatmap": vegalite.head_heatmap(heads(), "Change, one head masked", "change", percent=True),
        "delta": vegalite.delta_heatmap(rows, "Change in accuracy with one head masked", "change in accuracy"),
        "pairs": vegalite.pair_heatmap(pairs, ["L0 H1", "L1 H2"], "Interaction of two masked heads", "interaction"),
        "curves": vegalite.metric_curves(curves(), "Change in accuracy, heads masked at random", "heads masked",
                                         "change in accuracy", band={"low": -0.01, "high": 0.01, "label": "CI"},
                                         rules=[{"y": -0.01, "label": "margin -1%"}]),
        "bars": vegalite.layer_bars(bars, "Change in accuracy with a whole layer masked", "change in accuracy"),
        "difference": vegalite.difference_heatmap([dict(row, a=0.01, b=row["value"] + 0.01) for row in heads()],
                                                  "Difference", ("a", "b"), percent=True),
        "grouped": vegalite.grouped_bars([{"x": 0, "group": "a", "value": -0.00001, "delta": -0.00001}],
                                         "Change per masked layer", "layer masked", "change in the metric"),
        "scatter": vegalite.head_scatter(points, "Heads placed by the similarity of their attention"),
        "matrix": vegalite.attention_matrix(["[CLS]", "a", "[SEP]"], [[0.2, 0.7, 0.1]] * 3, "Layer 0, head 1"),
    }


@pytest.mark.parametrize("name", list(every_chart()))
def test_every_chart_is_valid_vega_lite(name):
    """The site's charts skip Altair's schema check (vegalite.with_rows); here each kind is checked, whole:
    its rows, description, sizes and narrow layout too."""
    import altair as alt
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema.core import load_schema

    spec = every_chart()[name]
    assert spec["$schema"] == alt.SCHEMA_URL and spec["data"]["values"]
    validate_jsonschema(spec, load_schema())
    broken = {**spec, "mark" if "mark" in spec else "layer": "not a mark"}  # the check does check
    with pytest.raises(Exception, match="not a mark|is not valid"):
        validate_jsonschema(broken, load_schema())


@pytest.mark.parametrize("name", list(every_chart()))
def test_every_chart_says_what_it_shows(name):
    spec = every_chart()[name]
    title = spec["title"] if isinstance(spec["title"], str) else spec["title"]["text"]
    description = spec["description"]
    assert description.startswith(title + ": ") and len(description) > len(title) + 30, description
    assert description.endswith(".") and "Vega" not in description
    assert "undefined" not in description and "None" not in description and "nan" not in description.lower()


def test_descriptions_give_the_extremes_and_the_grid():
    charts = every_chart()
    assert "for each of 6 heads (2 layers x 3 heads)" in charts["delta"]["description"]
    assert "highest: layer 1 head 0 (+1.0%)" in charts["delta"]["description"]
    assert "lowest: layer 0 head 2 (-2.0%)" in charts["delta"]["description"]
    assert "significant: layer 1 head 2." in charts["delta"]["description"]
    assert "highest: layer 0 head 1 (0.900)" in charts["heatmap"]["description"]  # the null cell is left out
    assert "random heads: -5.0% at 50%" in charts["curves"]["description"]
    assert "over 3 tokens" in charts["matrix"]["description"] and "0.700" in charts["matrix"]["description"]
    assert "Previous token 6" in charts["scatter"]["description"]
    assert charts["bars"]["description"].endswith("lowest: layer 2 (-4.0%); significant: layer 1.")


@pytest.mark.parametrize("name", list(every_chart()))
def test_no_chart_asks_for_text_under_10_px(name):
    spec = every_chart()[name]
    sizes = {key: value for key, value in spec_items(spec) if key.lower().endswith("fontsize")}
    assert sizes and min(sizes.values()) >= MIN_FONT, sizes
    assert spec["config"]["axis"]["labelFontSize"] >= MIN_FONT and spec["config"]["legend"]["labelFontSize"] >= MIN_FONT


@pytest.mark.parametrize("name", list(every_chart()))
def test_every_chart_has_a_narrow_layout(name):
    spec = every_chart()[name]
    layout = spec["usermeta"]["narrow"]
    assert layout["config"]["legend"]["orient"] == "bottom"
    assert isinstance(layout["minWidth"], int) and layout["minWidth"] >= 0
    title = spec["title"]
    if len(title) > vegalite.NARROW_TITLE:
        assert " ".join(layout["title"]) == title and max(map(len, layout["title"])) <= vegalite.NARROW_TITLE


def test_a_chart_of_labelled_bands_never_squeezes_its_labels():
    matrix = vegalite.attention_matrix([f"t{i}" for i in range(40)], [[1 / 40] * 40] * 40, "Layer 0, head 1")
    assert matrix["usermeta"]["narrow"]["minWidth"] >= 40 * vegalite.MIN_STEP


def tooltips(spec: dict) -> list[dict]:
    return [tip for key, value in spec_items(spec) if key == "tooltip" and isinstance(value, list) for tip in value]


@pytest.mark.parametrize("name", ["delta", "pairs", "curves", "bars", "grouped", "percent heatmap", "difference"])
def test_changes_are_relative_percent_with_the_absolute_beside_and_never_minus_zero(name):
    spec = every_chart()[name]
    text = str(spec)
    assert "-0.0%" not in text and "\u22120.0%" not in text and "-0.0 pp" not in text
    tips = tooltips(spec)
    # Changes are written in Python by formatting.change: no signed d3 format, which prints "-0.0%".
    assert not [tip for tip in tips if "%" in tip.get("format", "") and "+" in tip["format"]], tips
    assert not [tip for tip in tips if "%" in tip.get("format", "") and tip["field"] != "x"], tips
    rows = spec["data"]["values"]
    texts = [value for row in rows for key, value in row.items() if key.endswith("_text")]
    assert texts and all(("%" in value or "pp" in value or value == "n/a" or value[0] in "+-0")
                         for value in texts), texts
    assert "0.0%" in texts or "0.0 pp" in texts  # the change that rounds to zero
    axes = [value for key, value in spec_items(spec) if key in ("axis", "legend") and isinstance(value, dict)]
    assert any(axis.get("format") == "%" for axis in axes), name


def test_single_head_tooltips_give_the_relative_change_then_the_absolute():
    spec = every_chart()["delta"]
    titles = [tip.get("title") for tip in tooltips(spec)]
    assert titles.index("change in accuracy") < titles.index("absolute change")
    row = next(row for row in spec["data"]["values"] if (row["layer"], row["head"]) == (1, 0))
    assert (row["value_text"], row["delta_text"]) == ("+1.0%", "+0.009")
    assert spec["data"]["values"][0]["value_text"] == "0.0%" and spec["data"]["values"][0]["delta_text"] == "0.000"


def test_grids_exported_side_by_side_keep_no_page_layout():
    specs = [vegalite.attention_matrix(["a", "b"], [[0.5, 0.5]] * 2, f"Layer 0, head {i}") for i in range(2)]
    combined = exports.side_by_side(specs)
    assert all("usermeta" not in part for part in combined["hconcat"])
    assert [part["description"] for part in combined["hconcat"]] == [spec["description"] for spec in specs]


@pytest.mark.slow  # vl-convert's start (seconds in a fresh process)
def test_a_picture_is_drawn_without_links_tooltips_or_labels_and_the_same_pixels():
    """exports.pixels_only: what Vega makes per mark for a page (links, tooltips, ARIA labels) is left out of a
    picture's drawing, which cannot hold them, and the PNG is byte for byte the full spec's."""
    import json

    import vl_convert

    link = "example-1.md#head=0.1"
    matrices = [vegalite.attention_matrix(["[CLS]", "a", "b", "[SEP]"], [[0.1, 0.2, 0.3, 0.4]] * 4,
                                          f"Layer 0, head {i}", link) for i in range(2)]
    rows = [dict(row, url=link) for row in heads()]
    for spec in (exports.side_by_side(matrices), vegalite.delta_heatmap(rows, "Change", "change")):
        assert '"href"' in json.dumps(spec) and '"tooltip"' in json.dumps(spec)
        drawn = exports.pixels_only(spec)
        assert '"href"' not in json.dumps(drawn) and '"tooltip"' not in json.dumps(drawn)
        assert drawn["config"]["aria"] is False
        assert vl_convert.vegalite_to_png(drawn) == vl_convert.vegalite_to_png(spec)



@pytest.mark.parametrize("higher", [True, False])
def test_every_diverging_chart_of_a_change_is_red_where_the_metric_got_worse(higher):
    """redblue runs red (low) to blue (high): reversed for a lower-is-better metric, so a loss rising is red
    in the single-head, pair-interaction, compared and difference heatmaps alike (issue 47)."""
    pair = {"first": "L0 H1", "second": "L1 H2", "value": 0.01, "interaction": 0.07, "relative": 0.03,
            "change": 0.2, "ci_low": -0.01, "ci_high": 0.02, "p_value": 0.2, "p_adjusted": 0.4, "significant": False}
    specs = {
        "delta": vegalite.delta_heatmap(heads(), "Change in loss", "change", higher_is_better=higher),
        "pairs": vegalite.pair_heatmap([pair], ["L0 H1", "L1 H2"], "Interaction", "interaction", higher),
        "compared": vegalite.head_heatmap(heads(), "Change, one head masked", "change", domain=(-0.1, 0.1),
                                          percent=True, higher_is_better=higher),
        "difference": vegalite.difference_heatmap([dict(row, a=0.01, b=row["value"] + 0.01) for row in heads()],
                                                  "Difference", ("a", "b"), percent=True, higher_is_better=higher),
    }
    for name, spec in specs.items():
        scales = [value for key, value in spec_items(spec) if key == "scale" and value.get("scheme") == "redblue"]
        assert scales, name
        assert all(scale.get("reverse", False) is (not higher) for scale in scales), (name, scales)


def test_a_p_value_at_the_permutation_floor_is_a_bound_in_the_tooltip_and_the_table():
    from reportgen.site.charts.chartdata import p_fields

    # 199 permutations: the floor is 1/200; Holm over 72 heads took it to 0.36
    assert p_fields(0.36, 1 / 200, 199, 0.05) == {"p_text": "≤ 0.36", "p_at_floor": True}
    assert p_fields(0.0498, 0.0011, 999, 0.05) == {"p_text": "0.0498", "p_at_floor": False}
    assert p_fields(None, None, 0, 0.05) == {"p_text": "undefined", "p_at_floor": False}
    rows = [dict(row, p_adjusted=0.01, p_text="≤ 0.01", p_at_floor=True) for row in heads()]
    spec = vegalite.delta_heatmap(rows, "Change in accuracy", "change")
    titles = {item.get("title"): item.get("field") for item in tooltips(spec)}
    assert titles["p (corrected)"] == "p_text"


@pytest.mark.parametrize("name", list(every_chart()))
def test_every_marks_aria_label_is_its_tooltip_text(name):
    """Issue 47: Vega-Lite's own ARIA label of a mark read every encoded field by its axis format ("−9.500316%")
    and the link's address; each chart computes its marks' labels from the tooltip's fields instead."""
    spec = every_chart()[name]
    described = [value for key, value in spec_items(spec) if key == "description" and isinstance(value, dict)]
    calculated = [value for key, value in spec_items(spec) if key == "calculate" and "'; '" in str(value)]
    assert described and all(item.get("field") == "aria" for item in described), name
    assert calculated and "url" not in calculated[0], name


@pytest.mark.parametrize(("mode", "group"), [(None, None), ("contributions", "decoder")])
def test_a_heatmap_computes_each_cells_link_as_head_link_writes_it(mode, group):
    """Issue 47: a pattern heatmap carried one address per head (87 KB of the patterns page); its cells now
    compute it from the row's example, layer and head (head_link_expression). Drawn by Vega itself, each link
    is head_link's, and a head with no strongest example (-1) is no link."""
    import html
    import json
    import re

    import vl_convert

    from reportgen.report import head_link
    from reportgen.site.charts import chartdata

    examples = [[3, -1], [0, 12]]
    rows, url = chartdata.strongest_links(vegalite.head_rows([[0.1, 0.9], [0.5, 0.2]]), examples, mode, group)
    spec = vegalite.head_heatmap(rows, "Share of attention on X", "share", domain=(0.0, 1.0), url=url)
    assert "url" not in json.dumps(spec["data"])
    drawn = re.findall(r'href="[^"]*?(example-[^"]+)"', vl_convert.vegalite_to_svg(spec))
    expected = [head_link(example, layer, head, mode=mode, group=group)
                for layer, row in enumerate(examples) for head, example in enumerate(row) if example >= 0]
    assert sorted(html.unescape(link) for link in drawn) == sorted(expected)

