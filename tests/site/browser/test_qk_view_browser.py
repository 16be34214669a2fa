"""The query/key view and the data files of long views, in headless Chromium from file://.

Standalone pages (reportgen.site.views.standalone_page) from synthetic runs: random query and key
vectors with BERT-base's head size (64) and the model's weights as their softmax, so the pages are
as wide as a real model's without running one. Data files come from reportgen.site.view_files with
its limits set to 0, exactly as a long example's page gets them in a site.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from axe_playwright_python.sync_playwright import Axe

from reportgen.config import ExampleSpec
from reportgen.runs import ExampleRun
from reportgen.site import view_files
from reportgen.site.views import (
    decode_attention,
    decode_qk_layer,
    decoded_softmax,
    example_payload,
    qk_html,
    qk_payload,
    standalone_page,
)
from tests.helpers import ROOT, VIEW_DRAWN, wait_until
from tests.site.test_long_qk import _causal_run

pytestmark = pytest.mark.slow

ASSETS = ROOT / "site_src" / "assets"
MAX_ERR = 0.5 / 255
TOKENS = ["[CLS]", "i", "went", "to", "the", "store", ".", "[SEP]", "at", "the", "store", ",", "i", "bought",
          "fresh", "straw", "##berries", ".", "[SEP]"]
QK_SHAPE = (3, 4, 19, 64)  # layers, heads, tokens, head size
LONG_SHAPE = (2, 3, 80, 8)  # over views-core.js LONG_INPUT (64): the head view starts with one head
LONG_QK_SHAPE = (2, 3, 300, 16)  # a decoder's query/key page past QK_PAGE (64) tokens, its rows long (> 256 keys)
DESKTOP, PHONE = (1366, 900), (390, 844)


def _run(shape: tuple[int, int, int, int], seed: int) -> ExampleRun:
    layers, heads, n, dim = shape
    rng = np.random.default_rng(seed)
    queries = rng.normal(size=shape).astype(np.float32)
    queries[..., 3] *= 6  # one large dimension, as real projections have
    keys = rng.normal(size=shape).astype(np.float32)
    scores = np.einsum("lhqd,lhkd->lhqk", queries.astype(np.float64), keys) / np.sqrt(dim)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    tokens = (TOKENS * (n // len(TOKENS) + 1))[:n]
    segments = np.array(([-1] + [0] * 6 + [-1] + [1] * 10 + [-1] + [1] * n)[:n])
    return ExampleRun(ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries."),
                      tokens, segments, segments, np.array([t.startswith("[") for t in tokens]),
                      (weights / weights.sum(-1, keepdims=True)).astype(np.float32),
                      extras={"queries": queries, "keys": keys, "scaling": np.array(1 / np.sqrt(dim))})


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("qk-pages")
    shutil.copytree(ASSETS, root / "assets")
    pair, long = _run(QK_SHAPE, 0), _run(LONG_SHAPE, 1)
    limits = view_files.QK_INLINE_LIMIT, view_files.VIEWS_INLINE_LIMIT
    view_files.QK_INLINE_LIMIT = view_files.VIEWS_INLINE_LIMIT = 0  # every page from data files
    try:
        bodies = {"qk.html": qk_html(qk_payload(pair)),
                  "qk-files.html": view_files.example_html(root, 5, qk_payload(pair), qk=True),
                  "long-files.html": view_files.example_html(root, 6, example_payload(long))}
        causal = _causal_run(LONG_QK_SHAPE, seed=2)
        causal_payload = example_payload(causal)
        long_qk = qk_payload(causal, weights=False, attention=causal_payload["attention"])
        bodies["long-qk.html"] = view_files.example_pages(root, 7, causal_payload, long_qk)[1]
    finally:
        view_files.QK_INLINE_LIMIT, view_files.VIEWS_INLINE_LIMIT = limits
    for name, body in bodies.items():
        (root / name).write_text(standalone_page(body, name), encoding="utf-8")
    return {"root": root, "pair": pair, "long": long, "qk": qk_payload(pair), "causal": causal, "long_qk": long_qk}


@pytest.fixture
def open_at(open_page):
    """open_at(url, (width, height)) -> BrowserPage with the view drawn."""
    return lambda url, size: open_page(url, size, wait_ms=0, wait_for=VIEW_DRAWN)


def _url(pages, name: str) -> str:
    return (pages["root"] / name).as_uri()


def _clean(view):
    assert view.errors == [], view.errors
    assert view.remote_requests == [], view.remote_requests


def _layout(page) -> dict:
    return page.evaluate("""() => {
        const wrap = document.querySelector('.rgv-qk-wrap');
        const head = name => [...document.querySelectorAll('.rgv-qk-table thead th')]
            .find(cell => cell.textContent === name).getBoundingClientRect();
        const soft = head('softmax');
        return {pageWidth: document.scrollingElement.scrollWidth, viewport: innerWidth,
                tableWidth: wrap.scrollWidth, boxWidth: wrap.clientWidth,
                hint: !document.querySelector('.rgv-qk-hint').hidden,
                softLeft: soft.left, softRight: soft.right,
                legend: document.querySelector('.rgv-qk-legend').textContent};
    }""")


def _rows(page) -> list[dict]:
    return page.eval_on_selector_all(
        "tr.rgv-qk-row", "els => els.map(e => ({k: +e.dataset.k, soft: +e.dataset.softmax, model: +e.dataset.model}))")


def test_qk_table_fits_a_laptop_and_a_688_px_column(pages, open_at):
    view = open_at(_url(pages, "qk.html"), DESKTOP)
    layout = _layout(view.page)
    assert layout["tableWidth"] <= layout["boxWidth"] and not layout["hint"]
    assert layout["pageWidth"] <= layout["viewport"]
    assert "red positive, blue negative" in layout["legend"] and "larger the magnitude" in layout["legend"]
    # Material's text column is 688 px wide: the cells narrow until the table fits it too
    view.page.add_style_tag(content=".rgv { max-width: 688px; }")
    view.page.evaluate("window.dispatchEvent(new Event('resize'))")
    layout = _layout(view.page)
    assert layout["tableWidth"] <= layout["boxWidth"] <= 688 and not layout["hint"]
    _clean(view)


def test_qk_table_scrolls_in_its_box_on_a_phone_with_the_softmax_in_sight(pages, open_at):
    view = open_at(_url(pages, "qk.html"), PHONE)
    layout = _layout(view.page)
    assert layout["pageWidth"] <= layout["viewport"]  # the page itself never scrolls sideways
    assert layout["tableWidth"] > layout["boxWidth"] and layout["hint"]  # the table does, in its box, and says so
    assert 0 <= layout["softLeft"] and layout["softRight"] <= layout["viewport"]
    # scrolled to the end, the key column stays in its place
    view.page.eval_on_selector(".rgv-qk-wrap", "box => { box.scrollLeft = box.scrollWidth; }")
    key = view.page.eval_on_selector('tr.rgv-qk-row[data-k="4"] .rgv-qk-key', "e => e.getBoundingClientRect().left")
    box = view.page.eval_on_selector(".rgv-qk-wrap", "e => e.getBoundingClientRect().left")
    assert abs(key - box) < 2
    _clean(view)


@pytest.mark.parametrize("size", [DESKTOP, PHONE])
def test_qk_data_files_load_from_file_urls_and_agree_with_the_model(pages, open_at, size):
    view = open_at(_url(pages, "qk-files.html") + "#view=qk&layer=2&head=1&token=3", size)
    page = view.page
    layer = decode_qk_layer(pages["qk"]["layers"][2], 4, 19, 64)
    scaling = pages["qk"]["scaling"]
    expected = decoded_softmax(layer["q_codes"][1], layer["q_scale"][1], layer["k_codes"][1], layer["k_scale"][1],
                               scaling)[3]
    rows = _rows(page)
    assert [r["k"] for r in rows] == list(range(19))
    assert max(abs(r["soft"] - expected[r["k"]]) for r in rows) < 1e-12  # the browser decodes as numpy does
    model = pages["pair"].attention[2, 1, 3]
    assert max(abs(r["model"] - model[r["k"]]) for r in rows) <= MAX_ERR
    assert max(abs(r["soft"] - r["model"]) for r in rows) <= pages["qk"]["check"]["difference"]
    assert [name for name in view.requested if name.startswith("qk-l")] == ["qk-l2.js"]  # the layer it draws
    page.select_option(".rgv-layer", "0")
    page.wait_for_selector('.rgv[data-rgv-state="view=qk&layer=0&head=1&token=3"]:not([data-rgv-loading])')
    model = pages["pair"].attention[0, 1, 3]
    assert max(abs(r["model"] - model[r["k"]]) for r in _rows(page)) <= MAX_ERR
    assert page.evaluate("location.hash") == "#view=qk&layer=0&head=1&token=3"
    _clean(view)


def test_page_text_and_status_state_the_agreement(pages, open_at):
    view = open_at(_url(pages, "qk.html") + "#view=qk&layer=1&head=2&token=5", DESKTOP)
    status = view.page.inner_text(".rgv-status")
    worst = max(abs(r["soft"] - r["model"]) for r in _rows(view.page))
    assert f"by at most {worst:.4f}" in status and "that rounding allows" in status
    _clean(view)


def test_a_bad_link_on_the_qk_page_says_what_it_shows(pages, open_at):
    view = open_at(_url(pages, "qk.html") + "#view=qk&layer=9&head=1&token=99", DESKTOP)
    note = view.page.inner_text(".rgv-hash-note")
    assert "layer 9" in note and "Showing layer 0" in note and "query token 99" in note
    assert view.page.get_attribute(".rgv", "data-rgv-state") == "view=qk&layer=0&head=1&token=1"
    assert len(_rows(view.page)) == 19
    _clean(view)


def _lines(page) -> list[dict]:
    return page.eval_on_selector_all(
        ".rgv-head-panel line.rgv-line",
        "els => els.map(e => ({h: +e.dataset.head, q: +e.dataset.q, k: +e.dataset.k, w: +e.dataset.w}))")


def test_long_example_loads_its_heads_from_data_files(pages, open_at):
    view = open_at(_url(pages, "long-files.html"), DESKTOP)
    page = view.page
    decoded = decode_attention(example_payload(pages["long"])["attention"])
    lines = _lines(page)
    assert lines and {ln["h"] for ln in lines} == {0}  # a long input starts with one head: one file
    assert all(abs(ln["w"] - decoded[0, 0, ln["q"], ln["k"]]) < 1e-12 for ln in lines)
    assert [name for name in view.requested if name.startswith("l") and name.endswith(".js")] == ["l0h0.js"]
    page.select_option(".rgv-layer", "1")
    page.wait_for_selector('.rgv[data-rgv-state^="view=head&layer=1"]:not([data-rgv-loading])')
    lines = _lines(page)
    assert lines and all(abs(ln["w"] - decoded[1, 0, ln["q"], ln["k"]]) < 1e-12 for ln in lines)
    page.click('.rgv-tab[data-view="model"]')  # the model view draws every head: all files
    page.wait_for_selector('.rgv[data-rgv-state^="view=model"]:not([data-rgv-loading])')
    assert sorted(name for name in view.requested if name.startswith("l") and name.endswith(".js")) == sorted(
        f"l{layer}h{head}.js" for layer in range(2) for head in range(3))
    assert page.locator("canvas.rgv-thumb").count() == 6
    _clean(view)


def _expected_row(pages, layer: int, head: int, token: int) -> np.ndarray:
    """The long query/key page's softmax of (layer, head, token) as numpy decodes its stored vectors."""
    fields = decode_qk_layer(pages["long_qk"]["layers"][layer], 3, 300, 16, weights=False)
    return decoded_softmax(fields["q_codes"][head], fields["q_scale"][head], fields["k_codes"][head],
                           fields["k_scale"][head], pages["long_qk"]["scaling"], None,
                           np.tril(np.ones((300, 300), dtype=bool)))[token]


