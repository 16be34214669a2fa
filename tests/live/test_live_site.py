"""Issue 33: the "Your sentence" page (config `views.live`), in headless Chromium from file:// with every
non-local request blocked.

A site built with the embedded model (all-MiniLM-L6-v2, no ablation) and `views: {live: true}`: the page loads
the weights from its script files, runs the first example (the seed pair) at once and then what a reader types,
in a Web Worker; the tokens must be the Python tokenizer's, every head's attention within the page's stated
tolerance of the model's own in torch, the contributions switch must work, typed markup must stay text, an
empty text must be refused in words, and nothing may be fetched from the network. The weights' files add at
most 25 MB. Sites without `views.live` carry none of it, and a model the page cannot run stops the build with
exit 3 before any work (tiny random checkpoints, tests/architectures.py).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reportgen.live import weights as live_weights
from reportgen.model.special_tokens import special_ids
from reportgen.site import live_page
from tests.helpers import VIEWPORTS, BrowserPage, build_tiny_site, shared_site, tiny_config, wait_until, write_config

pytestmark = pytest.mark.slow  # the embedded model, a site build and a browser

SEED = ("I went to the store.", "At the store, I bought fresh strawberries.")
TYPED = [  # a reader's inputs: a single text, a pair, accents and CJK, unknown words, a long text cut to max_length
    ("Where can I renew my passport quickly?", None),
    ("cheap flights to lisbon in march", "Find cheap flights from London to Lisbon this March"),
    ("Café naïve Ångström: 中文字符 and emoji 🙂!", None),
    ("antidisestablishmentarianism xqzvw " * 3, "pneumonoultramicroscopicsilicovolcanoconiosis"),
    (" ".join(["the quick brown fox jumps over the lazy dog."] * 40), None),
]
HOSTILE = '<img src=x onerror="window.__pwned=1"></textarea><script>window.__pwned=2</script> javascript:alert(1)'
RUNS_JS = "(count) => window.reportgen && window.reportgen.live && window.reportgen.live.runs >= count"
# The attention and norms come back as their float32 bytes in base64 (`floats`): as a JSON array of numbers, the
# 1.2 million values of a 128-token input took 20 s through the DevTools protocol.
LAST_JS = """() => { const last = window.reportgen.live.last;
  const base64 = (values) => { const bytes = new Uint8Array(Float32Array.from(values).buffer); let text = '';
    for (let at = 0; at < bytes.length; at += 32768) text += String.fromCharCode(...bytes.subarray(at, at + 32768));
    return btoa(text); };
  return {tokens: last.tokens, ids: last.ids, segments: last.segments, special: last.special,
          truncated: last.truncated, ms: last.ms, layers: last.layers, heads: last.heads,
          values: base64(last.values), norms: base64(last.norms)}; }"""


# Over 60 s once per test run: the build runs the embedded model and makes its compact export (GPTQ, calibration).
@pytest.fixture(scope="module")
def live_site(tmp_path_factory) -> Path:
    """The embedded model's site with views.live, built once per test run for every pytest-xdist worker (the tests
    only read it)."""
    examples = [{"text": SEED[0], "pair": SEED[1]}, {"text": "The cat sat on the mat because it was warm."}]
    return shared_site(tmp_path_factory, tiny_config("default", examples=examples, max_length=128,
                                                     ablation={"enabled": False}, views={"live": True}))


@pytest.fixture(scope="module")
def torch_model():
    import torch  # noqa: F401 - the model below runs in torch
    from transformers import AutoModel, AutoTokenizer

    from tests.helpers import embedded_model_dir

    path = embedded_model_dir()
    return AutoModel.from_pretrained(path, attn_implementation="eager").eval(), AutoTokenizer.from_pretrained(path)


def torch_attention(torch_model, text: str, pair: str | None, max_length: int = 128) -> tuple[list[int], np.ndarray]:
    import torch

    model, tokenizer = torch_model
    encoded = tokenizer(text, pair, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        out = model(**encoded, output_attentions=True)
    return encoded["input_ids"][0].tolist(), torch.stack(out.attentions)[:, 0].numpy()


def open_live(browser, site: Path, viewport: str = "desktop") -> BrowserPage:
    width, height = VIEWPORTS[viewport]
    view = BrowserPage(browser.new_context(viewport={"width": width, "height": height}).new_page())
    view.page.goto((site / "your-sentence.html").as_uri())
    wait_until(view.page, RUNS_JS, 1, timeout=120_000)  # the weights load, then the first example runs
    return view


def submit(view: BrowserPage, text: str, pair: str | None) -> None:
    runs = view.page.evaluate("() => window.reportgen.live.runs")
    view.page.fill("#rg-live-text", text)
    view.page.fill("#rg-live-pair", pair or "")
    view.page.click(".rg-live-form button[type=submit]")
    wait_until(view.page, RUNS_JS, runs + 1, timeout=60_000)


def floats(text: str) -> np.ndarray:
    """A Float32Array that LAST_JS sent as base64."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def check_against_torch(last: dict, torch_model, text: str, pair: str | None) -> float:
    ids, attention = torch_attention(torch_model, text, pair)
    assert last["ids"] == ids, (text, last["tokens"])
    # the special flags a build gives the same text (reportgen.model.special_tokens: [UNK] is content)
    specials = special_ids(torch_model[1])
    assert last["special"] == [int(i in specials) for i in ids], (text, last["tokens"])
    n = len(ids)
    values = floats(last["values"]).reshape(last["layers"], last["heads"], n, n)
    assert values.shape == attention.shape
    worst = float(np.abs(values - attention).max())
    assert worst <= live_page.TOLERANCE["compact"], (text, worst)
    return worst


