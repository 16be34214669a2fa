"""The weights | contributions switch of the head and model views (issue 14), in headless Chromium.

Contributions (Kobayashi et al. 2020) are ||A[i, j] f(x_j)||; the pages store them as per-row shares with
each row's total (reportgen/views.py). Checked here: a deep link with mode=contributions shows the shares
the payload holds, flipping the switch changes the link and the drawn values and keeps everything else,
the thumbnails and the enlarged head redraw, a long example loads its contribution files only when they
are shown, a page without contributions has no switch and says so to a link that asks for them, and the
toolbar with the switch fits a laptop and a phone on a built site.

Standalone pages (the views' scripts and views.css) from tiny random BERTs: 3 layers x 12 heads on the seed
pair (19 tokens), and 2 x 4 with 512 positions on a 300-token text, whose data is over the 1 MB inline
limit, so it lives in data files as a long example's does in a site.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.site import view_files
from reportgen.site.views import (
    decode_attention,
    decode_contributions,
    example_payload,
    standalone_page,
    views_html,
)
from tests.helpers import ROOT, TINY_WORDS, VIEW_DRAWN, VIEWPORTS, BrowserPage, wait_until

pytestmark = pytest.mark.slow  # a browser, and tiny models run

ASSETS = ROOT / "site_src" / "assets"
PAIR = ExampleSpec(text="i went to the store.", pair="at the store, i bought fresh strawberries.")
LONG = ExampleSpec(text=" ".join(["the cat sat on the mat and the dog sat on a red car ."] * 20))
COLUMN = '<main style="max-width: 688px">{}</main>'

# Every number the table shows, with its test-hook attributes.
NUMBERS_JS = """() => [...document.querySelectorAll('.rgv-num')].map(n => ({h: +n.dataset.head, q: +n.dataset.q,
  k: +n.dataset.k, w: +n.dataset.w, m: n.dataset.m === undefined ? null : +n.dataset.m, text: n.textContent,
  title: n.title}))"""
# Where the toolbars' controls are against the window and their own bar: none may be cut off or out of sight.
TOOLBAR_JS = """(selector) => {
  const bar = document.querySelector(selector);
  const box = bar.getBoundingClientRect();
  const cut = [...bar.querySelectorAll('button, select, input, a, .rgv-field-label')].filter(node => {
    if (node.hidden || node.closest('[hidden]')) return false;
    const r = node.getBoundingClientRect();
    return r.left < Math.max(0, box.left) - 0.5 || r.right > Math.min(innerWidth, box.right) + 0.5;
  }).map(node => node.textContent || node.className);
  return {cut, barRight: box.right, innerWidth, pageWidth: document.documentElement.scrollWidth,
          barScrolls: bar.scrollWidth > bar.clientWidth + 1};
}"""


def _tiny_bert(target: Path, layers: int, heads: int, positions: int = 128) -> Path:
    """A random BERT of the given shape, 4 dimensions per head (tests/helpers.make_tiny_bert has 32 in all)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    BertTokenizer(vocab={word: index for index, word in enumerate(TINY_WORDS)}).save_pretrained(target)
    config = BertConfig(vocab_size=len(TINY_WORDS), hidden_size=4 * heads, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=positions)
    BertModel(config).save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    from reportgen.model.loading import load
    from reportgen.model.run import run_example

    root = tmp_path_factory.mktemp("contributions")
    shutil.copytree(ASSETS, root / "assets")
    model, tokenizer = load(_tiny_bert(root / "bert-3x12", 3, 12), "cpu")
    pair = run_example(model, tokenizer, PAIR, 128)
    model, tokenizer = load(_tiny_bert(root / "bert-2x4", 2, 4, positions=512), "cpu")
    long = run_example(model, tokenizer, LONG, 512)
    assert pair.n_tokens == 19 and pair.value_norms is not None and long.n_tokens > 200
    weights_only = example_payload(pair)
    del weights_only["contributions"]  # as a model whose heads reportgen cannot locate
    long_payload = example_payload(long)
    with pytest.MonkeyPatch.context() as patch:  # deflated, its 2 x 4 heads are under the limit: put it over
        patch.setattr(view_files, "VIEWS_INLINE_LIMIT", 1000)
        long_html = view_files.example_html(root, 7, long_payload)
    assert (root / "example-7-data" / "c-l0h0.js").exists()  # over the inline limit: everything in files
    for name, body in {"pair.html": COLUMN.format(views_html(example_payload(pair))),
                       "weights-only.html": COLUMN.format(views_html(weights_only)),
                       "long.html": long_html}.items():
        (root / name).write_text(standalone_page(body, name), encoding="utf-8")
    return {"root": root, "pair": example_payload(pair), "long": long_payload}


