"""Chart clicks land where they say: a cell that looks clickable opens its head (or layer) view in the
same tab, a mark drawn over a cell (the significance star) neither hides its tooltip nor swallows its
click, and nothing shows the pointer cursor where a click does nothing.

The spec checks compile each chart to Vega with vl-convert (as the site's exports are) and need no
browser; the rest click the charts of the default site in Chromium (slow).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reportgen.report import head_link_expression
from reportgen.site.charts import chartdata, vegalite
from tests.helpers import VIEWPORTS, check_report, next_frames, wait_until

CHART_SCRIPT = re.compile(r'<script type="application/json" data-rg-chart="([^"]+)">(.*?)</script>', re.S)


# -- the specs, compiled to Vega ------------------------------------------------------------------

def vega_marks(spec: dict) -> list[dict]:
    """The data marks of a chart as Vega draws them (group marks opened), compiled by vl-convert."""
    import vl_convert

    found: list[dict] = []

    def walk(marks: list[dict]) -> None:
        for mark in marks:
            if mark["type"] == "group":
                walk(mark.get("marks", []))
            else:
                found.append(mark)

    walk(vl_convert.vegalite_to_vega(spec)["marks"])
    return found


def channel(mark: dict, name: str):
    """A mark's encoding of one channel (Vega-Lite writes them in the update set), or None."""
    encode = mark.get("encode", {})
    return next((encode[block][name] for block in ("update", "enter") if name in encode.get(block, {})), None)


def linked_marks(spec: dict) -> int:
    """Asserts that the chart's pointer and its links agree, and returns how many of its marks link.

    A mark shows the pointer exactly where it links: a constant pointer goes with a link on every
    item; a pointer by expression with a link under the same test; no link, no pointer. Where one
    mark of a chart links, all do, so a mark drawn over another (a star on its cell) never hides it.
    """
    marks = vega_marks(spec)
    linked = 0
    for mark in marks:
        cursor, href = channel(mark, "cursor"), channel(mark, "href")
        where = (spec.get("title"), mark.get("name"), mark["type"])
        if href is None:
            assert cursor is None, where
            continue
        linked += 1
        if isinstance(href, list):  # a link only where the row has a url, else none
            test = href[0]["test"]
            assert href[-1] == {"value": None} and test in cursor["signal"] and "'default'" in cursor["signal"], where
        else:
            assert cursor == {"value": "pointer"}, where
    assert linked in (0, len(marks)), (spec.get("title"), [(m.get("name"), channel(m, "href")) for m in marks])
    return linked


