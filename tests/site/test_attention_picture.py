"""The picture of the head a pattern finding names (reportgen.site.charts.attention_picture, issue 47): its cells
are the head's weights as the example page carries them (max-pooled past MAX_CELLS), it is one link to that
head's view on that example, and no token reaches it unescaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.report import ExampleViews, Finding, head_link
from reportgen.runs import ExampleRun
from reportgen.site.attention_encoding import head_decoder
from reportgen.site.charts import attention_picture
from reportgen.site.charts.value_map_svg import colour
from reportgen.site.views import example_payload

EVIL = '</svg><script>alert(1)</script>"&'


def _views(tokens: list[str], seed: int = 0, layers: int = 2, heads: int = 3) -> ExampleViews:
    n = len(tokens)
    logits = np.random.default_rng(seed).normal(0, 3, (layers, heads, n, n))
    attention = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    special = np.array([i in (0, n - 1) for i in range(n)])
    run = ExampleRun(ExampleSpec(text=" ".join(tokens)), tokens, np.where(special, -1, np.arange(n)),
                     np.where(special, -1, 0), special, attention)
    return ExampleViews(tokens=tokens, segments=[0] * n, payload=example_payload(run), qk_payload=None)


def _finding(layer: int, head: int, example: int, **numbers) -> Finding:
    return Finding(id="patterns-previous-token", group="patterns", supported=True, sentence="s", spans=[], links=[],
                   numbers={"heads": [{"layer": layer, "head": head, "example": example}], **numbers})


def _cells(svg: str) -> list[tuple[float, float, str]]:
    return [(float(x), float(y), fill) for x, y, fill in re.findall(r'<path d="M([\d.]+) ([\d.]+)h[^"]*" fill="(#\w+)"',
                                                                   svg)]


def test_a_short_example_is_drawn_cell_for_cell_from_the_pages_weights_with_its_tokens_escaped():
    tokens = ["[CLS]", "the", EVIL, "sat", "[SEP]"]
    views = _views(tokens)
    drawn = attention_picture.pictures([_finding(1, 2, 0)], {"patterns-previous-token": "positional"}, [views])
    markup = str(drawn["patterns-previous-token"])
    weights = head_decoder(views.payload["attention"])(1, 2)  # what the page's views draw
    fills = {colour(float(np.sqrt(w)), 0.0, 1.0) for w in weights.ravel() if w >= attention_picture.FAINT}
    assert len(_cells(markup)) == int((weights >= attention_picture.FAINT).sum())
    assert {fill for *_, fill in _cells(markup)} == fills
    assert re.search(r'<a href="([^"]+)"', markup).group(1) == head_link(0, 1, 2).replace("&", "&amp;")
    assert "<script>" not in markup and "&lt;/svg&gt;" in markup
    svg = re.search(r"<svg .*?</svg>", markup, re.S).group(0)
    ElementTree.fromstring(svg)  # well-formed, whatever the tokens
    q, k = np.unravel_index(int(np.argmax(weights)), weights.shape)
    assert f"its largest weight, {weights[q, k]:.2f}, is from token {q}" in markup
    assert len(re.findall(r"<text ", svg)) == 2 * len(tokens)  # every token labelled, on both sides


def test_a_long_example_is_max_pooled_and_labelled_at_its_ends():
    n = 100
    views = _views(["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"], layers=1, heads=1)
    weights = head_decoder(views.payload["attention"])(0, 0)
    pooled, q_edges, k_edges = attention_picture.max_pool(weights)
    assert pooled.shape == (attention_picture.MAX_CELLS,) * 2 and q_edges[-1] == k_edges[-1] == n
    for r, c in [(0, 0), (7, 30), (47, 47)]:
        block = weights[q_edges[r]:q_edges[r + 1], k_edges[c]:k_edges[c + 1]]
        assert pooled[r, c] == block.max()
    markup = str(attention_picture.picture(attention_picture.Attention(weights, views.tokens, views.tokens), 0, 0, 0))
    assert len(_cells(markup)) == int((pooled >= attention_picture.FAINT).sum())
    assert re.findall(r">(\d+)</text>", markup) == ["0", str(n - 1), "0", str(n - 1)]
    assert "the largest weight of a block of tokens" in markup


@pytest.mark.parametrize(("numbers", "drawer"), [
    ({"heads": [], "strongest": None}, "positional"),  # names no head
    ({"heads": [{"layer": 0, "head": 0, "example": -1}]}, "positional"),  # no example shows it
    ({"heads": [{"layer": 0, "head": 0, "example": 0}]}, "random_fraction"),  # not a pattern finding
])
def test_a_finding_without_a_named_head_on_an_example_gets_no_attention_picture(numbers, drawer):
    finding = Finding(id="f", group="patterns", supported=False, sentence="s", spans=[], links=[], numbers=numbers)
    assert attention_picture.pictures([finding], {"f": drawer}, [_views(["[CLS]", "a", "[SEP]"])]) == {}


def test_without_passing_heads_the_strongest_head_is_drawn():
    finding = Finding(id="f", group="patterns", supported=False, sentence="s", spans=[], links=[],
                      numbers={"heads": [], "strongest": {"layer": 1, "head": 0, "example": 0}})
    drawn = attention_picture.pictures([finding], {"f": "delimiter"}, [_views(["[CLS]", "a", "b", "[SEP]"])])
    assert "Layer 1, head 0 on example 1" in str(drawn["f"])