@pytest.fixture
def open_at(open_page):
    """open_at(url, size) -> BrowserPage at one of VIEWPORTS with its view drawn."""
    return lambda url, size="desktop": open_page(url, size, wait_ms=0, wait_for=VIEW_DRAWN)


def _url(pages, name: str, fragment: str = "") -> str:
    return (pages["root"] / name).as_uri() + (f"#{fragment}" if fragment else "")


def _clean(view: BrowserPage) -> None:
    assert view.errors == [] and view.remote_requests == [] and view.dialogs == [], (view.errors, view.remote_requests)


def _state(page) -> str:
    return page.get_attribute(".rgv", "data-rgv-state")


def _numbers(page) -> list[dict]:
    return page.evaluate(NUMBERS_JS)


def _weight_text(value: float) -> str:
    """views-head.js weightText: four decimals without the leading zero."""
    return "1.000" if value >= 0.99995 else f"{value:.4f}".removeprefix("0")


def test_a_deep_link_opens_contributions_and_shows_the_stored_shares(pages, open_at):
    view = open_at(_url(pages, "pair.html", "view=head&layer=1&head=3&token=4&mode=contributions"))
    page = view.page
    shares, totals = decode_contributions(pages["pair"]["contributions"])
    weights = decode_attention(pages["pair"]["attention"])
    numbers = _numbers(page)
    assert [(n["h"], n["q"], n["k"]) for n in numbers] == [(3, 4, key) for key in range(19)]
    for number in numbers:
        share = shares[1, 3, 4, number["k"]]
        assert abs(number["w"] - share) < 1e-12 and number["text"] == _weight_text(share)
        assert abs(number["m"] - share * totals[1, 3, 4]) < 1e-6 * max(1.0, number["m"])
        assert "of what it passes on to #4 the; ||A f|| = " in number["title"]
    # the head passes on something other than its weights: the numbers are the shares, not the weights
    differs = max(abs(n["w"] - weights[1, 3, 4, n["k"]]) for n in numbers)
    assert differs > 0.005, differs
    assert page.get_attribute('.rgv-mode-btn[data-mode="contributions"]', "aria-pressed") == "true"
    assert page.get_attribute('.rgv-mode-btn[data-mode="weights"]', "aria-pressed") == "false"
    assert page.is_visible(".rgv-mode-note") and "Kobayashi et al. 2020" in page.inner_text(".rgv-mode-note")
    assert page.inner_text(".rgv-weights-title").startswith("Contributions to #4 the, layer 1")
    totals_row = page.eval_on_selector_all(".rgv-wtable-total td", "cells => cells.map(c => +c.textContent)")
    assert totals_row == [pytest.approx(float(totals[1, 3, 4]), rel=0.006)]  # three significant digits
    assert not page.is_visible(".rgv-hash-note")
    lines = page.eval_on_selector_all("line.rgv-line", "els => els.map(e => [+e.dataset.k, +e.dataset.w])")
    assert len(lines) == 19 and all(abs(w - shares[1, 3, 4, k]) < 1e-12 for k, w in lines)
    _clean(view)


def test_flipping_the_switch_changes_the_link_and_the_values_and_keeps_the_rest(pages, open_at):
    view = open_at(_url(pages, "pair.html", "view=head&layer=1&head=3,5&token=4"))
    page = view.page
    shares, _ = decode_contributions(pages["pair"]["contributions"])
    weights = decode_attention(pages["pair"]["attention"])
    assert all(abs(n["w"] - weights[1, n["h"], 4, n["k"]]) < 1e-12 and n["m"] is None for n in _numbers(page))
    assert page.inner_text(".rgv-mode-note").startswith("Showing attention weights")
    assert page.locator(".rgv-field-label", has_text="Min weight").count() == 1
    page.click('.rgv-mode-btn[data-mode="contributions"]')
    assert page.evaluate("location.hash") == "#view=head&layer=1&head=3,5&token=4&mode=contributions"
    assert all(abs(n["w"] - shares[1, n["h"], 4, n["k"]]) < 1e-12 for n in _numbers(page))
    assert page.locator(".rgv-field-label", has_text="Min share").count() == 1
    # layer, token and view changes keep the mode
    page.select_option(".rgv-layer", "2")
    page.click('.rgv-left .rgv-tok[data-i="6"]')
    assert _state(page) == "view=head&layer=2&head=3,5&token=6&mode=contributions"
    assert all(abs(n["w"] - shares[2, n["h"], 6, n["k"]]) < 1e-12 for n in _numbers(page))
    page.click('.rgv-tab[data-view="model"]')
    assert _state(page) == "view=model&layer=2&token=6&mode=contributions"
    # the keyboard reaches the switch: Space on the focused button flips it back
    page.focus('.rgv-toolbar .rgv-mode-btn[data-mode="weights"]')
    page.keyboard.press("Space")
    assert page.evaluate("location.hash") == "#view=model&layer=2&token=6"
    page.click('.rgv-tab[data-view="head"]')
    assert all(abs(n["w"] - weights[2, n["h"], 6, n["k"]]) < 1e-12 for n in _numbers(page))
    _clean(view)


