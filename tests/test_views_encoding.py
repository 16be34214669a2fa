"""The compact attention encoding of the views, and the q/k capture behind the query/key view.

Bounds from issue 3: decoded weights within 0.5/255 of the model's, rows summing to 1 within 0.01.
"""

from __future__ import annotations

import base64
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from reportgen.attention import ExampleRun, run_example
from reportgen.config import ExampleSpec
from reportgen.qk import attention_from_qk, capture_qk
from reportgen.views import (
    QK_MAX_TOKENS,
    decode_attention,
    encode_attention,
    example_payload,
    qk_html,
    qk_payload,
    quantise_rows,
    views_html,
)

MAX_ERR = 0.5 / 255
ROW_SUM_TOL = 0.01
PAIR = ExampleSpec(text="I went to the store.", pair="At the store, I bought fresh strawberries.")


def _decoded_rows(rows: np.ndarray) -> np.ndarray:
    codes, floor, scale = quantise_rows(rows)
    return floor.astype(np.float64)[..., None] + codes * scale.astype(np.float64)[..., None]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def _long_tail_row(n: int = 512, peak: float = 0.9) -> np.ndarray:
    row = np.full(n, (1 - peak) / (n - 1), dtype=np.float32)
    row[n - 1] = peak  # e.g. [SEP]
    return row


def test_long_row_with_one_peak_keeps_its_mass():
    row = _long_tail_row()[None]
    decoded = _decoded_rows(row)
    assert np.abs(decoded - row).max() <= MAX_ERR
    assert abs(decoded.sum() - 1) <= ROW_SUM_TOL
    # The case the floor exists for: plain per-row max scaling drops every small weight to 0.
    naive = np.rint(row / row.max() * 255) * (row.max() / 255)
    assert abs(naive.sum() - 1) > 0.09


@pytest.mark.parametrize("n", [1, 2, 5, 19, 64, 128, 512])
@pytest.mark.parametrize("temperature", [0.3, 1.0, 4.0])
def test_random_softmax_rows_within_bounds(n, temperature):
    rng = np.random.default_rng(n * 10 + int(temperature * 10))
    rows = _softmax(rng.normal(size=(200, n)) * temperature)
    decoded = _decoded_rows(rows)
    assert np.abs(decoded - rows).max() <= MAX_ERR
    assert np.abs(decoded.sum(axis=-1) - 1).max() <= ROW_SUM_TOL
    assert decoded.min() >= 0


def test_round_trip_through_json_and_base64():
    rng = np.random.default_rng(0)
    attention = _softmax(rng.normal(size=(3, 4, 23, 23)) * 3)
    encoded = json.loads(json.dumps(encode_attention(attention)))
    assert encoded["encoding"] == "u8-row-affine" and encoded["shape"] == [3, 4, 23, 23]
    assert len(encoded["q"]) == 12 and all(len(base64.b64decode(s)) == 23 * 23 for s in encoded["q"])
    decoded = decode_attention(encoded)
    assert decoded.shape == attention.shape
    assert np.abs(decoded - attention).max() <= MAX_ERR
    assert np.abs(decoded.sum(-1) - 1).max() <= ROW_SUM_TOL


@pytest.fixture(scope="module")
def embedded(embedded_model_path):
    from reportgen.model import load

    return load(embedded_model_path, "cpu")


@pytest.fixture(scope="module")
def pair_run(embedded) -> ExampleRun:
    model, tokenizer = embedded
    return run_example(model, tokenizer, PAIR, 512, keep_qk=True)


@pytest.mark.slow
def test_real_model_rows_within_bounds(pair_run):
    assert pair_run.n_tokens == 19
    decoded = decode_attention(example_payload(pair_run)["attention"])
    assert np.abs(decoded - pair_run.attention).max() <= MAX_ERR
    assert np.abs(decoded.sum(-1) - 1).max() <= ROW_SUM_TOL


@pytest.mark.slow
def test_real_model_512_token_rows_within_bounds(embedded):
    model, tokenizer = embedded
    text = " ".join(["The committee met on Tuesday, and after a long debate it approved the budget."] * 40)
    run = run_example(model, tokenizer, ExampleSpec(text=text), 512, keep_qk=True)
    assert run.n_tokens == 512 and run.truncated
    codes, floor, scale = quantise_rows(run.attention)
    decoded = floor.astype(np.float64)[..., None] + codes * scale.astype(np.float64)[..., None]
    assert np.abs(decoded - run.attention).max() <= MAX_ERR
    assert np.abs(decoded.sum(-1) - 1).max() <= ROW_SUM_TOL