@pytest.mark.parametrize("size", [DESKTOP, PHONE])
def test_a_long_qk_page_lists_the_keys_a_query_weighs_most_with_the_example_pages_weights(pages, open_at, size):
    view = open_at(_url(pages, "long-qk.html") + "#view=qk&layer=1&head=2&token=250", size)
    page = view.page
    rows, expected = _rows(page), _expected_row(pages, 1, 2, 250)
    assert len(rows) == 64 and len({r["k"] for r in rows}) == 64
    assert [r["k"] for r in rows] == sorted(range(251), key=lambda k: (-expected[k], k))[:64]  # most weighed first
    assert max(abs(r["soft"] - expected[r["k"]]) for r in rows) < 1e-12
    model = pages["causal"].attention[1, 2, 250]
    assert max(abs(r["model"] - model[r["k"]]) for r in rows) <= MAX_ERR
    assert max(abs(r["soft"] - r["model"]) for r in rows) <= pages["long_qk"]["check"]["difference"]
    # the weights are the example page's own file of this head; q and k are the page's per layer
    assert [name for name in view.requested if name.endswith(".js") and name[0] in "lq"] == ["qk-l1.js", "l1h2.js"]
    status = " ".join(page.inner_text(".rgv-status").split())
    assert "The table lists the 64 keys this query weighs most, largest first, of 300" in status
    assert "over 251 of 300 keys (the model masks 49 for this query)" in status  # the keys after it
    assert page.inner_text(".rgv-qk-page-label") == "query tokens #192\u2013255 of 300"
    assert page.get_attribute('.rgv-qk-token[aria-pressed="true"]', "data-i") == "250"
    assert page.evaluate("document.scrollingElement.scrollWidth") <= size[0]
    _clean(view)
    # the view's own rules (the bare test page around it has no landmarks of a site's page; axe's own reading of the
    # stylesheet from file:// is refused, after the check above)
    violations = Axe().run(page, context=".rgv", options={"resultTypes": ["violations"]}).response["violations"]
    assert [(item["id"], [node["target"] for node in item["nodes"]]) for item in violations] == []


