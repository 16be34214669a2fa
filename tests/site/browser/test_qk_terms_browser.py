"""The query/key page of a model with score terms and masked keys, in headless Chromium from file://.

Standalone pages (reportgen.site.views.standalone_page) from the synthetic DeBERTa-like run of
tests/site/test_qk_terms.py: two terms (c2p, p2c; He et al. 2021) and layer 1 masked outside a
window of 2 tokens (as ModernBERT's local layers). The page must show one column per term and the
score, grey the masked keys with "masked" in words, and compute the softmax numpy computes; a run
without them must show the table of before.
"""

from __future__ import annotations

import shutil

import pytest

from reportgen.site import view_files
from reportgen.site.views import (
    combined_payload,
    decode_qk_layer,
    decode_visible,
    decoded_softmax,
    dequantise_vectors,
    qk_html,
    qk_payload,
    standalone_page,
)
from tests.helpers import ROOT, VIEW_DRAWN
from tests.site.test_qk_terms import SHAPE, WINDOW, _run, _without

pytestmark = pytest.mark.slow

OLD_COLUMNS = ["key", "softmax", "model", "q\u00a0\u00b7\u00a0k", "\u00d7\u00a0scale", "k (key vector)",
               "q \u00d7 k (elementwise)"]
STATE = "#view=qk&layer=1&head=2&token=0"  # layer 1 masks keys 3.. for query 0


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(view_files, "QK_INLINE_LIMIT", 0)  # files.html: each layer from its data file
    root = tmp_path_factory.mktemp("qk-terms")
    shutil.copytree(ROOT / "site_src" / "assets", root / "assets")
    run = _run()
    plain = _without(run, "qk_terms", "qk_term_names", "qk_visible")
    bodies = {"terms.html": qk_html(qk_payload(run)), "plain.html": qk_html(qk_payload(plain)),
              "single.html": qk_html(combined_payload(run)),  # the single-file view's payload
              "files.html": view_files.example_html(root, 3, qk_payload(run), qk=True)}
    monkeypatch.undo()
    for name, body in bodies.items():
        (root / name).write_text(standalone_page(body, name), encoding="utf-8")
    return {"root": root, "run": run, "qk": qk_payload(run)}


def _table(page) -> dict:
    return page.evaluate("""() => ({
        heads: [...document.querySelectorAll('.rgv-qk-table thead th')].map(c => [c.textContent, c.title]),
        rows: [...document.querySelectorAll('tr.rgv-qk-row')].map(r => ({
            k: +r.dataset.k, soft: +r.dataset.softmax, masked: r.dataset.masked === 'true',
            grey: r.classList.contains('rgv-qk-masked'), title: r.title,
            score: r.querySelector('.rgv-qk-score') && r.querySelector('.rgv-qk-score').textContent,
            terms: [...r.querySelectorAll('.rgv-qk-term')].map(c => c.textContent)})),
        status: document.querySelector('.rgv-status').textContent})""")


def _expected(payload: dict, layer: int, head: int, token: int):
    _, heads, n, dim = payload["shape"]
    data = decode_qk_layer(payload["layers"][layer], heads, n, dim, terms=len(payload["terms"]))
    terms = dequantise_vectors(data["term_codes"][head], data["term_scale"][head])
    return decoded_softmax(data["q_codes"][head], data["q_scale"][head], data["k_codes"][head],
                           data["k_scale"][head], payload["scaling"], terms,
                           decode_visible(payload["visible"][layer], n))[token]


@pytest.mark.parametrize("name", ["terms.html", "single.html", "files.html"])
def test_terms_and_masked_keys_are_shown_and_in_the_softmax(pages, open_page, name):
    view = open_page((pages["root"] / name).as_uri() + STATE, (1366, 900), wait_ms=0, wait_for=VIEW_DRAWN)
    table = _table(view.page)
    payload = pages["qk"]
    texts = [text for text, _ in table["heads"]]
    assert texts == OLD_COLUMNS[:5] + ["+\u00a0c2p", "+\u00a0p2c", "=\u00a0score"] + OLD_COLUMNS[5:]
    assert [title for _, title in table["heads"][5:7]] == [term["title"] for term in payload["terms"]]
    rows = table["rows"]
    n = SHAPE[2]
    assert [r["k"] for r in rows] == list(range(n))
    expected = _expected(payload, 1, 2, 0)
    assert max(abs(r["soft"] - expected[r["k"]]) for r in rows) < 1e-12  # the browser computes what numpy does
    for r in rows:
        masked = r["k"] > WINDOW
        assert r["masked"] == r["grey"] == masked
        assert (r["score"] == "masked") == masked and (r["soft"] == 0) == masked
        assert ("masks this key" in r["title"]) == masked
        assert len(r["terms"]) == 2 and (r["terms"] == ["\u2013", "\u2013"]) == masked
    status = table["status"]
    keys = f"over {WINDOW + 1} of {n} keys (the model masks {n - WINDOW - 1} for this query)"
    assert f"softmax(q \u00b7 k \u00d7 {payload['scaling']:.4g} + c2p + p2c) {keys}" in status
    assert "that rounding allows" in status and "more than" not in status
    # layer 0 masks nothing: every key in the softmax, the term columns still there
    view.page.select_option(".rgv-layer", "0")
    view.page.wait_for_selector('.rgv[data-rgv-state="view=qk&layer=0&head=2&token=0"]')
    table = _table(view.page)
    assert not any(r["masked"] for r in table["rows"]) and f"over {n} keys;" in table["status"]
    assert max(abs(r["soft"] - _expected(payload, 0, 2, 0)[r["k"]]) for r in table["rows"]) < 1e-12
    assert view.errors == [] and view.remote_requests == []
    if name == "files.html":
        assert sorted(n for n in view.requested if n.startswith("qk-l")) == ["qk-l0.js", "qk-l1.js"]


def test_a_page_without_terms_or_mask_has_the_table_of_before(pages, open_page):
    view = open_page((pages["root"] / "plain.html").as_uri() + STATE, (1366, 900), wait_ms=0, wait_for=VIEW_DRAWN)
    table = _table(view.page)
    assert [text for text, _ in table["heads"]] == OLD_COLUMNS
    assert "the score the softmax takes" in table["heads"][4][1]
    assert not any(r["masked"] or r["terms"] or r["score"] is not None for r in table["rows"])
    scaling = pages["qk"]["scaling"]
    assert f": softmax(q \u00b7 k \u00d7 {scaling:.4g}) over {SHAPE[2]} keys; on this row" in table["status"]
    assert view.errors == [] and view.remote_requests == []
