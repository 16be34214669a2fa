"""The query/key page past 64 tokens (issue 46): its size bound (config views.query_key_mb), its check a head at
a time, a decoder's mask in one word, and a long example's weights read from its example page's files.

Synthetic runs with the model's weights made from their q and k in numpy (tests/site/test_qk_terms.py `_run`),
so every check here can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.pipeline.model_stage import within_qk_budget
from reportgen.site import view_files
from reportgen.site.attention_encoding import _decode
from reportgen.site.qk_encoding import CAUSAL
from reportgen.site.views import (
    decode_attention,
    decode_qk_layer,
    decode_visible,
    decoded_softmax,
    dequantise_vectors,
    example_payload,
    has_qk,
    pack_visible,
    qk_bytes,
    qk_check,
    qk_masks,
    qk_payload,
    qk_score_bound,
    quantise_rows,
    quantise_vectors,
    visible_bytes,
)
from tests.site.test_qk_terms import _run


def _causal_run(shape: tuple[int, int, int, int], seed: int = 0):
    """A decoder-like run: every layer masks the keys after the query, as qk_visible says."""
    run = _run(names=(), mask=False, shape=shape, seed=seed)
    layers, heads, n, dim = shape
    visible = np.broadcast_to(np.tril(np.ones((n, n), dtype=bool)), (layers, n, n))
    q, k = run.extras["queries"].astype(np.float64), run.extras["keys"].astype(np.float64)
    scores = np.where(visible[:, None], np.einsum("lhqd,lhkd->lhqk", q, k) * float(run.extras["scaling"]), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    run.attention = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    run.extras["qk_visible"] = visible.copy()
    return run


def _whole_check(run) -> dict[str, float]:
    """qk_payload's check as it was made before: the whole example's arrays at once."""
    queries, keys = run.extras["queries"], run.extras["keys"]
    scaling = float(run.extras["scaling"])
    (qc, qs), (kc, ks) = quantise_vectors(queries), quantise_vectors(keys)
    terms = run.extras.get("qk_terms")
    visible = run.extras.get("qk_visible")
    term_codes = None
    if terms is not None:
        terms = np.moveaxis(np.where(visible[None, :, None], terms, 0) if visible is not None else terms, 0, 2)
        term_codes = quantise_vectors(terms.astype(np.float32))
    mask = None if visible is None else visible[:, None]
    decoded = decoded_softmax(qc, qs, kc, ks, scaling, None if term_codes is None else dequantise_vectors(*term_codes),
                              mask)
    bound = qk_score_bound(qc, qs, kc, ks, scaling, None if term_codes is None else term_codes[1])
    return qk_check(decoded, _decode(*quantise_rows(run.attention)), bound, visible=mask)


@pytest.mark.parametrize("names, mask", [((), False), (("c2p", "p2c"), True), (("position",), False)])
def test_the_check_a_head_at_a_time_is_the_whole_examples(names, mask):
    run = _run(names=names, mask=mask)
    assert qk_payload(run)["check"] == _whole_check(run)


def test_a_payload_without_weights_checks_against_the_views_encoding_it_names():
    run = _causal_run((2, 3, 300, 8))
    encoded = example_payload(run)["attention"]
    payload = qk_payload(run, weights=False, attention=encoded)
    assert payload["weights"] == "attention" and payload["visible"] == [CAUSAL, CAUSAL]
    model = decode_attention(encoded)  # long rows: coarse codes, not quantise_rows' of a single layer
    worst = 0.0
    for layer in range(2):
        fields = decode_qk_layer(payload["layers"][layer], 3, 300, 8, weights=False)
        for head in range(3):
            soft = decoded_softmax(fields["q_codes"][head], fields["q_scale"][head], fields["k_codes"][head],
                                   fields["k_scale"][head], payload["scaling"], None, decode_visible(CAUSAL, 300))
            worst = max(worst, float(np.abs(soft - model[layer, head]).max()))
    assert payload["check"]["difference"] == pytest.approx(np.ceil(worst * 1e4) / 1e4)
    assert payload["check"]["difference"] <= payload["check"]["rounding"]
    assert qk_payload(run, weights=False)["check"] == payload["check"]  # the same encoding, made there


def test_a_decoders_mask_is_one_word_and_any_other_mask_its_bits():
    n = 300
    causal = np.tril(np.ones((n, n), dtype=bool))
    window = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= 4
    packed = pack_visible(np.stack([causal, window, np.ones((n, n), dtype=bool)]))
    assert packed[0] == CAUSAL and packed[2] is None and len(packed[1]) == 4 * np.ceil(n * n / 8 / 3)
    assert (decode_visible(packed[0], n) == causal).all() and (decode_visible(packed[1], n) == window).all()


@pytest.mark.parametrize("n", [1, 5, 24, 31])
def test_visible_bytes_counts_what_pack_visible_writes_without_packing(n):
    rng = np.random.default_rng(n)
    causal = np.tril(np.ones((n, n), dtype=bool))
    window = causal & (rng.random((n, n)) < 0.9)
    layers = np.stack([causal, np.ones((n, n), dtype=bool), rng.random((n, n)) < 0.7, window])
    written = sum(len(text) for text in pack_visible(layers) if text not in (None, CAUSAL))
    assert visible_bytes(layers) == written


@pytest.mark.parametrize("run", [_run(), _run(names=(), mask=False), _causal_run((2, 2, 40, 8))],
                         ids=["terms-and-window", "plain", "causal"])
def test_qk_bytes_is_what_the_page_adds_beside_its_examples_data(run):
    payload = qk_payload(run, weights=False)
    added = sum(len(text) for text in payload["layers"]) + sum(len(text) for text in payload.get("visible", [])
                                                               if text not in (None, CAUSAL))
    assert qk_bytes(run) == added
    assert qk_bytes(_run(names=(), mask=False, shape=(2, 3, 18, 8))) >= 2 * qk_bytes(_run(names=(), mask=False))


def test_a_run_over_the_budget_keeps_its_size_and_a_cached_one_that_fits_now_runs_again():
    size = qk_bytes(_run())
    kept = within_qk_budget(_run(), size, fresh=True)
    assert has_qk(kept) and "qk_bytes" not in kept.extras
    dropped = within_qk_budget(_run(), size - 1, fresh=True)
    assert not has_qk(dropped) and int(dropped.extras["qk_bytes"]) == size
    assert within_qk_budget(dropped, size - 1) is dropped  # still over: the cached run stands
    assert within_qk_budget(dropped, size) is None  # fits now: run it again for its vectors
    plain = _run(names=(), mask=False)
    plain.extras.clear()
    assert within_qk_budget(plain, 0) is plain and within_qk_budget(None, 10) is None  # no vectors, no entry
    assert not has_qk(within_qk_budget(_run(), 0))  # 0: no query/key pages


def test_a_long_examples_qk_page_reads_the_weights_from_its_example_pages_files(tmp_path, monkeypatch):
    run = _causal_run((2, 3, 300, 8), seed=3)
    payload = example_payload(run)
    monkeypatch.setattr(view_files, "VIEWS_INLINE_LIMIT", 0)
    monkeypatch.setattr(view_files, "QK_INLINE_LIMIT", 0)  # its own layers in files too
    assert view_files.per_head(payload)
    qk = qk_payload(run, weights=False, attention=payload["attention"])
    page, qk_page = view_files.example_pages(tmp_path, 4, payload, qk, qk_href="example-4-qk.html")
    (tmp_path / "example-4.html").write_text(page, encoding="utf-8")
    (tmp_path / "example-4-qk.html").write_text(qk_page, encoding="utf-8")
    written = sorted(path.name for path in (tmp_path / "example-4-data").iterdir())
    heads = [f"l{layer}h{head}.js" for layer in range(2) for head in range(3)]
    assert written == sorted(heads + ["qk-l0.js", "qk-l1.js"])  # the weights once, beside q and k
    joined = view_files.read_page_payload(tmp_path / "example-4-qk.html")
    assert joined["attention"]["shape"] == [2, 3, 300, 300] and joined["weights"] == "attention"
    assert np.array_equal(decode_attention(joined["attention"]), decode_attention(payload["attention"]))
    assert joined["layers"] == qk["layers"]
    with pytest.raises(ValueError, match="example 5: a query/key page without weights needs"):
        monkeypatch.setattr(view_files, "VIEWS_INLINE_LIMIT", 10**9)
        view_files.example_pages(tmp_path, 5, payload, qk)


def test_the_qk_page_names_the_masks_the_model_has():
    n = 12
    index = np.arange(n)
    causal = index[:, None] >= index[None, :]
    sliding = causal & (index[:, None] - index[None, :] <= 3)  # Mistral: causal, and only the 4 nearest
    local = np.abs(index[:, None] - index[None, :]) <= 3  # ModernBERT's local layers: both sides
    everything = np.ones((n, n), dtype=bool)

    def masks(*layers: np.ndarray) -> list[str]:
        return qk_masks({"shape": [len(layers), 1, n, 4], "visible": pack_visible(np.stack(layers))})

    assert masks(causal, causal) == ["causal"] and masks(everything) == [] and qk_masks({"shape": [1, 1, n, 4]}) == []
    assert masks(causal, sliding) == ["causal", "causal-window"]
    assert masks(local, everything) == ["window"] and masks(local, causal) == ["causal", "window"]