def test_a_long_qk_pages_keys_and_queries_by_menu_and_keyboard(pages, open_at):
    view = open_at(_url(pages, "long-qk.html") + "#view=qk&layer=0&head=1&token=250", DESKTOP)
    page = view.page
    page.select_option(".rgv-qk-keys", "4")  # keys #256-299: all after the query, all masked
    wait_until(page, "() => document.querySelector('tr.rgv-qk-row').dataset.k === '256'")
    rows = page.eval_on_selector_all("tr.rgv-qk-row", "els => els.map(e => [+e.dataset.k, e.dataset.masked])")
    assert rows == [[k, "true"] for k in range(256, 300)]
    page.select_option(".rgv-qk-keys", "0")
    wait_until(page, "() => document.querySelectorAll('tr.rgv-qk-row').length === 64")
    assert _rows(page)[0]["k"] == 0 and _rows(page)[-1]["k"] == 63
    page.focus(".rgv-qk-page")  # "earlier", by keyboard: the strip moves, the query stays
    page.keyboard.press("Enter")
    assert page.inner_text(".rgv-qk-page-label") == "query tokens #128\u2013191 of 300"
    assert page.locator('.rgv-qk-token[aria-pressed="true"]').count() == 0
    page.focus('.rgv-qk-token[data-i="130"]')
    page.keyboard.press("Enter")
    page.wait_for_selector('.rgv[data-rgv-state="view=qk&layer=0&head=1&token=130"]:not([data-rgv-loading])')
    expected = _expected_row(pages, 0, 1, 130)
    assert max(abs(r["soft"] - expected[r["k"]]) for r in _rows(page)) < 1e-12
    assert page.evaluate("location.hash") == "#view=qk&layer=0&head=1&token=130"
    _clean(view)