def head_rows_with(urls: str) -> list[dict]:
    """A 2 x 3 grid of delta-heatmap rows, head (1, 2) significant; urls 'all', 'some' (layer 0) or 'none'."""
    rows = [{"layer": layer, "head": head, "value": 0.01 * (layer - head), "metric": 0.9, "p_adjusted": 0.5,
             "significant": (layer, head) == (1, 2)} for layer in range(2) for head in range(3)]
    for row in rows:
        if urls == "all" or (urls == "some" and row["layer"] == 0):
            row["url"] = f"example-1.html#view=head&layer={row['layer']}&head={row['head']}"
    return rows


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
@pytest.mark.parametrize("urls", ["all", "some", "none"])
def test_every_chart_kind_points_only_where_it_links(urls):
    rows = head_rows_with(urls)
    bars = [{"layer": layer, "value": -0.1, "p_adjusted": 0.01, "significant": True,
             **({"url": f"example-1.html#view=model&layer={layer}"} if urls == "all" else {})} for layer in range(2)]
    points = [dict(row, x=row["layer"], y=row["head"], label="previous token") for row in rows]
    specs = {"heatmap": vegalite.head_heatmap(rows, "heatmap", "value"),
             "delta": vegalite.delta_heatmap(rows, "delta", "change"),
             "scatter": vegalite.head_scatter(points, "scatter"),
             "bars": vegalite.layer_bars(bars, "bars", "change") if urls != "some" else None}
    expected = {"all": 1, "some": 1, "none": 0}[urls]
    for name, spec in specs.items():
        if spec is not None:
            assert bool(linked_marks(spec)) == bool(expected), name
    # The single-heads chart draws its star over the cell: both link (and show the same tooltip).
    delta = vega_marks(specs["delta"])
    assert [mark["type"] for mark in delta] == ["rect", "text"]
    assert channel(delta[0], "tooltip") == channel(delta[1], "tooltip") is not None
    assert channel(delta[0], "href") == channel(delta[1], "href")


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_charts_without_links_show_no_pointer():
    rows = head_rows_with("none")
    curves = [{"x": 0.1, "mean": -0.01, "low": -0.02, "high": 0.0, "group": "random heads"}]
    specs = [vegalite.head_heatmap(rows, "t", "v"), vegalite.difference_heatmap(
        [dict(row, a=0.1, b=0.2) for row in rows], "t", ("a", "b")),
             vegalite.grouped_bars([{"x": 0, "group": "a", "value": 0.1}], "t", "x", "y"),
             vegalite.metric_curves(curves, "t", "x", "y", band={"low": -0.01, "high": 0.01, "label": "CI"}),
             vegalite.attention_matrix(["[CLS]", "a", "[SEP]"], [[1 / 3] * 3] * 3, "t")]
    assert [linked_marks(spec) for spec in specs] == [0] * len(specs)


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_attention_matrix_cells_open_the_head_view_with_their_query_pinned():
    spec = vegalite.attention_matrix(["[CLS]", "a", "[SEP]"], [[1 / 3] * 3] * 3, "t",
                                   "example-4.html#view=head&layer=2&head=7")
    assert linked_marks(spec) == 1
    calculate = [step for step in spec["transform"] if step.get("as") == "url"]
    assert calculate == [{"calculate": '"example-4.html#view=head&layer=2&head=7&token=" + datum.q', "as": "url"}]
    assert all("url" not in row for row in spec["data"]["values"])  # one expression, no address per cell


@pytest.fixture(scope="module")
def tiny_pages(tiny_model):
    """The statistics, patterns and example charts of a two-example run of the tiny model (no site build)."""
    from reportgen.config import ExampleSpec
    from reportgen.kinds import kind_named
    from reportgen.model.loading import load
    from reportgen.model.run import run_example
    from reportgen.patterns.statistics import PatternAccumulator, load_settings
    from reportgen.pipeline.assemble import describe_example, example_views
    from reportgen.report import PatternStatistics

    net, tokenizer = load(tiny_model, "cpu")
    specs = [ExampleSpec(text="the cat sat on the mat."),
             ExampleSpec(text="i went to the store.", pair="at the store, i bought fresh strawberries.")]
    runs = [run_example(net, tokenizer, spec, 64) for spec in specs]
    encoder = kind_named("encoder")
    accumulator = PatternAccumulator(load_settings())
    for run in runs:
        accumulator.add(run)
    stats = PatternStatistics.model_validate(accumulator.result())
    sections = chartdata.pattern_sections(stats, example_views(runs, stats))
    return {"statistics": chartdata.statistics_charts(stats),
            "heatmaps": {section["id"]: section["heatmap"] for section in sections},
            "matrices": [spec for section in sections for spec in section["matrices"]],
            "similarity": chartdata.similarity_chart(stats),
            "examples": [chartdata.example_entropy_chart(describe_example(i + 1, run, None, encoder).entropy)
                         for i, run in enumerate(runs)],
            "stats": stats}


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_statistics_and_example_charts_link_every_head(tiny_pages):
    stats = tiny_pages["stats"]
    for key, spec in tiny_pages["statistics"].items():
        assert linked_marks(spec) == 1, key
        for row in spec["data"]["values"]:  # each cell computes its link from its example (test_chart_specs.py)
            example = stats[key].example[row["layer"]][row["head"]]
            assert row["example"] == (example if example >= 0 else None)
        assert [step["calculate"] for step in spec["transform"] if step.get("as") == "url"] == [
            f"isValid(datum.example) ? {head_link_expression()} : ''"]
    for spec in tiny_pages["examples"]:  # the head view above the chart, on the same page
        assert linked_marks(spec) == 1
        assert {row["url"] for row in spec["data"]["values"]} == {
            f"#view=head&layer={layer}&head={head}" for layer in range(2) for head in range(4)}
    for spec in [*tiny_pages["heatmaps"].values(), *tiny_pages["matrices"], tiny_pages["similarity"]]:
        if spec is not None:
            assert linked_marks(spec) == 1, spec.get("title")
    assert tiny_pages["matrices"], "the tiny run has attention matrices to check"


