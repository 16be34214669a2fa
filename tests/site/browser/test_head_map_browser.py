"""Issue 15, the head map in Chromium, from file:// with the network blocked: every cell of the findings
page's map opens its head's view, every cell of an example's map switches the head view on that page, the
comparison model's cells open their sections, the maps work with JavaScript off, and nothing is clipped at
1366x900 or 390x844 (the default site's 6 x 12 map).

The clicks run on a tiny site (2 layers x 4 heads, with a comparison model) built once for the module;
the layout checks on the default site.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import (
    SINGLE_HEADS_ABLATION,
    VIEW_DRAWN,
    VIEWPORTS,
    BrowserPage,
    build_tiny_site,
    make_tiny_bert,
    tiny_config,
)

pytestmark = pytest.mark.slow

CELLS = "svg.rg-head-map-svg > a"


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory, tiny_model) -> Path:
    project = tmp_path_factory.mktemp("head-map-site")
    other = make_tiny_bert(project / "other", seed=1)
    return build_tiny_site(project, tiny_config(tiny_model, title="Tiny & <b>bold</b>", max_length=128,
                                                compare={"model": other, "name": "<i>second</i> & co"},
                                                ablation=SINGLE_HEADS_ABLATION))


def head_state(view: BrowserPage) -> dict[str, str]:
    """The head view's state as it drew it (data-rgv-state: the views' own hash text)."""
    text = view.page.get_attribute(".rgv[data-rgv-state]", "data-rgv-state")
    return dict(part.split("=", 1) for part in text.split("&") if "=" in part)


def cell_links(view: BrowserPage, map_id: str) -> list[str]:
    return view.page.eval_on_selector_all(f"#{map_id} {CELLS}", "links => links.map(a => a.getAttribute('href'))")


def test_every_findings_cell_opens_its_heads_view(tiny_site, open_page):
    view = open_page((tiny_site / "index.html").as_uri(), wait_ms=0)
    hrefs = cell_links(view, "head-map")
    assert len(hrefs) == 2 * 4
    for number, href in enumerate(hrefs):
        layer, head = divmod(number, 4)
        assert f"#view=head&layer={layer}&head={head}" in href
        view.page.locator(f"#head-map {CELLS}").nth(number).click()
        view.page.wait_for_url(f"**/{href}", timeout=10_000)
        view.page.wait_for_selector(VIEW_DRAWN, timeout=15_000)
        state = head_state(view)
        assert (state["view"], state["layer"], state["head"]) == ("head", str(layer), str(head)), href
        view.page.go_back()
        view.page.wait_for_selector(f"#head-map {CELLS}", timeout=10_000)
    assert view.popups == [] and view.remote_requests == [] and view.errors == []


def test_the_comparison_models_cells_open_its_sections_of_the_comparison_page(tiny_site, open_page):
    view = open_page((tiny_site / "index.html").as_uri(), wait_ms=0)
    assert view.page.inner_text("#head-map-compare figcaption") == "<i>second</i> & co"  # escaped, as text
    assert view.page.locator("#head-map-compare i").count() == 0
    hrefs = cell_links(view, "head-map-compare")
    assert len(hrefs) == 2 * 4 and all(href.startswith("compare.html#compare-") for href in hrefs)
    view.page.locator(f"#head-map-compare {CELLS}").first.click()
    view.page.wait_for_url(f"**/{hrefs[0]}", timeout=10_000)
    anchor = hrefs[0].split("#")[1]
    assert view.page.locator(f"[id='{anchor}']").count() == 1
    compare = open_page((tiny_site / "compare.html").as_uri(), wait_ms=0)
    for anchor in {href.split("#")[1] for href in hrefs}:
        assert compare.page.locator(f"[id='{anchor}']").count() == 1, anchor
    assert view.errors == compare.errors == []


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_every_example_cell_switches_the_head_view_on_the_same_page(tiny_site, open_page, viewport):
    page = (tiny_site / "example-2.html").as_uri()
    view = open_page(page, viewport, wait_ms=0, wait_for=VIEW_DRAWN)
    view.page.evaluate("() => { window.notReloaded = true; }")
    cells = view.page.locator(f"#head-map-example {CELLS}")
    assert cells.count() == 2 * 4
    for number in reversed(range(8)):  # from the last: the first state the page opens with is layer 0 head 0
        layer, head = divmod(number, 4)
        cells.nth(number).click()
        view.page.wait_for_url(f"{page}#view=head&layer={layer}&head={head}", timeout=10_000)
        view.page.wait_for_selector(f".rgv[data-rgv-state*='layer={layer}&']", timeout=10_000)
        state = head_state(view)
        assert (state["view"], state["layer"], state["head"]) == ("head", str(layer), str(head))
        top = view.page.evaluate("() => document.querySelector('.rgv').getBoundingClientRect().top")
        assert abs(top) < 200  # the view is brought into sight
    assert view.page.evaluate("() => window.notReloaded === true")
    assert view.remote_requests == [] and view.errors == []


def test_the_maps_work_without_javascript(tiny_site, browser):
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    try:
        for name, map_id in (("index.html", "head-map"), ("example-1.html", "head-map-example")):
            view = BrowserPage(context.new_page())
            view.page.goto((tiny_site / name).as_uri())
            cells = view.page.locator(f"#{map_id} {CELLS}")
            assert cells.count() == 8 and cells.first.is_visible()
            assert cells.first.get_attribute("href").endswith("#view=head&layer=0&head=0")
            tooltip = view.page.eval_on_selector(f"#{map_id} {CELLS} title", "title => title.textContent")
            assert tooltip.startswith("Layer 0, head 0: ")
            assert view.remote_requests == []
    finally:
        context.close()


FITS = """(selector) => {
  const svg = document.querySelector(selector);
  const box = svg.getBoundingClientRect();
  const out = {width: box.width, left: box.left, right: box.right, page: document.documentElement.clientWidth,
               scroll: document.documentElement.scrollWidth, outside: []};
  for (const text of svg.querySelectorAll('text')) {  // inline SVG clips what leaves its viewBox
    const inner = text.getBoundingClientRect();
    if (inner.left < box.left - 1 || inner.right > box.right + 1 || inner.bottom > box.bottom + 1)
      out.outside.push(text.textContent);
  }
  return out;
}"""


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("page, map_id", [("index.html", "head-map"), ("example-1.html", "head-map-example")])
def test_the_default_sites_maps_are_not_clipped(default_site, open_page, viewport, page, map_id):
    view = open_page((default_site / page).as_uri(), viewport, wait_ms=0)
    assert view.page.locator(f"#{map_id} {CELLS}").count() == 6 * 12
    fits = view.page.evaluate(FITS, f"#{map_id} svg")
    assert fits["outside"] == [], fits
    assert 0 <= fits["left"] and fits["right"] <= fits["page"] and fits["scroll"] <= fits["page"], fits
    assert fits["width"] >= min(330, fits["page"] - 40), fits  # not shrunk to an unreadable size on a phone
    assert view.remote_requests == [] and view.errors == []


def test_the_default_sites_significant_head_is_marked_and_opens_its_view(default_site, open_page):
    view = open_page((default_site / "index.html").as_uri(), wait_ms=0)
    cell = view.page.locator(f"#head-map {CELLS}").nth(5 * 12 + 10)  # layer 5 head 10: the one significant head
    assert cell.locator("path").count() == 1 and cell.locator("rect").count() == 2
    assert "significant" in cell.locator("title").text_content()
    assert (default_site / "charts" / "index--head-map.png").stat().st_size < 20_000
    cell.click()
    view.page.wait_for_url("**/example-*.html#view=head&layer=5&head=10", timeout=10_000)
    view.page.wait_for_selector(VIEW_DRAWN, timeout=15_000)
    assert (head_state(view)["layer"], head_state(view)["head"]) == ("5", "10")
    assert view.errors == []