def test_a_missing_data_file_is_said_not_thrown(pages, open_at, tmp_path):
    root = tmp_path / "site"
    shutil.copytree(pages["root"], root)
    (root / "example-6-data" / "l1h0.js").unlink()
    view = open_at((root / "long-files.html").as_uri(), DESKTOP)
    view.page.select_option(".rgv-layer", "1")
    wait_until(view.page, "() => document.querySelector('.rgv-status').textContent.includes('could not be loaded')")
    assert "example-6-data/l1h0.js" in view.page.inner_text(".rgv-status")
    assert [e for e in view.errors if "pageerror" in e] == []  # only the browser's own failed-request line


def test_a_built_site_copies_the_data_files_and_its_pages_load_them(tmp_path, tiny_model, open_at, monkeypatch):
    """A real build (MkDocs copies the files from its docs folder) with every view's data in files."""
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import write_config

    monkeypatch.setattr(view_files, "VIEWS_INLINE_LIMIT", 0)
    monkeypatch.setattr(view_files, "QK_INLINE_LIMIT", 0)
    write_config(tmp_path, f"model: {tiny_model}\ndevice: cpu\nexamples:\n  - text: i went to the store.\n"
                           "    pair: at the store, i bought fresh strawberries.\nablation:\n  enabled: false\n")
    build(load_config(tmp_path / "reportgen.yaml"))
    site = tmp_path / "site"
    data = sorted(path.name for path in (site / "example-1-data").iterdir())
    heads = [f"l{layer}h{head}.js" for layer in range(2) for head in range(4)]
    assert data == sorted([f"c-{name}" for name in heads] + heads + ["qk-l0.js", "qk-l1.js"])
    view = open_at((site / "example-1.html").as_uri() + "#view=head&layer=1", DESKTOP)
    assert view.page.locator(".rgv-head-panel line.rgv-line").count() > 0
    assert sorted(name for name in view.requested if name.startswith("l") and name.endswith(".js")) == [
        "l1h0.js", "l1h1.js", "l1h2.js", "l1h3.js"]  # the layer shown, all its heads (a short input)
    _clean(view)
    view = open_at((site / "example-1-qk.html").as_uri() + "#view=qk&layer=1&head=2&token=3", PHONE)
    assert view.page.locator("tr.rgv-qk-row").count() > 0 and "qk-l1.js" in view.requested
    assert view.page.evaluate("document.scrollingElement.scrollWidth") <= 390
    _clean(view)