# -- the default site -----------------------------------------------------------------------------

def page_charts(site: Path, page: str) -> dict[str, dict]:
    """The chart specs a built page embeds, by chart id."""
    text = (site / page).read_text(encoding="utf-8")
    return {chart_id: json.loads(body) for chart_id, body in CHART_SCRIPT.findall(text)}


@pytest.mark.slow
def test_every_chart_of_the_default_site_points_only_where_it_links(default_site):
    linked = {}
    for page in sorted(default_site.glob("*.html")):
        for chart_id, spec in page_charts(default_site, page.name).items():
            linked[f"{page.stem}/{chart_id}"] = linked_marks(spec)
    assert linked["ablation/chart-single-heads"] == 2 and linked["ablation/chart-whole-layers"] == 2
    assert linked["statistics/chart-entropy"] == linked["statistics/chart-cls-sep"] == 1
    assert linked["patterns/chart-similarity"] == 1
    assert "example-1/chart-example-entropy" not in linked  # drawn at build time: the page loads no Vega
    assert linked["ablation/chart-random-fraction"] == 0  # a curve over fractions: nothing to open


# The scenegraph of a drawn chart (kept on its element by charts.js): every item with the pointer
# cursor, every item with a link, and the page position of the items `match` selects.
SCENE = """([id, match]) => {
  const out = {pointer: 0, linked: 0, unlinked_pointer: 0, found: []};
  const test = match ? new Function('item', 'return ' + match) : null;
  (function walk(node) {
    (node.items || []).forEach((item) => {
      if (item.datum !== undefined && item.mark && item.mark.role === 'mark') {
        if (item.cursor === 'pointer') out.pointer++;
        if (item.href) out.linked++;
        if (item.cursor === 'pointer' && !item.href) out.unlinked_pointer++;
        if (test && test(item) && item._svg) {
          item._svg.scrollIntoView({block: 'center'});
          const box = item._svg.getBoundingClientRect();
          out.found.push({x: box.x + box.width / 2, y: box.y + box.height / 2, href: item.href || null,
                          type: item.mark.marktype});
        }
      }
      walk(item);
    });
  })(document.getElementById(id).rgView.scenegraph().root);
  return out;
}"""




@pytest.fixture
def open_at(open_page):
    """open_at(url, viewport) -> BrowserPage at one of VIEWPORTS, network blocked, errors collected."""
    return lambda url, viewport: open_page(url, viewport, wait_ms=0)


def drawn(view, chart_id: str, match: str | None = None) -> dict:
    """SCENE for one chart, once vega-embed has drawn it."""
    wait_until(view.page, f"() => document.getElementById('{chart_id}').rgView", timeout=15_000)
    return view.page.evaluate(SCENE, [chart_id, match])


def open_matrices(view) -> None:
    """Opens every collapsed group of attention matrices on the page (issue 47) and waits for its charts to be laid
    out again at their width."""
    view.page.evaluate("() => document.querySelectorAll('details.rg-matrices').forEach(d => { d.open = true; })")
    wait_until(view.page, "() => [...document.querySelectorAll('details.rg-matrices .rg-chart')]"
                          ".every(c => c.rgView && c.rgWidth > 0)", timeout=30_000)


