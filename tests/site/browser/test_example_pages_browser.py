"""Issue 28, the example pages in Chromium from file://: the attention view in the first screen, a skip link to
it as the first Tab stop, the examples named in the menu with links to their neighbours, the head map's numbers
by tap and keyboard, a copy-link box that follows the view and goes away, and colours with enough contrast.

The layout checks run on the default site (every example page, at 1366x768 and 390x844); the rest on a tiny
site with three examples whose names are hostile user text, built once for the module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reportgen.findings import names
from tests.helpers import SINGLE_HEADS_ABLATION, VIEW_DRAWN, BrowserPage, build_tiny_site, tiny_config, wait_until
from tests.site.browser.test_head_view_browser import check_lines_meet_their_rows

pytestmark = pytest.mark.slow

FIRST_SCREENS = {"laptop": (1366, 768), "phone": (390, 844)}
HOSTILE = '<b>Bold</b> & "quoted" *stars* [link](x.md)'
EXAMPLES = [{"text": "the cat sat on the mat.", "name": HOSTILE},
            {"text": "i went to the store.", "pair": "at the store, i bought fresh strawberries.", "name": "Second"},
            {"text": "the dog sat on the mat."}]
CELLS = "svg.rg-head-map-svg > a"


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory, tiny_model) -> Path:
    project = tmp_path_factory.mktemp("example-pages-site")
    return build_tiny_site(project, tiny_config(tiny_model, examples=EXAMPLES, max_length=128,
                                                    ablation=SINGLE_HEADS_ABLATION))


def example_pages(site: Path) -> list[Path]:
    """The site's example pages (not their query/key pages), in order."""
    found = [path for path in site.glob("example-*.html") if re.fullmatch(r"example-\d+\.html", path.name)]
    return sorted(found, key=lambda path: int(path.stem.split("-")[1]))


def luminance(hex_colour: str) -> float:
    """WCAG 2.1 relative luminance of "#rrggbb"."""
    channels = [int(hex_colour[at:at + 2], 16) / 255 for at in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: str, other: str) -> float:
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def css_hex(colour: str) -> str:
    """A computed CSS colour ("rgb(191, 54, 12)") as "#bf360c" (opaque colours only)."""
    red, green, blue = (int(part) for part in re.findall(r"\d+", colour)[:3])
    return f"#{red:02x}{green:02x}{blue:02x}"


# -- the attention view first ---------------------------------------------------------------------------------
@pytest.mark.parametrize("screen", list(FIRST_SCREENS))
def test_every_example_page_starts_its_attention_view_in_the_first_screen(default_site, open_page, screen):
    """The view's top edge is inside the first screen (it was 1,670 px down at 1366x768, below the head map and
    the pattern list), and the head map and the pattern list follow it."""
    pages = example_pages(default_site)
    assert len(pages) >= 10
    view = None
    for path in pages:  # one tab, as a reader goes from example to example
        view = open_page(path.as_uri(), FIRST_SCREENS[screen], wait_ms=0, wait_for=VIEW_DRAWN, reuse=view)
        where = view.page.evaluate("""() => {
          const view = document.querySelector('.rgv[data-rgv]');
          const after = (selector) => { const other = document.querySelector(selector);
            return !!other && !!(view.compareDocumentPosition(other) & Node.DOCUMENT_POSITION_FOLLOWING); };
          return {top: view.getBoundingClientRect().top + scrollY, height: innerHeight,
                  mapAfter: after('#head-map-example'), patternsAfter: after('#patterns')};
        }""")
        assert 0 < where["top"] < where["height"] - 100, (path.name, where)  # and some of it shows
        assert where["mapAfter"] and where["patternsAfter"], (path.name, where)
        assert view.errors == [] and view.remote_requests == []


