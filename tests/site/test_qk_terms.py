"""Score terms and masked keys on the query/key page (reportgen/site/qk_encoding.py, module docstring).

DeBERTa adds content-to-position and position-to-content terms to q . k (He et al. 2021), MPNet a
relative position bias per head (Song et al. 2020), and ModernBERT's local layers mask the keys
outside a sliding window. Synthetic runs here carry them in `extras` as reportgen.model.run gives them,
with the model's weights made from them in numpy, so the page's check must pass with them and fail
without them; and a run without them must give the payload it gave before they existed.
"""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.runs import ExampleRun
from reportgen.site.htmlsafe import script_json
from reportgen.site.views import (
    QK_TERMS,
    combined_payload,
    decode_qk_layer,
    decode_visible,
    decoded_softmax,
    dequantise_vectors,
    masked_softmax,
    pack_visible,
    qk_payload,
    qk_score_bound,
)

SHAPE = (2, 3, 9, 8)  # layers, heads, tokens, head size
WINDOW = 2  # layer 1 masks every key more than this many tokens from the query (ModernBERT-like)
OLD_KEYS = {"version", "name", "text", "pair", "tokens", "segments", "special", "truncated", "kind", "encoding",
            "shape", "head_dim", "scaling", "check", "layers"}


def _window(n: int, width: int) -> np.ndarray:
    index = np.arange(n)
    return np.abs(index[:, None] - index[None, :]) <= width


def _model_weights(scores: np.ndarray, visible: np.ndarray | None) -> np.ndarray:
    """The model's softmax, written out here (not views.masked_softmax): -inf on masked keys, float32."""
    if visible is not None:
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def _run(names: tuple[str, ...] = ("c2p", "p2c"), mask: bool = True, seed: int = 0,
         shape: tuple[int, int, int, int] = SHAPE, term_size: float = 1.5,
         model_terms: bool = True, model_mask: bool = True, filler: float = -np.inf) -> ExampleRun:
    """A run with q, k, score terms `names` and (with `mask`) layer 1 masked outside WINDOW; its attention is
    softmax(scaling q . k + terms) over the visible keys, or leaves the terms or the mask out of it
    (`model_terms`, `model_mask`) for a run whose stored extras do not describe its weights. The terms
    hold `filler` on masked keys, as a model may."""
    layers, heads, n, dim = shape
    rng = np.random.default_rng(seed)
    queries = rng.normal(size=shape).astype(np.float32)
    keys = rng.normal(size=shape).astype(np.float32)
    scaling = 1 / math.sqrt(3 * dim)  # DeBERTa's scaling with its two extra terms (He et al. 2021)
    terms = (rng.normal(size=(len(names), layers, heads, n, n)) * term_size).astype(np.float32)
    visible = np.ones((layers, n, n), dtype=bool)
    if mask:
        visible[1] = _window(n, WINDOW)
        terms[:, 1][..., ~visible[1]] = filler  # the model's filler on masked keys: must not matter
    scores = np.einsum("lhqd,lhkd->lhqk", queries.astype(np.float64), keys.astype(np.float64)) * scaling
    if model_terms and names:
        scores = scores + np.where(np.isfinite(terms), terms, 0).sum(axis=0)
    attention = _model_weights(scores, visible[:, None] if model_mask else None)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
    segments = np.array([-1] + [0] * (n - 2) + [-1])
    extras = {"queries": queries, "keys": keys, "scaling": np.array(scaling)}
    if names:
        extras.update(qk_terms=terms, qk_term_names=np.array(names))
    if mask:
        extras["qk_visible"] = visible
    return ExampleRun(ExampleSpec(text="w0 w1"), tokens, np.arange(n) - 1, segments, segments == -1, attention,
                      extras=extras)


def _without(run: ExampleRun, *names: str) -> ExampleRun:
    extras = {key: value for key, value in run.extras.items() if key not in names}
    return ExampleRun(run.spec, run.tokens, run.word_ids, run.segment_ids, run.special, run.attention, extras=extras)


