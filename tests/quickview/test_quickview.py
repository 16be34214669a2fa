"""The single-file view and the notebook outputs, without a model: their payload, page, checks and errors
(reportgen.quickview, reportgen.site.standalone, reportgen.notebook). The model runs and the browser are
in test_view_command.py and test_notebook_views.py."""

from __future__ import annotations

import base64
import hashlib
import re

import numpy as np
import pytest

import reportgen
from reportgen.config import ExampleSpec
from reportgen.errors import DataError, OutputError
from reportgen.quickview import QuickRun, from_attentions, page_text
from reportgen.quickview.page import check_target, write_view
from reportgen.runs import ExampleRun, shares
from reportgen.site import standalone, views
from tests.helpers import make_run, one_hot_rows


def softmax_layers(layers: int, heads: int, n: int, seed: int = 0) -> list[np.ndarray]:
    """Per layer [1, heads, n, n] softmax weights, as a transformers model returns them."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(layers, 1, heads, n, n)) * 3
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return list(weights / weights.sum(axis=-1, keepdims=True))


def qk_run(n: int = 6, layers: int = 2, heads: int = 3, dim: int = 4, seed: int = 1):
    """A run with value norms and query/key vectors whose attention is their softmax, as a model gives."""
    rng = np.random.default_rng(seed)
    queries, keys = rng.normal(size=(2, layers, heads, n, dim)).astype(np.float32)
    scores = np.einsum("lhqd,lhkd->lhqk", queries, keys) / np.sqrt(dim)
    attention = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attention = (attention / attention.sum(axis=-1, keepdims=True)).astype(np.float32)
    tokens = ["[CLS]", *[f"w{i}" for i in range(n - 2)], "[SEP]"]
    segments = np.array([-1, *[0] * (n - 2), -1])
    norms = rng.uniform(0.1, 5, size=(layers, heads, n)).astype(np.float32)
    return ExampleRun(ExampleSpec(text="w0 w1"), tokens, np.arange(n) - 1, segments, segments == -1, attention,
                      extras={"queries": queries, "keys": keys}, value_norms=norms)


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# -- the payload -----------------------------------------------------------------------------------------

def test_the_combined_payload_carries_the_weights_once_and_the_contributions_as_norms():
    run = qk_run()
    payload = views.combined_payload(run)
    layers, heads, n, dim = run.extras["queries"].shape
    # the query/key layers without the model's weights: q and k codes and scales only
    for text in payload["qk"]["layers"]:
        assert len(base64.b64decode(text)) == heads * (3 * n * dim + 8 * n)
    with_weights = views.qk_payload(run)
    for layer in range(layers):
        lean = views.decode_qk_layer(payload["qk"]["layers"][layer], heads, n, dim, weights=False)
        full = views.decode_qk_layer(with_weights["layers"][layer], heads, n, dim)
        assert np.array_equal(lean["q_codes"], full["q_codes"]) and np.array_equal(lean["k_codes"], full["k_codes"])
        assert "attention" not in lean
        # the weights the query/key view reads from "attention" are the ones its own page would carry
        decoded = views.decode_attention(payload["attention"])[layer]
        assert np.allclose(decoded, views._decode(full["attention"], full["floor"], full["scale"]))
    assert payload["qk"]["weights"] == "attention" and payload["qk"]["check"] == with_weights["check"]


def test_contributions_from_norms_match_the_float_shares_within_the_weights_rounding():
    run = qk_run(n=12)
    payload = views.combined_payload(run)
    got, totals = views.decode_norm_contributions(payload["attention"], payload["contributions"])
    want, want_totals = shares(run.attention, run.value_norms)
    assert np.allclose(got.sum(axis=-1), 1, atol=1e-6)
    # each weight is within 0.5/255, so a share moves by at most that times the norms' spread
    spread = run.value_norms.max() / run.value_norms.min()
    assert np.abs(got - want).max() <= 2 * spread * 0.5 / 255
    assert np.abs(totals - want_totals).max() <= run.value_norms.max() * run.n_tokens * 0.5 / 255


def test_a_run_without_vectors_or_norms_has_no_qk_and_no_contributions():
    run = make_run(["a", "b", "c"], np.arange(3), np.zeros(3, dtype=int), [one_hot_rows(3, [1, 2, 0])])
    payload = views.combined_payload(run)
    assert "qk" not in payload and "contributions" not in payload


# -- attention a user already has ------------------------------------------------------------------------

def test_attention_from_a_user_becomes_a_run_with_its_specials_and_pair():
    tokens = ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"]
    run = from_attentions(softmax_layers(3, 2, len(tokens)), tokens, sentence_b_start=4)
    assert run.attention.shape == (3, 2, 7, 7)
    assert run.special.tolist() == [True, False, False, True, False, False, True]
    assert run.segment_ids.tolist() == [-1, 0, 0, -1, 1, 1, -1]
    assert run.spec.text == "the cat a dog"
    # [heads, query, key] per layer works too (no batch axis)
    assert from_attentions([layer[0] for layer in softmax_layers(2, 2, 3)], ["x", "y", "z"]).attention.shape[0] == 2


@pytest.mark.parametrize("attentions, tokens, start, message", [
    (softmax_layers(2, 2, 4), ["a", "b", "c"], None, "does not match 3 tokens"),
    (softmax_layers(1, 2, 4) + softmax_layers(1, 3, 4), ["a", "b", "c", "d"], None, "attentions[1]: shape"),
    ([np.ones((2, 4, 4))[None, None]], ["a", "b", "c", "d"], None, "[batch, heads, query, key]"),
    ([np.ones((1, 2, 3, 3))], ["a", "b", "c"], None, "not 1; give the attention weights"),
    ([np.full((1, 2, 3, 3), np.nan)], ["a", "b", "c"], None, "NaN"),
    (softmax_layers(1, 2, 3), "abc", None, "tokens: give the list"),
    (softmax_layers(1, 2, 3), ["a", "b", "c"], 3, "sentence_b_start: 3"),
    ([], ["a"], None, "attentions: empty"),
])
def test_attention_that_does_not_fit_its_tokens_is_refused_in_one_line(attentions, tokens, start, message):
    with pytest.raises(DataError) as caught:
        from_attentions(attentions, tokens, start)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_row_sums_are_checked_within_the_rounding_of_the_attentions_dtype():
    """Issue 48: the views refused a real model's bfloat16 attention ("rows sum to 1.002 .. 1.002, not 1"). Rows
    are checked within twice their dtype's unit roundoff (bfloat16: 2 x 2^-8), float32 ones still within 1e-3."""
    import torch

    layers = softmax_layers(2, 2, 4)
    drifted = [layer * np.float32(1.002) for layer in layers]  # rows summing to 1.002, as bfloat16 rounding leaves them
    shown = from_attentions([torch.from_numpy(layer).to(torch.bfloat16) for layer in drifted], ["a", "b", "c", "d"])
    assert shown.attention.shape == (2, 2, 4, 4)
    for given in (drifted, [torch.from_numpy(layer) for layer in drifted]):
        with pytest.raises(DataError, match="not 1; give the attention weights"):
            from_attentions(given, ["a", "b", "c", "d"])
    twice = [torch.from_numpy(layer * np.float32(1.02)).to(torch.bfloat16) for layer in layers]
    with pytest.raises(DataError, match="not 1"):  # past bfloat16's rounding: scores, not weights
        from_attentions(twice, ["a", "b", "c", "d"])