@pytest.mark.parametrize("width", [320, 390, 480, 768])
@pytest.mark.parametrize("fragment", ["view=head&layer=1&token=4", "view=head&layer=1"], ids=["pinned", "top-k"])
def test_every_line_meets_the_rows_of_its_tokens_at_any_width(tiny_site, open_page, width, fragment):
    """Issue 47: below about 600 px the lines' SVG kept its aspect ratio as it narrowed (the theme gives an SVG
    `height: auto`), so its lines shrank in height while the token rows did not: at 390 px they covered 44% of the
    rows, a line from token 5 pointed at tokens 2-3 and the later tokens got none."""
    view = open_page((tiny_site / "example-2.html").as_uri() + f"#{fragment}", (width, 844), wait_for=VIEW_DRAWN)
    tokens = view.page.locator(".rgv-left .rgv-tok").count()
    assert tokens > 15
    check_lines_meet_their_rows(view, tokens, every_query="token" not in fragment)
    assert view.errors == []


def test_the_first_tab_stop_skips_to_the_attention_view(default_site, open_page):
    view = None
    for path in example_pages(default_site)[:3]:
        view = open_page(path.as_uri(), (1366, 768), wait_ms=0, wait_for=VIEW_DRAWN, reuse=view)
        page = view.page
        page.keyboard.press("Tab")
        first = page.evaluate("""() => { const a = document.activeElement; const r = a.getBoundingClientRect();
          return {text: a.textContent.trim(), href: a.getAttribute('href'), top: r.top, bottom: r.bottom,
                  opacity: getComputedStyle(a).opacity}; }""")
        assert first["text"] == "Skip to the attention view" and first["href"] == "#attention", first
        wait_until(page, "() => getComputedStyle(document.activeElement).opacity === '1'", timeout=5_000)
        assert 0 <= first["top"] and first["bottom"] <= 768  # shown where it is focused
        page.keyboard.press("Enter")  # lands on the view's first control, the view in sight
        landed = page.evaluate("""() => { const view = document.querySelector('.rgv[data-rgv]');
          return {inView: view.contains(document.activeElement), text: document.activeElement.textContent,
                  top: view.getBoundingClientRect().top, hash: location.hash}; }""")
        assert landed["inView"] and landed["text"] == "Head view", landed
        assert 0 <= landed["top"] < 768 / 2 and landed["hash"] == "", landed
        assert view.errors == []


# -- the menu and the neighbours ------------------------------------------------------------------------------
def test_the_menu_names_the_examples_as_text(tiny_site, open_page):
    view = open_page((tiny_site / "example-2.html").as_uri(), wait_ms=0)
    labels = view.page.eval_on_selector_all(
        "nav.md-nav--primary a.md-nav__link[href*='example-']",
        "links => links.map(a => [a.getAttribute('href').split('/').pop(),"
        " a.textContent.trim().replace(/\\s+/g, ' ')])")
    assert dict(labels) == {"example-1.html": "1. " + HOSTILE, "example-2.html": "2. Second",
                            "example-3.html": "Example 3"}, labels
    assert view.page.locator("nav.md-nav--primary b").count() == 0  # the name's markup is text, not a tag
    one = open_page((tiny_site / "example-1.html").as_uri(), wait_ms=0)
    assert one.page.title().startswith("Example 1: " + HOSTILE)
    assert one.page.locator(".md-header b").count() == 0
    assert view.errors == one.errors == []


def test_each_example_links_to_its_neighbours(tiny_site, open_page):
    expected = {1: [("example-2.html", "Example 2: Second \u2192")],
                2: [("example-1.html", "\u2190 Example 1: " + HOSTILE), ("example-3.html", "Example 3 \u2192")],
                3: [("example-2.html", "\u2190 Example 2: Second")]}
    view = None
    for number, links in expected.items():
        view = open_page((tiny_site / f"example-{number}.html").as_uri(), wait_ms=0, reuse=view)
        found = view.page.eval_on_selector_all(
            ".rg-example-pager a", "links => links.map(a => [a.getAttribute('href'), a.textContent.trim()])")
        assert [tuple(link) for link in found] == links, number
        assert view.page.locator(".rg-example-pager b").count() == 0
    view = open_page((tiny_site / "example-2.html").as_uri(), wait_ms=0, reuse=view)
    view.page.click(".rg-example-pager a:has-text('Example 3')")
    view.page.wait_for_url("**/example-3.html", timeout=10_000)


