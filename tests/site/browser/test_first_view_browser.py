"""Issue 32, a lighter first view: the seed pair's example page of the default site carries what its first view
draws (the head view at layer 0, weights) and loads the rest from its data files when asked, from file://.

The page is opened in headless Chromium with every non-file request aborted. At load it draws layer 0's weights
without loading any data file; the switch to contributions, the model view, layer 5 and a link to layer 3 in
contributions each load their own files, once, and draw the numbers reportgen's Python decoding of the same
example gives (reportgen.site.view_files.read_page_payload, equal to the payload the page carried inline before:
tests/site/test_views_encoding.py); the page stays within its policy (no violation, no console error).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from reportgen.site import csp
from reportgen.site.view_files import read_page_payload
from reportgen.site.views import decode_attention, decode_contributions
from tests.helpers import VIEW_DRAWN, BrowserPage, check_report

pytestmark = pytest.mark.slow  # the default site's build, and a browser

PAGE_LIMIT = 68_893  # bytes of example-1.html: issue 32
DATA_FILE = re.compile(r"(c-)?l\d+(h\d+)?\.js")  # a views data file's name (reportgen.site.view_files)
VIOLATIONS_JS = ("window.__violations = []; document.addEventListener('securitypolicyviolation', "
                 "e => window.__violations.push(e.effectiveDirective + ' ' + e.blockedURI));")
LINES_JS = "els => els.map(e => [+e.dataset.head, +e.dataset.q, +e.dataset.k, +e.dataset.w])"


@pytest.fixture(scope="module")
def seed_pair(default_site) -> dict:
    """The seed pair's page, and its weights and contribution shares [L, H, T, T] as reportgen decodes them."""
    report = check_report(default_site)
    assert report["examples"][0]["id"] == 1 and report["examples"][0]["pair"]  # the seed pair: example 1
    payload = read_page_payload(default_site / "example-1.html")
    shares, _ = decode_contributions(payload["contributions"])
    return {"page": default_site / "example-1.html", "weights": decode_attention(payload["attention"]),
            "shares": shares}


@pytest.fixture
def open_example(new_tab, seed_pair):
    """open_example(fragment="") -> BrowserPage of example-1.html with its view drawn (nothing loading)."""

    def _open(fragment: str = "") -> BrowserPage:
        view = new_tab((1280, 900))
        view.page.add_init_script(VIOLATIONS_JS)
        view.page.goto(seed_pair["page"].as_uri() + fragment)
        view.page.wait_for_selector(VIEW_DRAWN, timeout=30_000)
        return view

    return _open


def _data_files(view: BrowserPage) -> list[str]:
    """The data files the page has requested, in order (a file asked for twice shows twice)."""
    return [name for name in view.requested if DATA_FILE.fullmatch(name)]


def _drawn(view: BrowserPage, selector: str = "line.rgv-line") -> np.ndarray:
    """The lines drawn, as rows (head, query, key, value)."""
    return np.array(view.page.eval_on_selector_all(selector, LINES_JS), dtype=np.float64).reshape(-1, 4)


def _assert_draws(lines: np.ndarray, matrices: np.ndarray, heads: list[int]) -> None:
    """Every line of `heads` (all keys of every query: the short input's default top-k and minimum) is drawn,
    with the value of `matrices` [H, T, T]."""
    n = matrices.shape[-1]
    assert len(lines) == len(heads) * n * n
    h, q, k = (lines[:, i].astype(int) for i in range(3))
    assert sorted(set(h.tolist())) == sorted(heads)
    assert len(set(zip(h.tolist(), q.tolist(), k.tolist(), strict=True))) == len(lines)
    assert np.abs(lines[:, 3] - matrices[h, q, k]).max() < 1e-12


def _assert_clean(view: BrowserPage) -> None:
    assert view.errors == [] and view.remote_requests == [] and view.dialogs == [], (view.errors, view.remote_requests)
    assert view.page.evaluate("() => window.__violations") == []


