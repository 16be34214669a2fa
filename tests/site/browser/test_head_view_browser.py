"""The head view in headless Chromium at a laptop's and a phone's size: room for every weight, the keyboard,
links that ask for what the model does not have, and the link to the query/key page.

Pages are standalone (the views' scripts and views.css) around a tiny random 12-head BERT's run of the seed
pair, 19 tokens like example 1. At 1366 px the views sit in a 688 px column, the documentation column of the
site before it took the full width: the narrowest the head view gets on a laptop.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reportgen.config import ExampleSpec
from reportgen.site.views import example_payload, qk_html, qk_payload, standalone_page, views_html
from tests.helpers import ROOT, TINY_WORDS, VIEWPORTS

pytestmark = pytest.mark.slow

ASSETS = ROOT / "site_src" / "assets"
PAIR = ExampleSpec(text="i went to the store.", pair="at the store, i bought fresh strawberries.")
HEADS = 12
LAYERS = 3
COLUMN = '<main style="max-width: 688px">{}</main>'

# Each .rgv-num's place in the nearest box that clips it sideways (the head panel, or the weights table's box).
PLACES_JS = """() => {
  const clips = (node) => /(auto|scroll|hidden)/.test(getComputedStyle(node).overflowX);
  const boxOf = (node) => { let up = node.parentElement; while (up && !clips(up)) up = up.parentElement; return up; };
  return [...document.querySelectorAll('.rgv-num')].map((num) => {
    const box = boxOf(num);
    const at = num.getBoundingClientRect();
    const edge = box.getBoundingClientRect().left + box.clientLeft;
    return {left: at.left - edge, right: at.right - edge, visible: box.clientWidth, scrolled: box.scrollLeft,
            room: box.scrollWidth};
  });
}"""


def _tiny_bert(target: Path) -> Path:
    """A random BERT with 12 heads like BERT-base (tests/helpers.make_tiny_bert's hidden size 32 cannot split in 12)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    BertTokenizer(vocab={word: index for index, word in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=48, num_hidden_layers=LAYERS,
                        num_attention_heads=HEADS, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    model, tokenizer = load(_tiny_bert(tmp_path_factory.mktemp("bert-12-heads")), "cpu")
    run = run_example(model, tokenizer, PAIR, 128, keep_qk=True)
    assert run.n_tokens == 19
    root = tmp_path_factory.mktemp("head-view")
    shutil.copytree(ASSETS, root / "assets")
    views = views_html(example_payload(run))
    # An example page names its query/key page on the view's root; without it there is no link.
    linked = views_html(example_payload(run), qk_href="pair-qk.html")
    assert 'data-qk-href="pair-qk.html"' in linked
    spacer = '<div style="height: 3000px"></div>'
    files = {"pair.html": COLUMN.format(linked), "plain.html": COLUMN.format(views),
             "tall.html": COLUMN.format(spacer + views + spacer), "pair-qk.html": qk_html(qk_payload(run))}
    for name, body in files.items():
        (root / name).write_text(standalone_page(body, name), encoding="utf-8")
    return {"root": root, "run": run}


@pytest.fixture
def open_at(open_page):
    """open_at(url, size) -> BrowserPage at one of VIEWPORTS, its view drawn."""
    return lambda url, size="desktop": open_page(url, size, wait_ms=0, wait_for=".rgv[data-rgv-state]")


def _url(pages, name: str, fragment: str = "") -> str:
    return (pages["root"] / name).as_uri() + (f"#{fragment}" if fragment else "")


def _clean(view) -> None:
    assert view.errors == [] and view.remote_requests == [] and view.dialogs == [], (view.errors, view.remote_requests)


def _lines_drawn(page) -> int:
    return int(page.get_attribute("svg.rgv-lines", "data-lines"))


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_every_weight_of_all_twelve_heads_lies_inside_its_box(pages, open_at, size):
    view = open_at(_url(pages, "pair.html", "view=head&layer=1&token=4"), size)
    page = view.page
    places = page.evaluate(PLACES_JS)
    assert len(places) == HEADS * 19  # every head's weight to every key of the pinned query
    panel = page.evaluate("(() => { const p = document.querySelector('.rgv-head-panel');"
                          " return {visible: p.clientWidth, room: p.scrollWidth}; })()")
    hint = page.locator(".rgv-scroll-hint")
    if size == "desktop":
        # all of them on screen: nothing to scroll to
        assert all(p["left"] >= 0 and p["right"] <= p["visible"] + 0.5 for p in places)
        assert panel["room"] <= panel["visible"] + 1, panel
        assert not hint.is_visible()
    else:
        # within their box's scroll area, and the page itself never scrolls sideways
        assert all(p["left"] + p["scrolled"] >= 0 and p["right"] + p["scrolled"] <= p["room"] + 0.5 for p in places)
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        assert hint.is_visible() == (panel["room"] > panel["visible"] + 1)
        page.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")  # measured then
        table_scrolls = page.evaluate("(box => box.scrollWidth > box.clientWidth + 1)"
                                      "(document.querySelector('.rgv-weights'))")
        assert page.locator(".rgv-table-hint").count() == int(table_scrolls)
    # beside the keys: one number each (head 0), and on a laptop a bar per head
    assert page.locator(".rgv-right .rgv-inline-num[data-head='0']").count() == 19
    assert page.locator(".rgv-right .rgv-bar-h").count() == HEADS * 19
    _clean(view)


# Each drawn line's two ends on screen (the SVG's own transform: it stretches on a narrow screen) against the centres
# of the rows of its query (left column) and key (right column), and against the lines' box.
LINE_ENDS_JS = """() => {
  const rows = (side) => [...document.querySelectorAll(`.rgv-${side} .rgv-tok`)]
    .map((row) => { const box = row.getBoundingClientRect(); return box.top + box.height / 2; });
  const left = rows('left'), right = rows('right');
  const svg = document.querySelector('svg.rgv-lines');
  const matrix = svg.getScreenCTM(), box = svg.getBoundingClientRect();
  const at = (x, y) => {
    const point = svg.createSVGPoint();
    point.x = x;
    point.y = y;
    return point.matrixTransform(matrix);
  };
  return [...svg.querySelectorAll('line.rgv-line')].map((line) => {
    const start = at(+line.getAttribute('x1'), +line.getAttribute('y1'));
    const end = at(+line.getAttribute('x2'), +line.getAttribute('y2'));
    return {q: +line.dataset.q, k: +line.dataset.k, start: start.y - left[+line.dataset.q],
            end: end.y - right[+line.dataset.k], left: start.x - box.left, right: box.right - end.x};
  });
}"""


def check_lines_meet_their_rows(view, tokens: int, every_query: bool) -> None:
    """Every drawn line of `view` starts at its query's row and ends at its key's, within a pixel, inside the lines'
    box; with `every_query` (top-k lines, no token pinned) each of the `tokens` query rows has its lines."""
    ends = view.page.evaluate(LINE_ENDS_JS)
    assert len(ends) == _lines_drawn(view.page) > 0
    assert max(abs(end[side]) for end in ends for side in ("start", "end")) < 1.0, ends[:3]
    assert max(abs(end[side]) for end in ends for side in ("left", "right")) < 1.0
    if every_query:
        assert {end["q"] for end in ends} == set(range(tokens))


@pytest.mark.parametrize("width", [320, 390])
def test_every_line_meets_the_rows_of_its_tokens_in_a_view_file(pages, open_at, width):
    """The `reportgen view` file's page (no site style around it); the site's pages: test_example_pages_browser."""
    view = open_at(_url(pages, "pair.html", "view=head&layer=2"), (width, 844))
    check_lines_meet_their_rows(view, 19, every_query=True)
    _clean(view)


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_tokens_are_reached_by_tab_pinned_by_enter_and_cleared_by_escape(pages, open_at, size):
    view = open_at(_url(pages, "pair.html"), size)
    page = view.page
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('.rgv-left .rgv-tok')"):
            break
    else:
        pytest.fail("Tab never reached a token")
    # one Tab stop per column: the arrows move within it, and focus shows the token's weights
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    focused = page.evaluate("({i: document.activeElement.dataset.i, outline: getComputedStyle(document.activeElement)"
                            ".outlineStyle})")
    assert focused == {"i": "2", "outline": "solid"}  # a visible focus ring
    assert page.locator(".rgv-num").count() == HEADS * 19 and "token=" not in page.evaluate("location.hash")
    page.keyboard.press("Enter")
    assert "token=2" in page.evaluate("location.hash")
    assert page.get_attribute('.rgv-left .rgv-tok[data-i="2"]', "aria-pressed") == "true"
    page.keyboard.press("Escape")
    assert "token=" not in page.evaluate("location.hash")
    assert page.get_attribute('.rgv-left .rgv-tok[data-i="2"]', "aria-pressed") == "false"
    assert page.locator(".rgv-num").count() == 0 and _lines_drawn(page) == HEADS * 19 * 19
    # the next Tab stop is the other column; Space pins a key there
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.matches('.rgv-right .rgv-tok')")
    page.keyboard.press("End")
    page.keyboard.press(" ")
    assert page.evaluate("location.hash").endswith("key=18")
    assert page.evaluate("scrollX") == 0  # Space pinned, it did not scroll the page
    _clean(view)


@pytest.mark.parametrize(("fragment", "said", "layer", "heads"), [
    ("view=head&head=abc", "head \u201cabc\u201d; this model has heads 0\u201311. Showing all heads.", 0, HEADS),
    ("view=head&layer=9&head=2", f"layer 9; this model has layers 0\u2013{LAYERS - 1}. Showing layer 0.", 0, 1),
    ("view=grid&layer=1", "the \u201cgrid\u201d view; showing the head view.", 1, HEADS),
    ("view=head&layer=2&head=5&token=99", "token 99; this example has tokens 0\u201318. No token pinned.", 2, 1),
])
def test_a_link_asking_for_what_is_not_there_shows_a_note_and_a_drawn_view(pages, open_at, fragment, said,
                                                                            layer, heads):
    view = open_at(_url(pages, "pair.html", fragment))
    page = view.page
    note = page.locator(".rgv-hash-note")
    assert note.is_visible() and note.inner_text().startswith("The link asked for " + said)
    assert page.is_visible(".rgv-head-panel") and page.input_value(".rgv-layer") == str(layer)
    assert page.locator('.rgv-head-toggle[aria-pressed="true"]').count() == heads
    assert _lines_drawn(page) > 0 and page.locator("line.rgv-line").count() == _lines_drawn(page)
    # a good link followed later takes the note away; a bad one brings it back
    page.evaluate("location.hash = 'view=head&layer=1&head=3'")
    page.wait_for_selector(".rgv-hash-note", state="hidden")
    page.evaluate("location.hash = 'view=head&layer=1&head=3&key=40'")
    page.wait_for_selector(".rgv-hash-note:has-text('key token 40')")
    page.click(".rgv-hash-note-close")
    assert not note.is_visible()
    _clean(view)


def test_query_key_link_carries_layer_head_and_pinned_token(pages, open_at):
    view = open_at(_url(pages, "pair.html", "view=head&layer=1&head=3,7&token=4"))
    page = view.page
    link = page.locator(".rgv-toolbar a.rgv-qk-link")
    assert link.get_attribute("href") == "pair-qk.html#view=qk&layer=1&head=3&token=4"  # the first selected head
    page.click('.rgv-left .rgv-tok[data-i="6"]')
    page.select_option(".rgv-layer", "2")
    assert link.get_attribute("href") == "pair-qk.html#view=qk&layer=2&head=3&token=6"
    link.click()
    page.wait_for_selector(".rgv[data-rgv='qk'][data-rgv-state]", timeout=10_000)
    assert page.get_attribute(".rgv", "data-rgv-state") == "view=qk&layer=2&head=3&token=6"
    assert page.input_value(".rgv-layer") == "2" and page.input_value(".rgv-head") == "3"
    _clean(view)
    plain = open_at(_url(pages, "plain.html"))
    assert plain.page.locator(".rgv-qk-link").count() == 0  # no query/key page named, no link
    _clean(plain)


def test_a_link_followed_on_the_page_brings_the_view_into_sight(pages, open_at):
    view = open_at(_url(pages, "pair.html"), "phone")
    page = view.page
    for where in ("afterbegin", "beforeend"):  # room above and below, so the view can come to the top
        page.evaluate(f"document.body.insertAdjacentHTML('{where}', '<div style=\"height: 3000px\"></div>')")
    page.evaluate("location.hash = 'view=head&layer=2&head=1'")
    page.wait_for_selector(".rgv[data-rgv-state='view=head&layer=2&head=1']")
    # at the top of the window, below the room kept for Material's sticky header (scroll-margin-top)
    top, margin = page.evaluate("[document.querySelector('.rgv').getBoundingClientRect().top,"
                                " parseFloat(getComputedStyle(document.querySelector('.rgv')).scrollMarginTop)]")
    assert margin > 40 and abs(top - margin) < 5 and page.evaluate("scrollY") > 2000
    _clean(view)


def test_a_link_from_another_page_lands_on_the_view(pages, open_at):
    """A finding's "(view)" link opens the page scrolled to the view, not at the top of the page."""
    view = open_at(_url(pages, "tall.html", "view=head&layer=2&head=1&token=4"), "desktop")
    top, margin = view.page.evaluate("[document.querySelector('.rgv').getBoundingClientRect().top,"
                                     " parseFloat(getComputedStyle(document.querySelector('.rgv')).scrollMarginTop)]")
    assert abs(top - margin) < 5 and view.page.evaluate("scrollY") > 2000
    _clean(view)


def test_hovering_a_token_moves_nothing_under_the_pointer(pages, open_at):
    """Numbers appear beside the other column in room kept for them, so the columns stay where they were."""
    view = open_at(_url(pages, "pair.html", "view=head&layer=1"))
    page = view.page
    where = "['.rgv-left', '.rgv-lines', '.rgv-right'].map(s => document.querySelector(s).getBoundingClientRect().x)"
    before = page.evaluate(where)
    page.hover('.rgv-right .rgv-tok[data-i="5"]')
    assert page.locator(".rgv-left .rgv-inline-num").count() == 19  # the queries' weights to key 5
    assert page.evaluate(where) == before
    page.hover('.rgv-left .rgv-tok[data-i="5"]')
    assert page.locator(".rgv-right .rgv-inline-num").count() == 19 and page.evaluate(where) == before
    _clean(view)
