"""Issue 28, the charts on any screen and for any reader, on the default site in Chromium at a laptop's
1366 px and a phone's 390 px: every chart's text (axis labels and titles, legends, chart titles, mark
labels) shows at 10 px or more, because charts are laid out for the width they have (charts.js) rather
than scaled down to it; each chart is labelled for a screen reader by what it shows (its spec's
description), never "Vega visualization"; and the ablation charts write every change as the findings
do: relative, in percent, with the absolute change beside it in the tooltip.

Rendered text size = the font size of an SVG <text> times the scale its SVG is shown at (its box's
width over its viewBox's width). The head map (reportgen/site/charts/head_map_svg.py) is checked by its
own tests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import VIEWPORTS, check_report, next_frames, wait_until

pytestmark = pytest.mark.slow

MIN_PX = 10
PAGES = ("statistics.html", "patterns.html", "ablation.html", "index.html", "example-1.html")
CHART_SCRIPT = re.compile(r'<script type="application/json" data-rg-chart="([^"]+)">(.*?)</script>', re.S)

# Every chart's SVG text with its rendered size, once every chart of the page is laid out (charts.js sets
# rgView on a chart's element when it is drawn at its final width).
MEASURE_JS = """() => {
  const out = [];
  document.querySelectorAll('.rg-chart svg, .rg-finding-picture svg').forEach(svg => {
    const holder = svg.closest('.rg-chart, .rg-finding-picture');
    const id = holder.id || holder.closest('[id]').id;
    const box = svg.getBoundingClientRect(), view = svg.viewBox.baseVal;
    const scale = view && view.width ? box.width / view.width : 1;
    svg.querySelectorAll('text').forEach(text => {
      if (!text.textContent.trim() || getComputedStyle(text).display === 'none') return;
      const size = parseFloat(getComputedStyle(text).fontSize);
      out.push({id, text: text.textContent.slice(0, 40), size, scale, px: size * scale});
    });
  });
  return out;
}"""
# Vega labels a chart on the element it draws into (the view's container, role graphics-document) with the
# spec's description; no element of the chart may still carry Vega's default name.
LABELS_JS = """() => [...document.querySelectorAll('.rg-chart')].map(chart => ({
  id: chart.id, label: chart.getAttribute('aria-label'), role: chart.getAttribute('role'),
  defaults: [chart, ...chart.querySelectorAll('[aria-label]')].filter(
    element => (element.getAttribute('aria-label') || '').includes('Vega visualization')).length,
}))"""
LAID_OUT = """() => [...document.querySelectorAll('script[data-rg-chart]')].every(script => {
  const chart = document.getElementById(script.getAttribute('data-rg-chart'));
  return chart && chart.rgView && chart.querySelector('svg');
})"""


def page_charts(site: Path, page: str) -> dict[str, dict]:
    """The chart specs a built page embeds, by chart id."""
    text = (site / page).read_text(encoding="utf-8")
    return {chart_id: json.loads(body) for chart_id, body in CHART_SCRIPT.findall(text)}


def laid_out(open_page, site: Path, page: str, viewport: str, reuse=None):
    view = open_page((site / page).as_uri(), viewport, wait_ms=0, reuse=reuse)
    wait_until(view.page, LAID_OUT, timeout=60_000)
    next_frames(view.page)
    return view


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("page", PAGES)
def test_every_chart_text_shows_at_10_px_or_more(default_site, open_page, tab, page, viewport):
    view = laid_out(open_page, default_site, page, viewport, reuse=tab(viewport))
    texts = view.page.evaluate(MEASURE_JS)
    charts = {text["id"] for text in texts}
    expected = set(page_charts(default_site, page))
    assert expected <= charts, expected - charts  # every chart was drawn, with text
    small = [f"{t['id']}: {t['text']!r} {t['size']:g} px x {t['scale']:.2f} = {t['px']:.1f} px"
             for t in texts if t["px"] < MIN_PX - 0.01]
    assert not small, "\n".join(small[:40])
    width = view.page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1] + 1, width  # a chart too wide for a phone scrolls in its box, not the page
    assert view.errors == [] and view.remote_requests == []


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_charts_keep_their_layout_on_a_laptop_and_are_laid_out_anew_on_a_phone(default_site, open_page, viewport):
    view = laid_out(open_page, default_site, "ablation.html", viewport)
    legend = single_heads_legend(view)
    assert legend["width"] <= legend["box"] + 1
    if viewport == "phone":
        assert legend["below"] and not legend["right"], legend
        return
    assert legend["right"] and not legend["below"], legend
    # The window made as narrow as a phone (a screen turned, a window resized): laid out anew, not shrunk.
    view.page.set_viewport_size({"width": VIEWPORTS["phone"][0], "height": VIEWPORTS["phone"][1]})
    wait_until(view.page, """() => {
      const chart = document.getElementById('chart-single-heads'), svg = chart.querySelector('svg');
      const width = svg && svg.getBoundingClientRect().width;
      return chart.rgView && width <= chart.parentElement.clientWidth && width >= svg.viewBox.baseVal.width - 0.5;
    }""", timeout=10_000)
    legend = single_heads_legend(view)
    assert legend["below"] and legend["scale"] == pytest.approx(1), legend


def single_heads_legend(view) -> dict:
    """Where the single-heads heatmap's legend is, against its cells, and the scale its svg is shown at."""
    return view.page.evaluate("""() => {
      const svg = document.querySelector('#chart-single-heads svg');
      const plot = svg.querySelector('.mark-rect.role-mark').getBoundingClientRect();
      const legend = svg.querySelector('.role-legend').getBoundingClientRect();
      return {below: legend.top >= plot.bottom - 1, right: legend.left >= plot.right - 1,
              width: svg.getBoundingClientRect().width, box: document.getElementById('chart-single-heads')
                .parentElement.clientWidth, scale: svg.getBoundingClientRect().width / svg.viewBox.baseVal.width};
    }""")


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_is_labelled_by_what_it_shows(default_site, open_page, tab, page):
    specs = page_charts(default_site, page)
    view = laid_out(open_page, default_site, page, "desktop", reuse=tab("desktop"))
    labels = {chart["id"]: chart for chart in view.page.evaluate(LABELS_JS)}
    for chart_id, spec in specs.items():
        label = labels[chart_id]["label"]
        title = spec["title"] if isinstance(spec["title"], str) else spec["title"]["text"]
        assert labels[chart_id]["role"] == "graphics-document" and labels[chart_id]["defaults"] == 0, chart_id
        assert label and "Vega visualization" not in label, (chart_id, label)
        assert label == spec["description"] and label.startswith(title + ": "), (chart_id, label)
    pictures = view.page.evaluate("() => [...document.querySelectorAll('.rg-finding-picture svg')]"
                                  ".map(svg => svg.getAttribute('aria-label'))")
    assert all(label and "Vega" not in label for label in pictures), pictures