# -- the head map's numbers -----------------------------------------------------------------------------------
def test_a_tap_shows_a_cells_numbers_and_a_second_tap_opens_it(tiny_site, browser):
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    try:
        view = BrowserPage(context.new_page())
        url = (tiny_site / "example-1.html").as_uri()
        view.page.goto(url)
        view.page.wait_for_selector(VIEW_DRAWN, timeout=15_000)
        cell = view.page.locator(f"#head-map-example {CELLS}").nth(6)  # layer 1, head 2
        cell.scroll_into_view_if_needed()
        cell.tap()
        readout = view.page.locator("#head-map-example .rg-head-map-readout")
        wait_until(view.page, "() => document.querySelector('.rg-head-map-numbers').textContent.startsWith('Layer 1')")
        assert readout.locator(".rg-head-map-numbers").inner_text().startswith("Layer 1, head 2: ")
        assert "entropy" in readout.inner_text()
        assert view.page.url == url  # the first tap only shows the numbers
        assert readout.locator("a.rg-head-map-open").get_attribute("href") == "#view=head&layer=1&head=2"
        assert readout.locator("a.rg-head-map-open").is_visible()
        cell.tap()
        view.page.wait_for_url(url + "#view=head&layer=1&head=2", timeout=10_000)
        assert view.errors == [] and view.remote_requests == []
    finally:
        context.close()


def test_keyboard_focus_on_a_cell_shows_its_numbers_and_enter_opens_it(tiny_site, open_page):
    view = None
    for name, map_id in (("example-2.html", "head-map-example"), ("index.html", "head-map")):
        view = open_page((tiny_site / name).as_uri(), wait_ms=0, reuse=view)
        page = view.page
        page.focus(f"#{map_id} {CELLS} >> nth=5")  # layer 1, head 1
        numbers = page.inner_text(f"#{map_id} .rg-head-map-numbers")
        title = page.eval_on_selector(f"#{map_id} {CELLS} >> nth=5", "a => a.querySelector('title').textContent")
        assert numbers == title and numbers.startswith("Layer 1, head 1: "), name
        page.keyboard.press("Enter")
        wait_until(page, "() => location.hash.includes('layer=1&head=1')", timeout=10_000)
        assert view.errors == [], name


def test_the_head_map_is_one_tab_stop_and_the_arrow_keys_move_inside_it(tiny_site, open_page):
    """Issue 47: the findings page's map of 72 heads took 72 Tab presses to pass. Tab enters the map once, arrows
    move by layer and head (the numbers follow), and the next Tab leaves it for the link that opens the cell;
    Shift+Tab comes back to the cell last shown."""
    view = open_page((tiny_site / "index.html").as_uri(), wait_ms=0)
    page = view.page
    focusable = page.eval_on_selector_all("#head-map " + CELLS, "cells => cells.filter(a => a.tabIndex >= 0).length")
    assert focusable == 1
    page.focus(f"#head-map {CELLS} >> nth=0")
    here = ("() => /^Layer (\\d+), head (\\d+)/.exec(document.activeElement.querySelector('title').textContent)"
            ".slice(1).join(',')")
    for key, cell in (("ArrowRight", "0,1"), ("ArrowDown", "1,1"), ("ArrowDown", "1,1"), ("End", "1,3"),
                      ("ArrowRight", "1,3"), ("Home", "1,0"), ("PageUp", "0,0")):
        page.keyboard.press(key)
        assert page.evaluate(here) == cell, key
    page.keyboard.press("ArrowDown")
    numbers = page.inner_text("#head-map .rg-head-map-numbers")
    assert numbers.startswith("Layer 1, head 0: "), numbers
    page.keyboard.press("Tab")  # out of the grid, to the line under it that opens the cell shown
    assert page.evaluate("() => document.activeElement.matches('a.rg-head-map-open')")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(here) == "1,0"
    assert view.errors == []