# over 60 s (its fixture): an embedded-model site with its live page, the compact export's calibration included
def test_the_page_runs_the_seed_pair_and_typed_texts_as_the_model_does(browser, live_site, torch_model):
    view = open_live(browser, live_site)
    try:
        last = view.page.evaluate(LAST_JS)
        check_against_torch(last, torch_model, *SEED)  # the text box starts with the first example
        assert last["tokens"][0] == "[CLS]" and last["segments"][-1] == 1
        view.page.click(".rgv-mode button:not([aria-pressed=true]), .rgv button[data-mode=contributions]")
        state = view.page.get_attribute(".rg-live-views .rgv", "data-rgv-state")
        assert "mode=contributions" in state, state
        unknown = 0
        for text, pair in TYPED:
            submit(view, text, pair)
            last = view.page.evaluate(LAST_JS)
            check_against_torch(last, torch_model, text, pair)
            unknown += last["tokens"].count("[UNK]")
            assert last["truncated"] == (len(last["ids"]) == 128)
        assert unknown > 0  # a typed text had a token the vocabulary lacks, flagged as content
        assert view.page.locator(".rg-live-views .rgv-line").count() > 0  # the head view drew the last input
        assert "truncated to 128 tokens" in view.page.inner_text(".rg-live-status")
        assert view.errors == [] and view.remote_requests == [] and view.failed == []
        # the worker ran it: the page never loaded the model onto its own thread
        assert view.page.evaluate("() => window.reportgen.live.error") is None
    finally:
        view.page.context.close()


def test_typed_markup_stays_text_and_empty_text_is_refused_in_words(browser, live_site):
    view = open_live(browser, live_site, "phone")
    try:
        submit(view, HOSTILE, HOSTILE)
        assert view.page.evaluate("() => window.__pwned") is None
        assert view.page.locator(".rg-live img, .rg-live-views script").count() == 0
        tokens = view.page.evaluate("() => window.reportgen.live.last.tokens")
        assert tokens[1:4] == ["<", "im", "##g"], tokens  # the markup, tokenized as text
        shown = view.page.inner_text(".rg-live-views")
        assert "<" in shown  # drawn as text
        runs = view.page.evaluate("() => window.reportgen.live.runs")
        for blank in ("", "   \n\t "):
            view.page.fill("#rg-live-text", blank)
            view.page.evaluate("() => document.querySelector('.rg-live-form').requestSubmit()")
            wait_until(view.page, "() => document.querySelector('.rg-live-status').classList.contains('rg-live-error')")
            assert "empty" in view.page.inner_text(".rg-live-status").lower()
        assert view.page.evaluate("() => window.reportgen.live.runs") == runs
        assert view.errors == [] and view.remote_requests == []
        width = view.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= VIEWPORTS["phone"][0], width  # nothing wider than a phone
    finally:
        view.page.context.close()