def _block_sizes(payload: dict, heads: int) -> list[int]:
    return [len(base64.b64decode(text)) // heads for text in payload["layers"]]


# ---------------------------------------------------------------- the payload


def test_terms_decode_within_half_a_step_and_are_zero_on_masked_keys():
    run = _run()
    payload = qk_payload(run)
    layers, heads, n, dim = SHAPE
    assert [term["name"] for term in payload["terms"]] == ["c2p", "p2c"]
    assert payload["terms"][0]["label"] == "c2p" and "He et al. 2021" in payload["terms"][1]["title"]
    visible = run.extras["qk_visible"]
    for index, text in enumerate(payload["layers"]):
        layer = decode_qk_layer(text, heads, n, dim, terms=2)
        assert layer["term_codes"].shape == (heads, 2, n, n) and layer["term_scale"].shape == (heads, 2, n)
        decoded = dequantise_vectors(layer["term_codes"], layer["term_scale"])  # [H, N, T, T]
        want = np.moveaxis(run.extras["qk_terms"][:, index], 0, 1).astype(np.float64)
        shown = np.broadcast_to(visible[index], want.shape)
        half_step = np.broadcast_to(layer["term_scale"].astype(np.float64)[..., None] / 2, want.shape)
        assert np.all(np.abs(decoded - want)[shown] <= half_step[shown] * (1 + 1e-6))
        assert np.all(decoded[~shown] == 0)
        # steps of the size the row needs: max |term| / 2047 over its visible keys
        top = np.where(shown, np.abs(np.where(shown, want, 0)), 0).max(axis=-1)
        assert np.allclose(layer["term_scale"], top / 2047, rtol=1e-6)
    assert payload["visible"][0] is None  # layer 0 masks nothing
    assert np.array_equal(decode_visible(payload["visible"][1], n), visible[1])


def test_the_vectors_and_weights_are_stored_as_before_with_the_terms_after_them():
    run = _run()
    plain = qk_payload(_without(run, "qk_terms", "qk_term_names", "qk_visible"))
    payload = qk_payload(run)
    layers, heads, n, dim = SHAPE
    old = 3 * n * dim + 16 * n + n * n
    terms = 3 * math.ceil(2 * n * n / 2) + 4 * 2 * n  # 12-bit codes, then one float32 scale per (term, query)
    assert _block_sizes(plain, heads) == [old] * layers and _block_sizes(payload, heads) == [old + terms] * layers
    for with_terms, without in zip(payload["layers"], plain["layers"], strict=True):
        full = np.frombuffer(base64.b64decode(with_terms), dtype=np.uint8).reshape(heads, -1)
        bare = np.frombuffer(base64.b64decode(without), dtype=np.uint8).reshape(heads, -1)
        assert np.array_equal(full[:, :old], bare)


def test_an_odd_number_of_term_codes_is_padded_to_whole_pairs():
    run = _run(names=("position",), mask=False, shape=(1, 2, 5, 4))  # 1 x 5 x 5 = 25 codes per head
    payload = qk_payload(run)
    assert _block_sizes(payload, 2) == [3 * 5 * 4 + 16 * 5 + 25 + 3 * 13 + 4 * 5]
    layer = decode_qk_layer(payload["layers"][0], 2, 5, 4, terms=1)
    decoded = dequantise_vectors(layer["term_codes"], layer["term_scale"])
    want = np.moveaxis(run.extras["qk_terms"][:, 0], 0, 1)
    assert np.all(np.abs(decoded - want) <= layer["term_scale"][..., None] / 2 * (1 + 1e-6))
    assert "visible" not in payload and payload["terms"][0]["label"] == "position"
    assert "Song et al. 2020" in payload["terms"][0]["title"]


def test_term_names_without_a_label_get_a_generic_one():
    run = _run(names=("c2p", "alibi"), mask=False)
    terms = qk_payload(run)["terms"]
    assert terms[0] == {"name": "c2p", "label": QK_TERMS["c2p"][0], "title": QK_TERMS["c2p"][1]}
    assert terms[1]["name"] == terms[1]["label"] == "alibi" and "adds to each score" in terms[1]["title"]


def test_visibility_bits_are_query_major_and_little_endian():
    # n = 3, only the diagonal visible: bits 0, 4 and 8 -> bytes 0b00010001, 0b00000001
    visible = np.eye(3, dtype=bool)[None]
    assert pack_visible(visible) == [base64.b64encode(bytes([17, 1])).decode()]
    assert pack_visible(np.ones((2, 3, 3), dtype=bool)) == [None, None]
    window = _window(9, 2)
    assert np.array_equal(decode_visible(pack_visible(window[None])[0], 9), window)
    assert decode_visible(None, 4).all()


def test_a_run_without_the_extras_gives_the_payload_it_gave_before():
    run = _without(_run(), "qk_terms", "qk_term_names", "qk_visible")
    payload = qk_payload(run)
    layers, heads, n, dim = SHAPE
    assert set(payload) == OLD_KEYS
    assert _block_sizes(payload, heads) == [3 * n * dim + 16 * n + n * n] * layers
    # a mask that hides nothing, or no terms at all, changes not a byte
    everything = dict(run.extras, qk_visible=np.ones((layers, n, n), dtype=bool))
    none = dict(run.extras, qk_terms=np.zeros((0, layers, heads, n, n), np.float32), qk_term_names=np.array([], str))
    for extras in (everything, none):
        other = ExampleRun(run.spec, run.tokens, run.word_ids, run.segment_ids, run.special, run.attention,
                           extras=extras)
        assert script_json(qk_payload(other)) == script_json(payload)
        assert script_json(combined_payload(other)) == script_json(combined_payload(run))
    assert set(combined_payload(run)["qk"]) == {"encoding", "shape", "head_dim", "scaling", "check", "layers",
                                                "weights"}


def test_the_single_file_payload_carries_the_terms_and_the_mask():
    run = _run()
    combined, full = combined_payload(run)["qk"], qk_payload(run)
    layers, heads, n, dim = SHAPE
    assert combined["terms"] == full["terms"] and combined["visible"] == full["visible"]
    assert combined["check"] == full["check"]
    assert _block_sizes(combined, heads) == [3 * n * dim + 8 * n + 3 * n * n + 8 * n] * layers
    for lean_text, full_text in zip(combined["layers"], full["layers"], strict=True):
        lean = decode_qk_layer(lean_text, heads, n, dim, weights=False, terms=2)
        whole = decode_qk_layer(full_text, heads, n, dim, terms=2)
        assert np.array_equal(lean["term_codes"], whole["term_codes"])
        assert np.array_equal(lean["term_scale"], whole["term_scale"])


def test_bad_extras_are_refused():
    run = _run()
    layers, heads, n, _ = SHAPE
    with pytest.raises(ValueError, match="qk_visible"):
        qk_payload(ExampleRun(run.spec, run.tokens, run.word_ids, run.segment_ids, run.special, run.attention,
                              extras=dict(run.extras, qk_visible=np.ones((layers, n, n + 1), dtype=bool))))
    with pytest.raises(ValueError, match="qk_term_names"):
        qk_payload(ExampleRun(run.spec, run.tokens, run.word_ids, run.segment_ids, run.special, run.attention,
                              extras=dict(run.extras, qk_term_names=np.array(["c2p"]))))
    with pytest.raises(ValueError, match="not finite"):  # -inf filler on masked keys, and no mask to say so
        qk_payload(_without(run, "qk_visible"))
    terms = run.extras["qk_terms"].copy()
    terms[0, 0, 0, 0, 0] = np.nan  # layer 0 masks nothing: this key is visible
    with pytest.raises(ValueError, match="not finite"):
        qk_payload(ExampleRun(run.spec, run.tokens, run.word_ids, run.segment_ids, run.special, run.attention,
                              extras=dict(run.extras, qk_terms=terms)))


# ---------------------------------------------------------------- the check


@pytest.mark.parametrize("names, mask", [(("c2p", "p2c"), True), (("position",), False), ((), True)])
def test_the_check_passes_when_terms_and_mask_made_the_weights(names, mask):
    payload = qk_payload(_run(names=names, mask=mask))
    assert 0 < payload["check"]["difference"] <= payload["check"]["rounding"] < 0.01


@pytest.mark.parametrize("names, mask, left_out", [
    (("c2p", "p2c"), True, ("qk_terms", "qk_term_names")),  # DeBERTa's page without its terms
    (("position",), False, ("qk_terms", "qk_term_names")),  # MPNet's without its bias
    ((), True, ("qk_visible",)),  # ModernBERT's local layer as if every key were seen
    (("c2p", "p2c"), True, ("qk_visible",)),  # (the terms' filler on masked keys finite, else refused)
])
def test_the_check_fails_when_terms_or_mask_are_left_out(names, mask, left_out):
    run = _run(names=names, mask=mask, filler=0.0)
    assert qk_payload(run)["check"]["difference"] <= qk_payload(run)["check"]["rounding"]
    check = qk_payload(_without(run, *left_out))["check"]
    assert check["difference"] > 10 * check["rounding"]


def test_the_check_fails_when_the_weights_were_made_without_what_the_extras_say():
    # the extras describe terms and a mask, but the model's weights used neither: the page must not agree
    for run in (_run(model_terms=False), _run(names=(), model_mask=False)):
        check = qk_payload(run)["check"]
        assert check["difference"] > 10 * check["rounding"]


def test_decoded_scores_and_softmax_stay_within_the_bound_with_the_terms_rounding():
    run = _run(term_size=4.0)
    payload = qk_payload(run)
    layers, heads, n, dim = SHAPE
    scaling = payload["scaling"]
    terms = np.where(np.isfinite(run.extras["qk_terms"]), run.extras["qk_terms"], 0).astype(np.float64)
    exact = (np.einsum("lhqd,lhkd->lhqk", run.extras["queries"].astype(np.float64),
                       run.extras["keys"].astype(np.float64)) * scaling + terms.sum(axis=0))
    for index, text in enumerate(payload["layers"]):
        layer = decode_qk_layer(text, heads, n, dim, terms=2)
        visible = decode_visible(payload["visible"][index], n)
        vectors = layer["q_codes"], layer["q_scale"], layer["k_codes"], layer["k_scale"]
        decoded_terms = dequantise_vectors(layer["term_codes"], layer["term_scale"])
        scores = (np.einsum("hqd,hkd->hqk", dequantise_vectors(*vectors[:2]), dequantise_vectors(*vectors[2:]))
                  * scaling + decoded_terms.sum(axis=1))
        bound = qk_score_bound(*vectors, scaling, layer["term_scale"])
        without_terms = qk_score_bound(*vectors, scaling)
        assert np.all(bound > without_terms)  # the terms' rounding is in it
        assert np.all(np.abs(scores - exact[index])[:, visible] <= bound[:, visible] * (1 + 1e-9))
        soft = decoded_softmax(*vectors, scaling, decoded_terms, visible)
        assert np.array_equal(soft, masked_softmax(scores, visible)) and np.all(soft[:, ~visible] == 0)
        want = masked_softmax(exact[index], visible)
        row_bound = 0.5 * np.where(visible, bound, 0).max(axis=-1, keepdims=True)
        assert np.all(np.abs(soft - want) <= row_bound + 1e-12)
        assert np.abs(soft - want).max() > 0  # the rounding is really there


def test_masked_softmax_is_over_the_visible_keys_and_zero_for_a_row_that_sees_none():
    scores = np.array([[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0]])
    visible = np.array([[True, True, False], [False, False, False]])
    assert np.allclose(masked_softmax(scores, visible), [[0.25, 0.75, 0], [0, 0, 0]], atol=1e-15)
    assert np.allclose(masked_softmax(scores)[1], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