def _thumb_pixels(page, layer: int, head: int) -> str:
    return page.eval_on_selector(f'.rgv-thumb[data-layer="{layer}"][data-head="{head}"]', "c => c.toDataURL()")


def test_the_model_view_redraws_its_thumbnails_and_the_enlarged_head(pages, open_at):
    view = open_at(_url(pages, "pair.html", "view=model&layer=1"))
    page = view.page
    wait_until(page, "() => document.querySelectorAll('.rgv-thumb[data-drawn]').length === 36")
    before = [_thumb_pixels(page, 1, head) for head in range(12)]
    page.click('.rgv-mode-btn[data-mode="contributions"]')
    wait_until(page, "() => [...document.querySelectorAll('.rgv-thumb')].every(c => "
                     "(c.dataset.drawn || '').endsWith('|contributions'))")
    after = [_thumb_pixels(page, 1, head) for head in range(12)]
    assert sum(a != b for a, b in zip(before, after, strict=True)) >= 6  # the drawings changed, not only their keys
    # the enlarged head draws contributions, and its own switch (the toolbar is behind the dialog) flips it
    page.click('.rgv-thumb[data-layer="1"][data-head="3"]')
    page.wait_for_selector("dialog.rgv-zoom[open]")
    assert _state(page) == "view=model&layer=1&head=3&mode=contributions"
    page.hover('dialog .rgv-left .rgv-tok[data-i="4"]')
    shares, _ = decode_contributions(pages["pair"]["contributions"])
    weights = decode_attention(pages["pair"]["attention"])
    assert all(abs(n["w"] - shares[1, 3, 4, n["k"]]) < 1e-12 for n in _numbers(page))
    page.click('dialog .rgv-mode-btn[data-mode="weights"]')
    assert page.is_visible("dialog.rgv-zoom") and _state(page) == "view=model&layer=1&head=3"
    assert page.get_attribute('dialog .rgv-mode-btn[data-mode="weights"]', "aria-pressed") == "true"
    page.hover('dialog .rgv-left .rgv-tok[data-i="5"]')
    page.hover('dialog .rgv-left .rgv-tok[data-i="4"]')
    assert all(abs(n["w"] - weights[1, 3, 4, n["k"]]) < 1e-12 for n in _numbers(page))
    _clean(view)


def test_a_page_without_contributions_has_no_switch_and_says_so_to_a_link(pages, open_at):
    view = open_at(_url(pages, "weights-only.html", "view=head&layer=1&head=3&token=4&mode=contributions"))
    page = view.page
    assert page.locator(".rgv-mode, .rgv-mode-btn, .rgv-mode-note").count() == 0
    note = page.locator(".rgv-hash-note")
    assert note.is_visible()
    assert note.inner_text().startswith("The link asked for contributions; this page has attention weights only. "
                                        "Showing weights.")
    assert _state(page) == "view=head&layer=1&head=3&token=4"  # weights, and the rest of the link as asked
    weights = decode_attention(pages["pair"]["attention"])
    assert all(abs(n["w"] - weights[1, 3, 4, n["k"]]) < 1e-12 for n in _numbers(page))
    _clean(view)


def test_a_long_example_loads_its_contribution_files_only_when_they_are_shown(pages, open_at):
    view = open_at(_url(pages, "long.html", "view=head&layer=1&head=2"))
    page = view.page

    def data_files(prefix: str) -> list[str]:
        return sorted(name for name in view.requested if name.endswith(".js") and name.startswith(prefix))

    assert data_files("l") == ["l1h2.js"] and data_files("c-") == []  # weights: the head drawn, nothing more
    page.click('.rgv-mode-btn[data-mode="contributions"]')
    page.wait_for_selector('.rgv[data-rgv-state$="mode=contributions"]:not([data-rgv-loading])')
    assert data_files("c-") == ["c-l1h2.js"] and data_files("l") == ["l1h2.js"]
    files = pages["root"] / "example-7-data"
    names = [f"c-l{layer}h{head}" for layer in range(2) for head in range(4)]
    texts = [view_files.read_data_script((files / f"{name}.js").read_text())[2] for name in names]
    encoded = pages["long"]["contributions"]
    shares, _ = decode_contributions(view_files.unpack_contributions(texts, encoded["shape"], encoded["compressed"]))
    page.click('.rgv-left .rgv-tok[data-i="7"]')
    lines = page.eval_on_selector_all("line.rgv-line", "els => els.map(e => [+e.dataset.k, +e.dataset.w])")
    assert len(lines) > 200 and all(abs(w - shares[1, 2, 7, k]) < 1e-12 for k, w in lines)
    weights = decode_attention(dict(pages["long"]["attention"]))
    assert max(abs(w - weights[1, 2, 7, k]) for k, w in lines) > 1e-4  # the shares, not the weights
    page.click('.rgv-tab[data-view="model"]')  # every head's contributions; still no other weights file
    page.wait_for_selector('.rgv[data-rgv-state^="view=model"]:not([data-rgv-loading])')
    # a long input's thumbnails load their heads one after another (views-heatmap.js loadThumb)
    page.wait_for_function(f"() => !document.querySelector('[data-rgv-thumbs-pending]') && "
                           f"document.querySelectorAll('.rgv-thumb[data-drawn]').length === {len(names)}")
    assert data_files("c-") == sorted(f"{name}.js" for name in names) and data_files("l") == ["l1h2.js"]
    _clean(view)