def test_show_takes_torch_tensors_as_a_model_returns_them():
    import torch

    layers = [torch.from_numpy(layer) for layer in softmax_layers(2, 2, 4)]
    shown = reportgen.show(attentions=layers, tokens=["[CLS]", "hi", "there", "[SEP]"])
    html = shown._repr_html_()
    assert 'data-rgv="views"' in html and 'data-rgv-hash="off"' in html
    with pytest.raises(DataError, match="no query/key vectors"):  # said by the call, not when displayed
        reportgen.show(attentions=layers, tokens=["[CLS]", "hi", "there", "[SEP]"], view="qk")


@pytest.mark.parametrize("call, message", [
    (lambda: reportgen.show(), "text: give a sentence"),
    (lambda: reportgen.show("  \n"), "text: empty"),
    (lambda: reportgen.show("hi", pair=""), "pair: empty"),
    (lambda: reportgen.show("smile \ud83d"), "lone surrogate"),
    (lambda: reportgen.show("hi", view="graph"), "view: 'graph'"),
    (lambda: reportgen.show("hi", attentions=softmax_layers(1, 1, 2), tokens=["a", "b"]), "not both"),
])
def test_bad_calls_say_what_is_wrong_before_a_model_loads(call, message):
    with pytest.raises(DataError, match=re.escape(message)):
        call()


# -- the page and the notebook output --------------------------------------------------------------------