def test_ablation_charts_write_changes_as_the_findings_do(default_site, open_page):
    report = check_report(default_site)
    single = report["ablation"]["single_heads"]
    specs = page_charts(default_site, "ablation.html")
    rows = {(row["layer"], row["head"]): row for row in specs["chart-single-heads"]["data"]["values"]}
    # the page writes its numbers to the tooltips' 4 decimals (pages._placed, issue 47); the downloads keep them all
    def near(shown, exact):
        return abs(shown - exact) <= 5e-5 + 1e-12

    for (layer, head), row in rows.items():
        assert near(row["value"], single["relative"][layer][head]) and near(row["delta"], single["delta"][layer][head])
    worst = rows[(5, 10)]  # the default site's one significant head
    assert worst["value_text"].endswith("%") and worst["delta_text"] == f"{single['delta'][5][10]:+.3f}"
    layers = report["ablation"]["whole_layers"]
    bars = specs["chart-whole-layers"]["data"]["values"]
    assert all(near(bar["value"], exact) for bar, exact in zip(bars, layers["relative"], strict=True))
    assert all(near(bar["delta"], exact) for bar, exact in zip(bars, layers["delta"], strict=True))
    table = json.loads((default_site / "charts" / "ablation--chart-single-heads.json").read_text(encoding="utf-8"))
    assert [row["value"] for row in table] == [v for grid_row in single["relative"] for v in grid_row]
    text = json.dumps(specs)
    assert "-0.0%" not in text and "\\u22120.0%" not in text
    # The tooltip of the significant head, as a reader sees it: the relative change, then the absolute one.
    view = laid_out(open_page, default_site, "ablation.html", "desktop")
    found = view.page.evaluate("""() => {
      const out = [];
      (function walk(node) {
        (node.items || []).forEach(item => {
          if (item.datum && item.datum.layer === 5 && item.datum.head === 10 && item.mark.marktype === 'rect'
              && item._svg) {
            item._svg.scrollIntoView({block: 'center'});
            out.push(item._svg.getBoundingClientRect());
          }
          walk(item);
        });
      })(document.getElementById('chart-single-heads').rgView.scenegraph().root);
      return out.map(box => [box.x + box.width / 2, box.y + box.height / 2]);
    }""")
    assert len(found) == 1
    view.page.mouse.move(*found[0])
    view.page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
    tooltip = view.page.inner_text("#vg-tooltip-element")
    assert worst["value_text"] in tooltip and worst["delta_text"] in tooltip
    assert tooltip.index(worst["value_text"]) < tooltip.index(worst["delta_text"])