@pytest.fixture(scope="module")
def built_site(tmp_path_factory, tiny_model) -> Path:
    """A site built by `reportgen build` from the tiny model (whose heads reportgen locates: contributions)."""
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import write_config

    project = tmp_path_factory.mktemp("contributions-site")
    write_config(project, f"model: {tiny_model}\ndevice: cpu\nexamples:\n  - text: {PAIR.text}\n"
                          f"    pair: {PAIR.pair}\nablation:\n  enabled: false\n")
    build(load_config(project / "reportgen.yaml"))
    return project / "site"


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_the_switch_fits_the_toolbar_of_a_built_site(built_site, open_at, size):
    view = open_at((built_site / "example-1.html").as_uri() + "#view=head&layer=1&token=4&mode=contributions", size)
    page = view.page
    assert page.get_attribute('.rgv-mode-btn[data-mode="contributions"]', "aria-pressed") == "true"
    assert [page.get_attribute(".rgv-mode", name) for name in ("role", "aria-label")] == ["group", "Show"]
    # flipping moves nothing: the note on what the numbers are keeps its room (two lines on a laptop)
    where = "document.querySelector('.rgv-pair').getBoundingClientRect().top"
    before = page.evaluate(where)
    page.click('.rgv-mode-btn[data-mode="weights"]')
    if size == "desktop":
        assert page.evaluate(where) == before
    page.click('.rgv-mode-btn[data-mode="contributions"]')
    assert page.evaluate(where) == before
    assert page.locator(".rgv-num[data-m]").count() == 4 * 19  # the tiny model's 4 heads, every key
    fit = page.evaluate(TOOLBAR_JS, ".rgv-toolbar")
    assert fit["cut"] == [] and not fit["barScrolls"] and fit["pageWidth"] <= fit["innerWidth"], fit
    page.click('.rgv-tab[data-view="model"]')
    page.click('.rgv-thumb[data-layer="1"][data-head="2"]')
    page.wait_for_selector("dialog.rgv-zoom[open]")
    fit = page.evaluate(TOOLBAR_JS, "dialog .rgv-zoom-bar")
    assert fit["cut"] == [] and not fit["barScrolls"], fit
    _clean(view)


def test_example_template_explains_the_switch_only_where_there_is_one(tmp_path):
    """The page's sentence on the switch (Kobayashi et al. 2020), from site_src/templates/example.md.j2."""
    from reportgen.site import pages as page_render

    templates = ASSETS.parent / "templates"
    env = page_render.environment(templates)
    context = {"ex": {"id": 1, "name": None, "text": "<b>x</b>", "pair": None, "truncated": False, "n_tokens": 3,
                      "qk_page": None, "qk_mb": None},
               "tokens": [], "views": "", "ln_n": float(np.log(3)), "patterns": [],
               "selectivity": None, "summary_chart": {}, "summary_picture": "",
               "pager": {"previous": None, "next": None},
               "head_map": {"id": "head-map-example-1", "model": "m", "metric": None, "svg": ""}}
    recorder = page_render.Charts()
    page_render.render(env, "example.md.j2", tmp_path / "with.md", recorder, contributions=True, **context)
    page_render.render(env, "example.md.j2", tmp_path / "without.md", recorder, contributions=False, **context)
    with_switch = (tmp_path / "with.md").read_text()
    assert "**Show: weights | contributions**" in with_switch and "Kobayashi et al. 2020" in with_switch
    assert "<b>x</b>" not in with_switch and "&#60;b&#62;x" in with_switch  # user text stays text
    assert "contributions" not in (tmp_path / "without.md").read_text()