def click_item(view, chart_id: str, match: str) -> dict:
    """Moves the mouse to the centre of the one item `match` selects, then clicks what is on top there."""
    found = drawn(view, chart_id, match)["found"]
    assert len(found) == 1, found
    item = found[0]
    view.page.mouse.move(item["x"], item["y"])
    next_frames(view.page)
    item["cursor"] = view.page.evaluate(
        "([x, y]) => getComputedStyle(document.elementFromPoint(x, y)).cursor", [item["x"], item["y"]])
    item["tooltip"] = (view.page.inner_text("#vg-tooltip-element")
                       if view.page.locator("#vg-tooltip-element.visible").count() else "")
    view.page.mouse.click(item["x"], item["y"])
    return item


def head_state(view) -> dict:
    """The head view's state as it rendered it (data-rgv-state, the views' own hash text)."""
    view.page.wait_for_selector(".rgv[data-rgv-state]", timeout=10_000)
    text = view.page.get_attribute(".rgv[data-rgv-state]", "data-rgv-state")
    return dict(part.split("=", 1) for part in text.split("&") if "=" in part)


@pytest.mark.slow
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_the_significance_star_opens_its_head_and_shows_its_numbers(default_site, open_at, viewport):
    single = check_report(default_site)["ablation"]["single_heads"]
    starred = [(layer, head) for layer, row in enumerate(single["significant"]) for head, sig in enumerate(row) if sig]
    assert starred == [(5, 10)]  # the one significant head of the default site
    view = open_at((default_site / "ablation.html").as_uri(), viewport)
    star = click_item(view, "chart-single-heads", "item.mark.marktype === 'text'")
    assert star["type"] == "text" and star["cursor"] == "pointer"
    assert "5" in star["tooltip"] and "10" in star["tooltip"] and "significant" in star["tooltip"]
    view.page.wait_for_url("**/example-1.html#view=head&layer=5&head=10", timeout=10_000)
    assert view.popups == []  # the same tab
    state = head_state(view)
    assert (state["view"], state["layer"], state["head"]) == ("head", "5", "10")
    assert view.remote_requests == [] and view.errors == []


@pytest.mark.slow
def test_a_whole_layer_bar_opens_the_model_view_at_that_layer(default_site, open_page):
    view = open_page((default_site / "ablation.html").as_uri())
    bar = click_item(view, "chart-whole-layers", "item.mark.marktype === 'rect' && item.datum.layer === 3")
    assert bar["cursor"] == "pointer" and bar["href"] == "example-1.html#view=model&layer=3"
    view.page.wait_for_url("**/example-1.html#view=model&layer=3", timeout=10_000)
    assert view.popups == []
    assert view.errors == []


@pytest.mark.slow
def test_a_statistics_cell_opens_that_head_on_its_strongest_example(default_site, open_page):
    example = check_report(default_site)["statistics"]["entropy"]["example"][4][7]
    view = open_page((default_site / "statistics.html").as_uri())
    assert drawn(view, "chart-cls-sep")["unlinked_pointer"] == 0
    cell = click_item(view, "chart-entropy", "item.datum.layer === 4 && item.datum.head === 7")
    assert cell["cursor"] == "pointer" and "entropy" in cell["tooltip"]
    view.page.wait_for_url(f"**/example-{example + 1}.html#view=head&layer=4&head=7", timeout=10_000)
    state = head_state(view)
    assert (state["layer"], state["head"]) == ("4", "7")
    assert view.popups == [] and view.errors == []


@pytest.mark.slow
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_an_example_entropy_cell_opens_that_head_in_the_view_above(default_site, open_at, viewport):
    """The entropy map is drawn at build time (value_map_svg, issue 47): a cell is a link to the head view above."""
    page = (default_site / "example-2.html").as_uri()
    view = open_at(page, viewport)
    cell = view.page.locator('#chart-example-entropy a[href="#view=head&layer=3&head=9"]')
    assert re.fullmatch(r"Layer 3, head 9: \d\.\d\d nats", cell.locator("title").text_content())
    cell.scroll_into_view_if_needed()
    cell.click()
    view.page.wait_for_url(page + "#view=head&layer=3&head=9", timeout=10_000)
    view.page.wait_for_selector(".rgv[data-rgv-state*='layer=3']", timeout=10_000)
    state = head_state(view)
    assert (state["view"], state["layer"], state["head"]) == ("head", "3", "9")
    top = view.page.evaluate("() => document.querySelector('.rgv').getBoundingClientRect().top")
    assert abs(top) < 200  # scrolled back up to the view
    assert view.popups == [] and view.errors == []