def test_a_readers_view_choices_stay_for_the_next_text(browser, live_site):
    """The model view, the contributions, a layer and the pair's direction chosen on one text stay when the
    reader computes the next one; every control still works there."""
    view = open_live(browser, live_site)
    try:
        views = view.page.locator(".rg-live-views")
        views.get_by_role("button", name="contributions").click()
        views.locator("select").select_option("3")
        views.get_by_role("button", name="A\u2192B").click()
        views.get_by_role("button", name="Model view").click()
        submit(view, "cheap flights to lisbon", "Find cheap flights from London to Lisbon")
        assert views.get_by_role("button", name="Model view").get_attribute("aria-pressed") == "true"
        assert views.get_by_role("button", name="contributions").get_attribute("aria-pressed") == "true"
        assert views.get_by_role("button", name="A\u2192B").get_attribute("aria-pressed") == "true"
        assert views.locator("select").input_value() == "3"
        assert views.locator("[data-rgv-view=model]").count() == 1
        submit(view, "a single text has no directions", None)  # the filter goes; the rest stays
        assert views.get_by_role("button", name="A\u2192B").count() == 0
        assert views.get_by_role("button", name="Model view").get_attribute("aria-pressed") == "true"
        views.get_by_role("button", name="Head view").click()
        views.get_by_role("button", name="weights").click()
        assert views.locator("[data-rgv-view=head][data-rgv-mode=weights]").count() == 1
        assert view.errors == [] and view.remote_requests == []
    finally:
        view.page.context.close()


def test_the_weights_add_at_most_25_mb_and_the_page_is_in_the_navigation(live_site):
    added = sum(path.stat().st_size for path in (live_site / live_page.FOLDER).iterdir())
    assert added <= 25_000_000, added
    spec = (live_site / live_page.FOLDER / "model.js").read_text(encoding="ascii")
    assert spec.startswith("reportgenLiveSpec(")
    assert json.loads(spec[len("reportgenLiveSpec("):-3])["max_tokens"] == 128
    home = (live_site / "index.html").read_text(encoding="utf-8")
    assert 'href="your-sentence.html"' in home
    assert all((live_site / "assets" / "javascripts" / name).is_file() for name in live_page.SCRIPTS)