def test_the_page_is_light_and_keeps_its_policy(seed_pair):
    page = seed_pair["page"]
    text = page.read_text(encoding="utf-8")
    assert page.stat().st_size <= PAGE_LIMIT, page.stat().st_size
    assert '"contributions":{"encoding":"u8-row-affine","shape":[6,12,19,19],"packed":' in text  # no rows inline
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text).group(1)
    script_src = next(part for part in policy.split(";") if part.strip().startswith("script-src")).split()
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src and "'self'" in script_src
    assert [source for source in script_src if source.startswith("'sha256-")] == csp.inline_script_hashes(text)


def test_weights_are_drawn_at_load_from_the_page_alone(open_example, seed_pair):
    view = open_example()
    view.page.wait_for_timeout(300)  # nothing loads after the first render either
    assert view.page.get_attribute(".rgv", "data-rgv-state") == "view=head&layer=0&head=0,1,2,3,4,5,6,7,8,9,10,11"
    assert _data_files(view) == []
    _assert_draws(_drawn(view), seed_pair["weights"][0], list(range(12)))
    _assert_clean(view)


def test_the_switch_to_contributions_loads_its_layer_only(open_example, seed_pair):
    view = open_example()
    view.page.click('.rgv-mode-btn[data-mode="contributions"]')
    view.page.wait_for_selector('.rgv[data-rgv-state$="mode=contributions"]:not([data-rgv-loading])')
    assert _data_files(view) == ["c-l0.js"]
    _assert_draws(_drawn(view), seed_pair["shares"][0], list(range(12)))
    view.page.click('.rgv-mode-btn[data-mode="weights"]')  # back: the weights were there all along
    view.page.wait_for_selector('.rgv[data-rgv-state="view=head&layer=0&head=0,1,2,3,4,5,6,7,8,9,10,11"]')
    _assert_draws(_drawn(view), seed_pair["weights"][0], list(range(12)))
    assert _data_files(view) == ["c-l0.js"]
    _assert_clean(view)


def test_the_model_view_loads_each_other_layer_once(open_example, seed_pair):
    view = open_example()
    view.page.click('.rgv-tab[data-view="model"]')
    view.page.wait_for_selector('.rgv[data-rgv-state^="view=model"]:not([data-rgv-loading])')
    assert sorted(_data_files(view)) == [f"l{layer}.js" for layer in range(1, 6)]  # one file per layer, each once
    assert view.page.locator("canvas.rgv-thumb").count() == 72
    view.page.click('canvas.rgv-thumb[data-layer="4"][data-head="7"]')  # enlarged: its lines, from layer 4's file
    view.page.wait_for_selector("dialog.rgv-zoom[open] line.rgv-line", state="attached")
    _assert_draws(_drawn(view, "dialog.rgv-zoom line.rgv-line"), seed_pair["weights"][4], [7])
    assert sorted(_data_files(view)) == [f"l{layer}.js" for layer in range(1, 6)]
    _assert_clean(view)


def test_another_layer_loads_its_file(open_example, seed_pair):
    view = open_example()
    view.page.select_option(".rgv-layer", "5")
    view.page.wait_for_selector('.rgv[data-rgv-state^="view=head&layer=5"]:not([data-rgv-loading])')
    assert _data_files(view) == ["l5.js"]
    _assert_draws(_drawn(view), seed_pair["weights"][5], list(range(12)))
    view.page.select_option(".rgv-layer", "0")  # layer 0 again: inline, nothing to load
    view.page.wait_for_selector('.rgv[data-rgv-state^="view=head&layer=0"]:not([data-rgv-loading])')
    _assert_draws(_drawn(view), seed_pair["weights"][0], list(range(12)))
    assert _data_files(view) == ["l5.js"]
    _assert_clean(view)


def test_a_link_to_layer_3_in_contributions_loads_them_at_load(open_example, seed_pair):
    view = open_example("#view=head&layer=3&mode=contributions")
    assert view.page.get_attribute(".rgv", "data-rgv-state") == \
        "view=head&layer=3&head=0,1,2,3,4,5,6,7,8,9,10,11&mode=contributions"
    assert _data_files(view) == ["c-l3.js"]  # the contributions drawn, not layer 3's weights
    _assert_draws(_drawn(view), seed_pair["shares"][3], list(range(12)))
    _assert_clean(view)
