"""The model view in headless Chromium: room for every head, the current layer in the link, heads enlarged in place.

Standalone pages (the views' scripts, views.css and one payload) from tiny random BERTs shaped like
BERT-base (12 heads) and BERT-large (16 heads), in a 1300 px column (an example page without its
table of contents) and in a 688 px one (a documentation column), at 1366x900 and 390x844.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reportgen.config import ExampleSpec
from reportgen.site.views import example_payload, standalone_page, views_html
from tests.helpers import ROOT, TINY_WORDS, BrowserPage, next_frames, wait_until

pytestmark = pytest.mark.slow  # a browser (the models are tiny: seconds)

ASSETS = ROOT / "site_src" / "assets"
SPEC = ExampleSpec(text="i went to the store.", pair="at the store, i bought fresh strawberries.")
SHAPES = {"base": (6, 12), "large": (24, 16)}  # (layers, heads)
COLUMNS = (1300, 688)
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# Every thumbnail and label against its scroll box: inside its visible area, or the box scrolls on that
# axis with sticky labels. Client px; `slack` absorbs sub-pixel layout.
GEOMETRY = """() => {
  const box = document.querySelector('.rgv-grid-box');
  const area = box.getBoundingClientRect();
  const style = getComputedStyle(box);
  const left = area.left + box.clientLeft, top = area.top + box.clientTop;
  const rects = [...document.querySelectorAll('.rgv-thumb')].map(t => t.getBoundingClientRect());
  const slack = 0.5;
  return {
    clientWidth: box.clientWidth, scrollWidth: box.scrollWidth, clientHeight: box.clientHeight,
    scrollHeight: box.scrollHeight, overflowX: style.overflowX, overflowY: style.overflowY,
    outsideX: rects.filter(r => r.left < left - slack || r.right > left + box.clientWidth + slack).length,
    outsideY: rects.filter(r => r.top < top - slack || r.bottom > top + box.clientHeight + slack).length,
    thumbWidth: rects[0].width, thumbs: rects.length,
    layerSticky: getComputedStyle(document.querySelector('.rgv-grid-layer')).position,
    headSticky: getComputedStyle(document.querySelector('.rgv-grid-head')).position,
    pageWidth: document.documentElement.scrollWidth, innerWidth,
    hint: document.querySelector('.rgv-grid-hint').hidden ? null : document.querySelector('.rgv-grid-hint').textContent,
  };
}"""


def _tiny_bert(target: Path, layers: int, heads: int) -> Path:
    """A random BERT of the given shape (4 dimensions per head: tests/helpers.make_tiny_bert has 32 in all)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    BertTokenizer(vocab={word: index for index, word in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=4 * heads, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """name-column -> page, e.g. "base-1300": the 6x12 model in a 1300 px column."""
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    root = tmp_path_factory.mktemp("model-view")
    shutil.copytree(ASSETS, root / "assets")
    out = {}
    for name, (layers, heads) in SHAPES.items():
        model, tokenizer = load(_tiny_bert(root / name, layers, heads), "cpu")
        body = views_html(example_payload(run_example(model, tokenizer, SPEC, 128)))
        for column in COLUMNS:
            page = root / f"{name}-{column}.html"
            wrapped = f'<main style="max-width:{column}px;margin:0 auto;padding:0 16px">{body}</main>'
            page.write_text(standalone_page(wrapped, page.stem), encoding="utf-8")
            out[f"{name}-{column}"] = page
    return out


@pytest.fixture
def open_view(new_tab):
    """open_view(page, hash, viewport) -> BrowserPage with the views started; its tab closed after the test."""

    def _open(page: Path, fragment: str, viewport: dict) -> BrowserPage:
        view = new_tab((viewport["width"], viewport["height"]))
        view.page.goto(page.as_uri() + fragment)
        view.page.wait_for_selector(".rgv[data-rgv-state]", timeout=10_000)
        next_frames(view.page)  # the grid sizes itself and reveals the layer on the next frames
        return view

    return _open


def _clean(view: BrowserPage) -> None:
    assert view.errors == [] and view.remote_requests == [] and view.dialogs == [], (view.errors, view.remote_requests)


def _state(page) -> str:
    return page.get_attribute(".rgv", "data-rgv-state")


def _grid_top(page) -> float:
    return page.evaluate("document.querySelector('.rgv-grid').getBoundingClientRect().top")


def _current_layers(page) -> list[int]:
    return page.eval_on_selector_all('.rgv-grid-layer[aria-current="true"]', "els => els.map(e => +e.dataset.layer)")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
@pytest.mark.parametrize("name", ["base-1300", "large-1300", "base-688", "large-688"])
def test_every_thumbnail_is_in_sight_or_its_box_scrolls(pages, open_view, name, viewport):
    view = open_view(pages[name], "#view=model", viewport)
    geometry = view.page.evaluate(GEOMETRY)
    layers, heads = SHAPES[name.split("-")[0]]
    assert geometry["thumbs"] == layers * heads
    assert geometry["pageWidth"] <= geometry["innerWidth"], geometry  # the page itself never scrolls sideways
    if geometry["outsideX"]:
        assert geometry["scrollWidth"] > geometry["clientWidth"] and geometry["overflowX"] == "auto", geometry
        assert geometry["layerSticky"] == "sticky" and "sideways for heads" in geometry["hint"], geometry
    if geometry["outsideY"]:
        assert geometry["scrollHeight"] > geometry["clientHeight"] and geometry["overflowY"] == "auto", geometry
        assert geometry["headSticky"] == "sticky" and "down for layers" in geometry["hint"], geometry
    if viewport is LAPTOP:
        # every head across at 1366 px, in the full-width column and in the documentation column
        assert geometry["outsideX"] == 0 and geometry["scrollWidth"] <= geometry["clientWidth"], geometry
        assert geometry["thumbWidth"] >= 36
    if viewport is LAPTOP and name == "base-1300":
        assert geometry["outsideY"] == 0 and geometry["hint"] is None and geometry["thumbWidth"] >= 80, geometry
    if viewport is PHONE:
        assert geometry["outsideX"] > 0  # 12 heads of at least 36 px do not fit in 358 px: the box scrolls
    _clean(view)


def test_labels_stay_in_sight_while_the_box_scrolls(pages, open_view):
    view = open_view(pages["large-688"], "#view=model", PHONE)
    page = view.page
    page.evaluate("const box = document.querySelector('.rgv-grid-box'); box.scrollLeft = 300; box.scrollTop = 400;")
    next_frames(page)
    where = page.evaluate("""() => {
      const box = document.querySelector('.rgv-grid-box').getBoundingClientRect();
      const label = document.querySelector('.rgv-grid-layer[data-layer="10"]').getBoundingClientRect();
      const head = document.querySelectorAll('.rgv-grid-head')[9].getBoundingClientRect();
      return {boxLeft: box.left, boxTop: box.top, labelLeft: label.left, headTop: head.top};
    }""")
    assert abs(where["labelLeft"] - where["boxLeft"]) < 1 and abs(where["headTop"] - where["boxTop"]) < 1, where
    hint = page.text_content(".rgv-grid-hint")
    assert "sideways for heads 0\u2013" in hint and "up for layers 0\u2013" in hint, hint  # says what is out of sight
    _clean(view)


LAYER_IN_SIGHT = """layer => {
  const r = document.querySelector(`.rgv-grid-layer[data-layer="${layer}"]`).getBoundingClientRect();
  const box = document.querySelector('.rgv-grid-box').getBoundingClientRect();
  return r.top >= Math.max(0, box.top) && r.bottom <= Math.min(box.bottom, innerHeight);
}"""


def _comes_into_sight(page, layer: int) -> bool:
    """Whether the layer's row is in sight within 3 s (the grid reveals it on an animation frame)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        wait_until(page, LAYER_IN_SIGHT, arg=layer, timeout=3000)
    except PlaywrightTimeout:
        return False
    return True


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_deep_link_opens_the_grid_at_its_layer(pages, open_view, viewport):
    view = open_view(pages["base-688"], "#view=model&layer=5", viewport)
    page = view.page
    assert _state(page) == "view=model&layer=5"
    assert _current_layers(page) == [5]
    row = page.eval_on_selector_all(".rgv-thumb.rgv-in-layer", "els => els.map(e => +e.dataset.layer)")
    assert row == [5] * 12
    assert page.input_value(".rgv-layer") == "5"
    assert _comes_into_sight(page, 5)
    _clean(view)


def test_deep_link_scrolls_a_tall_grid_inside_its_box(pages, open_view):
    view = open_view(pages["large-688"], "#view=model&layer=20", LAPTOP)
    page = view.page
    assert _current_layers(page) == [20]
    assert _comes_into_sight(page, 20)
    assert page.evaluate("document.querySelector('.rgv-grid-box').scrollTop") > 0
    # links followed on the page (hashchange) scroll the box to their layer
    page.evaluate("location.hash = 'view=model&layer=1'")
    assert _comes_into_sight(page, 1) and _current_layers(page) == [1]
    assert not page.evaluate(LAYER_IN_SIGHT, 20)
    page.evaluate("location.hash = 'view=head&layer=20'")
    page.evaluate("location.hash = 'view=model&layer=20'")  # the same layer as before, but the grid was scrolled away
    assert _comes_into_sight(page, 20) and _current_layers(page) == [20]
    _clean(view)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_layer_labels_and_the_layer_select_choose_the_row(pages, open_view, viewport):
    view = open_view(pages["base-1300"], "", viewport)
    page = view.page
    assert page.is_visible(".rgv-heads")
    shown = page.evaluate("""() => {
      document.querySelector('.rgv-tab[data-view="model"]').click();
      return document.querySelector('.rgv-grid').getBoundingClientRect().top;
    }""")  # where the grid is when the click returns, before any later frame
    next_frames(page, 4)
    assert _grid_top(page) == shown  # nothing shows up above the grid after it is drawn
    assert not page.is_visible(".rgv-heads")  # head toggles act on the head view only: hidden here
    assert _state(page) == "view=model&layer=0" and _current_layers(page) == [0]
    page.click('.rgv-grid-layer[data-layer="3"]')
    assert page.evaluate("location.hash") == "#view=model&layer=3" and _current_layers(page) == [3]
    assert page.input_value(".rgv-layer") == "3"
    page.select_option(".rgv-layer", "1")
    assert page.evaluate("location.hash") == "#view=model&layer=1" and _current_layers(page) == [1]
    page.click('.rgv-tab[data-view="head"]')
    assert page.is_visible(".rgv-heads") and _state(page).startswith("view=head&layer=1&")
    _clean(view)


# Centres of the enlarged head's token rows (client px).
TOKEN_CENTRES = """() => [...document.querySelectorAll('.rgv-zoom .rgv-tok')].map(tok => {
  const r = tok.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
})"""


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_thumbnail_opens_its_head_over_the_grid(pages, open_view, viewport):
    view = open_view(pages["base-1300"], "#view=model", viewport)
    page = view.page
    before = _grid_top(page)
    page.click('.rgv-thumb[data-layer="2"][data-head="3"]')
    page.wait_for_selector("dialog.rgv-zoom[open]")
    assert _grid_top(page) == before  # nothing pushed down: the head opens over the grid
    assert page.evaluate("location.hash") == "#view=model&layer=2&head=3"
    assert page.text_content(".rgv-zoom-title") == "Layer 2, head 3"
    n = page.locator(".rgv-zoom .rgv-left .rgv-tok").count()
    assert page.get_attribute(".rgv-zoom svg.rgv-lines", "data-lines") == str(n * n)
    edges = page.evaluate("(() => { const r = document.querySelector('dialog.rgv-zoom').getBoundingClientRect();"
                          " return [r.left, r.right]; })()")
    assert edges[0] >= 0 and edges[1] <= viewport["width"]
    page.keyboard.press("Escape")
    # the dialog's close event, which writes the link, comes a task after [open] goes (a race under load)
    wait_until(page, "() => location.hash === '#view=model&layer=2'")
    assert not page.evaluate("document.querySelector('dialog.rgv-zoom').open") and _grid_top(page) == before
    focused = page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]")
    assert focused == ["2", "3"]  # focus back on the thumbnail
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    _clean(view)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_pointer_that_opened_a_head_does_not_pick_a_token(pages, open_view, viewport):
    """Clicked where a token of the dialog will be, the still pointer is not taken as hovering that token."""
    view = open_view(pages["base-1300"], "#view=model", viewport)
    page = view.page
    page.click('.rgv-thumb[data-layer="0"][data-head="0"]')
    tokens = page.evaluate(TOKEN_CENTRES)
    page.click(".rgv-zoom-close")
    under = "([x, y]) => { const hit = document.elementFromPoint(x, y); return !!hit && hit.matches('.rgv-thumb'); }"
    spot = next((point for point in tokens if page.evaluate(under, point)), None)
    assert spot is not None, "no token of the dialog lies over a thumbnail"
    page.mouse.click(*spot)
    page.wait_for_selector("dialog.rgv-zoom[open]")
    next_frames(page)
    n = page.locator(".rgv-zoom .rgv-left .rgv-tok").count()
    assert page.locator(".rgv-zoom .rgv-tok.rgv-active").count() == 0
    assert page.get_attribute(".rgv-zoom svg.rgv-lines", "data-lines") == str(n * n)  # every line, not one token's
    page.mouse.move(spot[0] + 1, spot[1] + 1)  # a hand's tremor is not a move either
    assert page.locator(".rgv-zoom .rgv-tok.rgv-active").count() == 0
    _clean(view)


def test_the_enlarged_head_answers_the_pointer_once_it_moves(pages, open_view):
    view = open_view(pages["base-1300"], "#view=model", LAPTOP)
    page = view.page
    page.click('.rgv-thumb[data-layer="1"][data-head="4"]')
    page.hover('.rgv-zoom .rgv-left .rgv-tok[data-i="5"]')
    lines = page.eval_on_selector_all(".rgv-zoom line.rgv-line", "els => els.map(e => [+e.dataset.head, +e.dataset.q])")
    n = page.locator(".rgv-zoom .rgv-left .rgv-tok").count()
    assert lines == [[4, 5]] * n  # token 5's lines, of head 4 only
    page.click(".rgv-zoom-close")
    assert not page.evaluate("document.querySelector('dialog.rgv-zoom').open")
    assert page.evaluate("location.hash") == "#view=model&layer=1"
    _clean(view)


def test_deep_link_to_an_enlarged_head_and_its_copy_link(pages, open_view):
    view = open_view(pages["base-688"], "#view=model&layer=4&head=7", LAPTOP)
    page = view.page
    page.wait_for_selector("dialog.rgv-zoom[open]")
    assert page.text_content(".rgv-zoom-title") == "Layer 4, head 7" and _current_layers(page) == [4]
    page.click(".rgv-zoom .rgv-copy")
    assert page.input_value(".rgv-zoom .rgv-link").endswith("#view=model&layer=4&head=7")
    page.click(".rgv-zoom-head")  # "Open in head view"
    assert _state(page) == "view=head&layer=4&head=7"
    assert page.is_visible(".rgv-head-panel .rgv-stage")
    _clean(view)


def test_thumbnails_and_the_dialog_work_from_the_keyboard(pages, open_view):
    view = open_view(pages["base-1300"], "#view=model&layer=2", LAPTOP)
    page = view.page
    page.focus(".rgv-copy")
    page.keyboard.press("Tab")
    assert page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]") == ["2", "0"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_selector("dialog.rgv-zoom[open]")
    assert page.evaluate("location.hash") == "#view=model&layer=3&head=1"
    assert page.evaluate("document.activeElement.className") == "rgv-zoom-close"
    page.keyboard.press("Escape")
    # the dialog's close event is a task of its own: wait for the view to take it
    wait_until(page, "() => !document.querySelector('dialog.rgv-zoom').open && !location.hash.includes('head=')")
    assert page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]") == ["3", "1"]
    page.keyboard.press("Home")  # the row's label
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    wait_until(page, "() => location.hash === '#view=model&layer=2'", timeout=5_000)
    assert _current_layers(page) == [2]
    # the grid is one tab stop: Tab leaves it
    page.keyboard.press("Tab")
    assert not page.evaluate("document.querySelector('.rgv-grid').contains(document.activeElement)")
    _clean(view)


def test_one_escape_closes_the_enlarged_head_with_a_token_pinned(pages, open_view):
    """Issue 28: with a token pinned in the dialog, the first Escape cleared the pin and only a second one
    closed it; now one press closes it, and the pin stays in the link."""
    view = open_view(pages["base-1300"], "#view=model&layer=1&head=4&token=3", LAPTOP)
    page = view.page
    page.wait_for_selector("dialog.rgv-zoom[open]")
    page.wait_for_selector(".rgv-zoom .rgv-left .rgv-tok[data-i='3'][aria-pressed='true']", timeout=5_000)
    page.focus(".rgv-zoom .rgv-left .rgv-tok[data-i='3']")  # Escape where the pinned token is
    page.keyboard.press("Escape")
    # the dialog's close event, which writes the link, comes a task after [open] goes (a race under load)
    wait_until(page, "() => !document.querySelector('dialog.rgv-zoom').open && !location.hash.includes('head=')",
               timeout=5_000)
    assert page.evaluate("location.hash") == "#view=model&layer=1&token=3"
    _clean(view)