def test_a_site_without_views_live_carries_none_of_it(tmp_path, tiny_model):
    site = build_tiny_site(tmp_path, tiny_config(tiny_model, ablation={"enabled": False}))
    assert not (site / "your-sentence.html").exists() and not (site / live_page.FOLDER).exists()
    assert not any((site / "assets" / "javascripts" / name).exists() for name in live_page.SCRIPTS)
    assert "your-sentence.html" not in (site / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_a_model_the_page_cannot_run_stops_the_build_with_exit_3(tmp_path, family):
    from tests.architectures import make_checkpoint

    model = make_checkpoint(family, tmp_path / family)
    project = tmp_path / "project"
    project.mkdir()
    write_config(project, tiny_config(model, ablation={"enabled": False}, views={"live": True}))
    failed = subprocess.run([sys.executable, "-m", "reportgen", "build"], cwd=project, capture_output=True,
                            text=True, timeout=300)
    assert failed.returncode == 3, failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and "views.live" in lines[0] and "DistilBERT" in lines[0], lines
    assert not (project / "site").exists() and not (project / ".reportgen-cache" / "runs").exists()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_page_reads_well_on_a_laptop_and_a_phone(browser, new_tab, live_site, viewport):
    """axe-core finds no serious violation once the first example is drawn, and the form, the status line and
    the view's toolbar are on the first screen (the view starts right under them)."""
    from tests.site.browser.test_accessibility_browser import serious_violations

    drawn = "() => window.reportgen && window.reportgen.live && window.reportgen.live.runs >= 1"
    found = serious_violations(new_tab, live_site, viewport, pages=("your-sentence.html",), ready=drawn)
    assert not found, "\n".join(found)
    view = open_live(browser, live_site, viewport)
    try:
        height = VIEWPORTS[viewport][1]
        for selector in ("#rg-live-text", ".rg-live-form button[type=submit]", ".rg-live-status",
                         ".rg-live-views .rgv-toolbar"):
            box = view.page.locator(selector).bounding_box()
            assert box is not None and box["y"] < height, (selector, box)
        assert view.page.evaluate("() => document.documentElement.scrollWidth") <= VIEWPORTS[viewport][0]
    finally:
        view.page.context.close()


def test_the_page_runs_over_http_as_github_pages_serves_it(browser, live_site, http_root):
    """Over HTTP no shim stands in for workers (iframe-worker-shim.js is for file:// only): the page's own Blob
    worker runs the model there too."""
    view = BrowserPage(browser.new_context().new_page())
    try:
        view.page.goto(http_root(live_site) + "your-sentence.html")
        wait_until(view.page, RUNS_JS, 1, timeout=120_000)
        assert view.page.evaluate("() => window.reportgen.live.last.tokens.length") == 19
        assert view.errors == [] and view.remote_requests == []
    finally:
        view.page.context.close()


def test_float16_weights_are_stored_as_such_and_the_page_says_their_accuracy(tmp_path):
    from tests.architectures import make_checkpoint

    model = make_checkpoint("bert", tmp_path / "bert")
    config = tiny_config(model, ablation={"enabled": False}, views={"live": True, "live_weights": "float16"})
    (tmp_path / "project").mkdir()
    site = build_tiny_site(tmp_path / "project", config)
    spec = (site / live_page.FOLDER / "model.js").read_text(encoding="ascii")
    tensors = json.loads(spec[len("reportgenLiveSpec("):-3])["model"]["tensors"]
    big = [entry for entry in tensors if len(entry["shape"]) == 2 and np.prod(entry["shape"]) >= live_weights.SMALL]
    assert big and {entry["encoding"] for entry in big} == {"f16"}, tensors
    page = (site / "your-sentence.html").read_text(encoding="utf-8")
    assert "float16" in page and f"at most {live_page.TOLERANCE['float16']} for one attention weight" in page


def test_a_run_reports_each_layer_and_stop_ends_it_and_starts_the_model_again(browser, live_site):
    """The worker says when each layer is done (the progress bar and the status line); Stop, pressed while a run
    is under way (submitted and stopped in one step, so the run cannot finish first), ends it without a result and
    the model is ready again for the next text, which runs as any other."""
    view = open_live(browser, live_site)
    try:
        page = view.page
        layers = page.evaluate("() => window.reportgen.live.last.layers")
        assert page.evaluate("() => window.reportgen.live.progress") == {"done": layers, "total": layers}
        assert page.is_hidden(".rg-live-stop")
        runs = page.evaluate("() => window.reportgen.live.runs")
        page.fill("#rg-live-text", " ".join(["The committee approved the budget after a long debate."] * 20))
        page.evaluate("""() => { document.querySelector('.rg-live-form').requestSubmit();
            const stop = document.querySelector('.rg-live-stop');
            if (stop.hidden) throw new Error('no Stop while the model runs');
            stop.click(); }""")
        assert page.evaluate("() => window.reportgen.live.stops") == 1
        wait_until(page, "() => window.reportgen.live.ready", timeout=60_000)
        assert "Stopped." in page.inner_text(".rg-live-status") and page.is_hidden(".rg-live-stop")
        assert page.evaluate("() => window.reportgen.live.runs") == runs  # the stopped run gave nothing
        submit(view, "The cat sat on the mat.", None)
        assert page.evaluate("() => window.reportgen.live.last.tokens")[:4] == ["[CLS]", "the", "cat", "sat"]
        assert page.evaluate("() => window.reportgen.live.progress")["done"] == layers
        assert view.errors == [] and view.failed == []
    finally:
        view.page.context.close()