@pytest.mark.slow
def test_an_attention_matrix_cell_opens_the_head_with_that_query_pinned(default_site, open_page):
    spec = page_charts(default_site, "patterns.html")["matrix-previous-token-1"]
    title = spec["title"] if isinstance(spec["title"], str) else spec["title"]["text"]
    layer, head, example = map(int, re.findall(r"\d+", title))
    view = open_page((default_site / "patterns.html").as_uri())
    open_matrices(view)
    cell = click_item(view, "matrix-previous-token-1", "item.datum.q === 3 && item.datum.k === 2")
    assert cell["cursor"] == "pointer"
    view.page.wait_for_url(f"**/example-{example}.html#view=head&layer={layer}&head={head}&token=3", timeout=10_000)
    state = head_state(view)
    assert (state["layer"], state["head"], state["token"]) == (str(layer), str(head), "3")
    assert view.errors == []


@pytest.mark.slow
def test_no_drawn_chart_shows_the_pointer_without_a_link(default_site, open_page):
    view = None
    for page in ("statistics.html", "patterns.html", "ablation.html", "example-1.html"):
        view = open_page((default_site / page).as_uri(), reuse=view)
        for chart_id in page_charts(default_site, page):
            scene = drawn(view, chart_id)
            assert scene["unlinked_pointer"] == 0 and scene["pointer"] == scene["linked"], (page, chart_id)
        assert view.errors == [], page
    # A curve links nowhere: hovering one of its points shows no pointer.
    view = open_page((default_site / "ablation.html").as_uri())
    point = drawn(view, "chart-random-fraction", "item.mark.marktype === 'symbol'")["found"][0]
    view.page.mouse.move(point["x"], point["y"])
    cursor = view.page.evaluate("([x, y]) => getComputedStyle(document.elementFromPoint(x, y)).cursor",
                                [point["x"], point["y"]])
    assert cursor != "pointer" and point["href"] is None


@pytest.mark.slow
def test_a_cell_without_a_url_neither_points_nor_navigates(tmp_path, open_page):
    """Vega-Lite writes a missing url as the text "undefined": the conditional link of `vegalite.links`
    leaves such a cell inert, drawn by the site's own charts.js and Vega bundle."""
    import shutil

    from reportgen.site import exports
    from reportgen.site.htmlsafe import script_json
    from reportgen.site.sources import site_sources

    scripts = site_sources()[0] / "assets" / "javascripts"
    exports.write_vega_bundle(tmp_path / "vega-bundle.js")
    shutil.copy(scripts / "charts.js", tmp_path / "charts.js")
    spec = vegalite.head_heatmap(head_rows_with("some"), "some cells link", "value")
    (tmp_path / "chart.html").write_text(
        '<!doctype html><meta charset="utf-8"><script src="vega-bundle.js"></script>'
        f'<div id="c"></div><script type="application/json" data-rg-chart="c">{script_json(spec)}</script>'
        '<script src="charts.js"></script>', encoding="utf-8")
    (tmp_path / "example-1.html").write_text("<!doctype html><title>example 1</title>", encoding="utf-8")
    view = open_page((tmp_path / "chart.html").as_uri())
    scene = drawn(view, "c")
    assert (scene["pointer"], scene["linked"], scene["unlinked_pointer"]) == (3, 3, 0)
    inert = click_item(view, "c", "item.datum.layer === 1 && item.datum.head === 0")
    assert inert["href"] is None and inert["cursor"] != "pointer"
    view.page.wait_for_timeout(500)  # a negative check: no navigation follows the click
    assert view.page.url.endswith("/chart.html")
    linked = click_item(view, "c", "item.datum.layer === 0 && item.datum.head === 1")
    assert linked["cursor"] == "pointer"
    view.page.wait_for_url("**/example-1.html#view=head&layer=0&head=1", timeout=10_000)
    assert view.popups == []