@pytest.mark.slow
def test_payload_is_compact_json_and_safe_in_a_script(pair_run):
    payload = example_payload(pair_run)
    html = views_html(payload)
    # 8 bits per weight plus a float32 floor and scale per row, in base64: 4/3 * (1 + 8/19) bytes per weight
    assert len(html) < 4 / 3 * (1 + 8 / 19) * pair_run.attention.size + 3000
    assert "\n\n" not in html  # a blank line would end Markdown's raw HTML block
    body = re.search(r'<script type="application/json" class="rgv-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(body) == payload


def test_hostile_text_cannot_close_the_script():
    evil = "</script><script>alert(1)</script> <img src=x onerror=alert(1)> <!-- &amp;"
    attention = np.full((1, 1, 3, 3), 1 / 3, dtype=np.float32)
    run = ExampleRun(ExampleSpec(text=evil, name=evil), ["[CLS]", evil, "[SEP]"], np.array([-1, 0, -1]),
                     np.array([-1, 0, -1]), np.array([True, False, True]), attention)
    html = views_html(example_payload(run))
    assert html.count("</script>") == 1 and "<img" not in html and "<!--" not in html
    body = re.search(r'class="rgv-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(body)["tokens"][1] == evil


def test_views_module_needs_neither_torch_nor_the_model_side():
    """Pages are rendered from plain data: importing reportgen.views must not pull in torch or the analyses."""
    code = ("import sys, reportgen.views; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith("
            "('reportgen.attention', 'reportgen.qk', 'reportgen.model'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_qk_payload_scaling_from_the_model_or_the_head_size():
    rng = np.random.default_rng(3)
    queries, keys = rng.normal(size=(2, 4, 3, 8)).astype(np.float32), rng.normal(size=(2, 4, 3, 8)).astype(np.float32)
    attention = np.full((2, 4, 3, 3), 1 / 3, dtype=np.float32)
    run = ExampleRun(ExampleSpec(text="a b"), ["[CLS]", "a", "[SEP]"], np.array([-1, 0, -1]), np.array([-1, 0, -1]),
                     np.array([True, False, True]), attention, extras={"queries": queries, "keys": keys})
    assert qk_payload(run)["scaling"] == 1 / math.sqrt(8)
    run.extras["scaling"] = np.array(0.5)
    payload = qk_payload(run)
    assert payload["scaling"] == 0.5 and len(payload["queries"]) == len(payload["keys"]) == 8
    run.extras["keys"] = keys[:, :, :2]
    with pytest.raises(ValueError, match="disagree"):
        qk_payload(run)


# ---------------------------------------------------------------- q/k capture


def _tiny(kind: str):
    import torch
    from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel, DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    if kind == "bert":
        config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64)
        model = BertModel(config)
    elif kind == "distilbert":
        config = DistilBertConfig(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=64)
        model = DistilBertModel(config)
    else:  # ALBERT shares one layer across depth: the hooks fire once per layer on one module
        config = AlbertConfig(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                              num_attention_heads=4, intermediate_size=64)
        model = AlbertModel(config)
    model.set_attn_implementation("eager")
    return model.eval()


@pytest.mark.parametrize("kind, layers", [("bert", 2), ("distilbert", 2), ("albert", 3)])
def test_captured_qk_reproduce_attention_of_tiny_models(kind, layers):
    import torch

    model = _tiny(kind)
    ids = torch.randint(5, 99, (1, 13), generator=torch.Generator().manual_seed(1))
    with capture_qk(model) as cap, torch.inference_mode():
        out = model(input_ids=ids, output_attentions=True)
    attention = torch.stack(out.attentions)[:, 0].numpy()
    assert cap.queries.shape == cap.keys.shape == (layers, 4, 13, 8)
    assert np.abs(attention_from_qk(cap.queries, cap.keys) - attention).max() < 1e-5
    # the hooks are gone afterwards: another forward pass records nothing
    with torch.inference_mode():
        model(input_ids=ids)
    assert cap._q == [] and cap._k == []


@pytest.mark.slow
def test_captured_qk_reproduce_attention_of_embedded_model(pair_run):
    queries, keys = pair_run.extras["queries"], pair_run.extras["keys"]
    assert queries.shape == (6, 12, 19, 32)
    assert math.isclose(float(pair_run.extras["scaling"]), 1 / math.sqrt(32))
    assert np.abs(attention_from_qk(queries, keys) - pair_run.attention).max() < 1e-5


@pytest.mark.slow
def test_qk_payload_carries_exact_vectors_and_is_bounded(pair_run):
    payload = qk_payload(pair_run)
    assert payload["kind"] == "qk" and payload["head_dim"] == 32
    q = np.frombuffer(base64.b64decode(payload["queries"][2 * 12 + 3]), dtype="<f4").reshape(19, 32)
    assert np.array_equal(q, pair_run.extras["queries"][2, 3])
    assert QK_MAX_TOKENS == 64
    assert qk_html(payload).startswith('<div class="rgv" data-rgv="qk"')
    with pytest.raises(ValueError, match="at most 18 tokens"):
        qk_payload(pair_run, max_tokens=18)