def test_the_page_allows_exactly_its_own_script_and_style():
    page = page_text(QuickRun(qk_run(), "tiny"))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    assert f"script-src {sha(scripts[0])};" in policy and f"style-src {sha(styles[0])};" in policy
    assert "unsafe" not in policy and "http" not in policy and "default-src 'none'" in policy
    # nothing is loaded from anywhere: no src or href but the page's own anchors
    assert not re.search(r'\ssrc=', page)
    assert set(re.findall(r'href="([^"]*)"', page)) == {"#query-key"}
    assert page.index(standalone.MARKER) < 4096


def test_user_text_reaches_the_page_escaped():
    run = qk_run()
    run.spec = run.spec.model_copy(update={"text": '<img src=x onerror=alert(1)></script><script>alert(2)</script>'})
    page = page_text(QuickRun(run, "<b>model</b>"))
    assert "<img" not in page and "<b>model" not in page and "alert(2)</script>" not in page
    fragment = reportgen.notebook.View(QuickRun(run, "m"), "head")._repr_html_()
    assert "<img" not in fragment and fragment.count("</script>") == 2


def test_notebook_outputs_run_the_scripts_once_and_start_their_own_view():
    quick = QuickRun(qk_run(), "tiny")
    head, model, qk = (reportgen.notebook.View(quick, view)._repr_html_() for view in ("head", "model", "qk"))
    roots = [re.search(r'<div class="rgv"[^>]*>', html).group(0) for html in (head, model, qk)]
    assert 'data-rgv="views"' in roots[0] and "data-rgv-view" not in roots[0]
    assert 'data-rgv-view="model"' in roots[1] and 'data-rgv="qk"' in roots[2]
    guard = re.search(r'window.reportgenViews.build !== "([0-9a-f]{16})"', head)
    assert guard and guard.group(1) in model and "startAll()" in head
    assert ' id="' not in head  # several outputs on one page: no element ids to collide


def test_the_inline_scripts_are_the_views_scripts_minified():
    script, style = standalone.inline_assets()
    from reportgen.site.sources import site_sources

    source = site_sources()[0] / "assets" / "javascripts"
    full = sum(len((source / name).read_text(encoding="utf-8")) for name in views.VIEW_SCRIPTS)
    assert len(script) < 0.7 * full
    for name in ("NormContributions", "startAll", "decodeQKLayer", "ViewsWidget", "QKWidget"):
        assert name in script
    assert ".rgv" in style


# -- where the file goes ---------------------------------------------------------------------------------

def test_the_file_is_written_only_over_a_view_file(tmp_path):
    quick = QuickRun(qk_run(), "tiny")
    target = tmp_path / "view.html"
    size = write_view(quick, target)
    assert size == target.stat().st_size and standalone.MARKER in target.read_text(encoding="utf-8")
    write_view(quick, target)  # its own file: replaced
    assert [path.name for path in tmp_path.iterdir()] == ["view.html"]  # no partial file left

    foreign = tmp_path / "notes.html"
    foreign.write_text("<p>mine</p>", encoding="utf-8")
    with pytest.raises(OutputError, match="not written by `reportgen view`"):
        write_view(quick, foreign)
    assert foreign.read_text(encoding="utf-8") == "<p>mine</p>"

    link = tmp_path / "link.html"
    link.symlink_to(target)
    for bad, message in ((tmp_path, "not a file"), (link, "a symlink"), (tmp_path / "no" / "v.html", "does not exist"),
                         (tmp_path / "reportgen.yaml", "ending in .html"), (tmp_path / "view.html.txt", "ending in")):
        with pytest.raises(OutputError, match=message):
            check_target(bad)


# -- which forward pass runs ----------------------------------------------------------------------------

@pytest.mark.slow  # imports transformers' model code (~5 s): out of the fast tier
def test_a_model_light_bert_does_not_reproduce_runs_through_transformers(tmp_path):
    """gelu_new is not light_bert's GELU: the quick view loads it as a build does, with the same data out."""
    from reportgen.model import light_bert, loading
    from reportgen.model.run import run_example
    from reportgen.quickview import run_text
    from tests.helpers import make_ablation_bert

    model = make_ablation_bert(tmp_path / "model", hidden_act="gelu_new")
    assert not light_bert.supports(model)
    quick = run_text("the cat sat on the mat", pair="a dog", model=str(model))
    net, tokenizer = loading.load(model, "cpu")
    expected = run_example(net, tokenizer, ExampleSpec(text="the cat sat on the mat", pair="a dog"), 128, keep_qk=True)
    assert quick.run.tokens == expected.tokens
    assert np.abs(quick.run.attention - expected.attention).max() < 1e-6
    assert "qk" in views.combined_payload(quick.run) and quick.model == "model"