# -- the copy-link box ----------------------------------------------------------------------------------------
def _copy_page(site: Path, open_page, clipboard: str) -> BrowserPage:
    """Example 2 with the clipboard made to accept or refuse (`clipboard`), and the copied note shown for 3 s (not
    6): long enough for a loaded machine to change the view meanwhile, short enough to wait for."""
    view = open_page((site / "example-2.html").as_uri(), wait_ms=0, wait_for=VIEW_DRAWN)
    view.page.evaluate("""(works) => {
      navigator.clipboard.writeText = () => works ? Promise.resolve() : Promise.reject(new Error('refused'));
      window.reportgenViews.COPY_SHOWN_MS = 3000;
    }""", clipboard == "works")
    return view


def test_the_copied_link_goes_away_and_follows_the_view_while_shown(tiny_site, open_page):
    view = _copy_page(tiny_site, open_page, "works")
    page = view.page
    page.click(".rgv-toolbar .rgv-copy")
    box = page.locator(".rgv-toolbar .rgv-link")
    assert box.is_visible() and box.input_value().endswith("#" + page.get_attribute(VIEW_DRAWN, "data-rgv-state"))
    assert page.inner_text(".rgv-toolbar .rgv-copy-note") == "Link copied"
    page.evaluate("() => { location.hash = '#view=head&layer=1&head=3'; }")  # the view changes, the box stays
    wait_until(page, "() => document.querySelector('.rgv-toolbar .rgv-link').value.endsWith('layer=1&head=3')",
               timeout=10_000)
    wait_until(page, "() => document.querySelector('.rgv-toolbar .rgv-link').hidden", timeout=30_000)
    assert page.inner_text(".rgv-toolbar .rgv-copy-note") == ""
    assert view.errors == []


def test_a_link_to_copy_by_hand_goes_away_when_the_reader_leaves_it(tiny_site, open_page):
    view = _copy_page(tiny_site, open_page, "refused")
    page = view.page
    page.click(".rgv-toolbar .rgv-copy")
    wait_until(page, "() => document.activeElement === document.querySelector('.rgv-toolbar .rgv-link')",
               timeout=5_000)
    assert page.inner_text(".rgv-toolbar .rgv-copy-note") == "Select the link and copy it"
    page.evaluate("() => { location.hash = '#view=head&layer=0&head=2'; }")
    wait_until(page, "() => document.querySelector('.rgv-toolbar .rgv-link').value.endsWith('layer=0&head=2')",
               timeout=5_000)
    page.focus(".rgv-toolbar select.rgv-layer")  # the reader goes on with the view
    page.select_option(".rgv-toolbar select.rgv-layer", "1")
    wait_until(page, "() => document.querySelector('.rgv-toolbar .rgv-link').hidden", timeout=5_000)
    assert page.inner_text(".rgv-toolbar .rgv-copy-note") == ""
    assert view.errors == []


# -- colours --------------------------------------------------------------------------------------------------
def test_every_head_map_colour_has_3_to_1_on_white_and_they_stay_apart():
    colours = names.label_colours()
    for key, colour in colours.items():
        assert contrast(colour, "#ffffff") >= 3, (key, colour, contrast(colour, "#ffffff"))
    assert len(set(colours.values())) == len(colours)


def test_the_pages_chips_and_maps_have_their_contrast(default_site, open_page):
    view = open_page((default_site / "example-1.html").as_uri(), wait_ms=0)
    chips = view.page.eval_on_selector_all(
        ".rg-seg-b.rg-seg, .rg-token.rg-seg-b",
        "chips => chips.map(c => [getComputedStyle(c).color, getComputedStyle(c).backgroundColor])")
    assert len(chips) > 2  # example 1 is a sentence pair
    for text, background in chips:
        assert contrast(css_hex(text), css_hex(background)) >= 4.5, (text, background)
    fills = view.page.eval_on_selector_all(
        "#head-map-example svg > a > rect:first-of-type, #head-map-example svg > rect[width='12']",
        "rects => rects.map(r => r.getAttribute('fill'))")
    assert len(fills) > 6 * 12
    low = {colour for colour in fills if colour != "#ffffff" and contrast(colour, "#ffffff") < 3}
    assert low == set()
