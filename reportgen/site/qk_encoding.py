"""The 12-bit encoding of the query/key page's vectors and score terms (encoding "i12-vector"), and its bounds.

reportgen.site.views builds the query/key page's payload (`qk_payload`) with what is here: the vectors' and
terms' codes, their packing into one base64 string per layer (`_qk_layers`, `_qk_fields`), the bound on
the scores and softmax that rounding allows (`qk_score_bound`, `qk_check`), and the decoders the tests
and checks use. The model's weights beside them are in the attention encoding
(reportgen.site.attention_encoding, "u8-row-affine").

The query/key page stores the query and key vectors at 12 bits (encoding "i12-vector"),
symmetric with one scale per vector (one token's q or k in one head):

    v[t, d] = code[t, d] * s[t],   code in -2047..2047,   s[t] = max_d |v[t, d]| / 2047

so each component is off by at most e[t] = s[t] / 2. For a query q and key k of dimension D
(hats: decoded) |q . k - q^ . k^| <= |q^|_1 e_k + |k^|_1 e_q + D e_q e_k, at most
D max|q| max|k| (1/2047 + 1/4094^2). The scores are the dot products times the model's scaling
(1/sqrt(D) in BERT), and softmax moves by at most half the largest change of a score in its row
(its Jacobian diag(p) - p p^T has rows of absolute sum 2 p (1 - p) <= 1/2), so

    |softmax(decoded)[k] - softmax(float32)[k]| <= 1/2 max_k scaling |q . k - q^ . k^|.

`qk_score_bound` computes the per-pair bound from the stored codes and scales, and the tests
check decoded scores and softmax against it (tests/site/test_views_encoding.py). Why 12 bits: at 8
the softmax of the seed pair's decoded vectors is up to 0.012 off the float32 one, six times the
attention encoding's error; at 12 it is 0.0007, below it, for 1.5 bytes per component (two
codes in three bytes). The page compares that softmax with the model's weights (stored with the
attention encoding, within 0.5/255); `qk_payload` records the largest difference over the
example and the bound rounding allows, and the page prints them.

Score terms and masked keys. Some models' scores are more than scaling * q . k: DeBERTa adds a
content-to-position ("c2p") and a position-to-content ("p2c") term and scales by 1/sqrt(3 d) (He et al.
2021, section 3.1), MPNet adds a relative position bias per head (Song et al. 2020), and ModernBERT's local
layers mask every key outside a sliding window. A run gives them in `extras` (reportgen.model.run):
"qk_terms", float32 [N, L, H, T, T] in score units, so that the model's score is
scaling * q_i . k_j + sum_n qk_terms[n, l, h, i, j]; "qk_term_names", str [N]; and "qk_visible", bool
[L, T, T], False where the model masks key j for query i (score -inf, weight 0). The payload
(reportgen.site.views `qk_payload`) then has

    terms:   [{"name": "c2p", "label": <column title>, "title": <one sentence>}, ...]   (the extras' order)
    visible: per layer, null where every key is visible, "causal" where each query sees itself and the keys
             before it (a decoder's), else base64 of the T * T visibility bits,
             query-major (bit i * T + j), little-endian within each byte (bit b is bit b & 7 of byte
             b >> 3: numpy packbits(bitorder="little")), 1 = visible

and each head's block of a layer (`_qk_fields`) ends, after its other fields, with `term_codes`, the
head's N terms [T, T] in (term, query, key) order as 12-bit codes packed like the vectors' (one 0 code
appended when N * T * T is odd), and `term_scale`, little-endian float32 [N * T], (term, query) order.
Each query's row of a term is quantised like a vector (`quantise_vectors`), so each decoded value is
within its row's scale / 2, which adds directly to the bound on that query's scores (`qk_score_bound`).
Terms on masked keys are stored as 0 (the model's may be -inf or any filler there). The softmax, here
and on the page, is over the visible keys only, and the check bounds the rows over those keys. Without
these extras (BERT) neither field is written and the layers are byte for byte what they were before.
"""

from __future__ import annotations

import base64
import math

import numpy as np

from reportgen.site.attention_encoding import _b64

QK_ENCODING = "i12-vector"
CAUSAL = "causal"  # a layer's `visible` where each query sees itself and the keys before it (`pack_visible`)
QK_CODE_MAX = 2047  # symmetric 12-bit codes: -2047..2047 (-2048 unused, so code * scale is symmetric)
# Added to the rounding bound the q/k page states: the model computes its weights in float32 from
# float32 vectors, and the page's softmax in float64; they differ by ~1e-7 even without rounding.
FLOAT32_SLACK = 1e-5


def quantise_vectors(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes int16 [..., D], scale float32 [...]): each vector along the last axis as code * scale.

    The scale is the float32 nearest max|v| / 2047 and the codes are rounded from it, so every
    component is within scale / 2 of its value (a rounded-down scale leaves |v| / scale at most
    a float32 ulp over 2047, which still rounds to 2047).
    """
    top = np.abs(vectors.astype(np.float64)).max(axis=-1)
    scale = (top / QK_CODE_MAX).astype(np.float32)
    safe = np.where(scale > 0, scale, 1).astype(np.float64)
    codes = np.rint(vectors.astype(np.float64) / safe[..., None])
    return np.clip(codes, -QK_CODE_MAX, QK_CODE_MAX).astype(np.int16), scale


def dequantise_vectors(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The browser's decoding of `quantise_vectors`, in float64."""
    return codes.astype(np.float64) * scale.astype(np.float64)[..., None]


def qk_score_bound(q_codes: np.ndarray, q_scale: np.ndarray, k_codes: np.ndarray, k_scale: np.ndarray,
                   scaling: float, term_scale: np.ndarray | None = None) -> np.ndarray:
    """[..., Tq, Tk]: how far the score of the float vectors (and terms) can be from that of the decoded ones.

    scaling * (|q^|_1 e_k + |k^|_1 e_q + D e_q e_k) with e = scale / 2 (see the module docstring), plus,
    with `term_scale` [..., N, Tq] (the score terms' row scales), sum_n term_scale[n, q] / 2: each term is
    added to the score as it is, so its rounding adds to the score's as it is.
    """
    q_err, k_err = q_scale.astype(np.float64) / 2, k_scale.astype(np.float64) / 2
    q_l1 = np.abs(dequantise_vectors(q_codes, q_scale)).sum(axis=-1)
    k_l1 = np.abs(dequantise_vectors(k_codes, k_scale)).sum(axis=-1)
    dim = q_codes.shape[-1]
    bound = abs(scaling) * (q_l1[..., :, None] * k_err[..., None, :] + k_l1[..., None, :] * q_err[..., :, None]
                            + dim * q_err[..., :, None] * k_err[..., None, :])
    if term_scale is None:
        return bound
    return bound + (term_scale.astype(np.float64) / 2).sum(axis=-2)[..., None]


def masked_softmax(scores: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
    """softmax over the last axis of the keys that are `visible` (broadcast to `scores`), 0 on the others.

    Why not -inf scores alone: a row whose keys are all masked would give 0/0; here it gives zeros
    (the page does the same, views-core.js softmax), and no model masks a query's own key anyway.
    """
    if visible is not None:
        scores = np.where(visible, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = weights.sum(axis=-1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


def decoded_softmax(q_codes: np.ndarray, q_scale: np.ndarray, k_codes: np.ndarray, k_scale: np.ndarray,
                    scaling: float, terms: np.ndarray | None = None,
                    visible: np.ndarray | None = None) -> np.ndarray:
    """softmax(scaling * q^ . k^ + sum of the terms) over the visible keys [..., Tq, Tk], as the query/key
    page computes it: `terms` are the decoded score terms [..., N, Tq, Tk] (`dequantise_vectors` of
    the stored ones), `visible` bool broadcast to [..., Tq, Tk]; either may be None (BERT: neither)."""
    scores = np.einsum("...qd,...kd->...qk", dequantise_vectors(q_codes, q_scale),
                       dequantise_vectors(k_codes, k_scale)) * scaling
    if terms is not None:
        scores = scores + terms.sum(axis=-3)
    if visible is None:  # the original arithmetic, to the bit
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)
    return masked_softmax(scores, visible)


def pack12(codes: np.ndarray) -> np.ndarray:
    """Codes in -2047..2047, an even number of them, as 12-bit pairs in three bytes (uint8 [3/2 * size]).

    With u = code + 2048: bytes u0 & 255, (u0 >> 8) | (u1 & 15) << 4, u1 >> 4 (views-core.js unpack12).
    """
    values = (codes.reshape(-1, 2).astype(np.int32) + 2048).astype(np.uint16)
    first, second = values[:, 0], values[:, 1]
    out = np.stack([first & 255, (first >> 8) | ((second & 15) << 4), second >> 4], axis=-1)
    return out.astype(np.uint8).reshape(-1)


def unpack12(packed: np.ndarray) -> np.ndarray:
    """Inverse of `pack12`: int16 codes."""
    triples = packed.reshape(-1, 3).astype(np.int32)
    first = triples[:, 0] | ((triples[:, 1] & 15) << 8)
    second = (triples[:, 1] >> 4) | (triples[:, 2] << 4)
    return (np.stack([first, second], axis=-1).reshape(-1) - 2048).astype(np.int16)


def _packed12_bytes(count: int) -> int:
    """Bytes of `count` 12-bit codes packed by `pack12`, an odd count with one 0 code appended."""
    return 3 * ((count + 1) // 2)


# Per head of a q/k layer, in order: (name, bytes per head, decoded dtype). "codes" holds the
# head's q codes then its k codes ([T * D] each) as 12-bit pairs; the rest are little-endian.
# Without `weights` (a payload that carries the attention already, `combined_payload`) the model's
# weights (floor, scale, attention) are left out. With `terms` (N score terms, see the module
# docstring) the block ends with their 12-bit codes [N * T * T] and row scales [N * T].
def _qk_fields(n: int, dim: int, weights: bool = True, terms: int = 0) -> list[tuple[str, int, str]]:
    fields = [("codes", 3 * n * dim, "packed"), ("q_scale", 4 * n, "<f4"), ("k_scale", 4 * n, "<f4"),
              ("floor", 4 * n, "<f4"), ("scale", 4 * n, "<f4"), ("attention", n * n, "u1")]
    fields = fields if weights else fields[:3]
    if terms:
        fields += [("term_codes", _packed12_bytes(terms * n * n), "packed"), ("term_scale", 4 * terms * n, "<f4")]
    return fields


def _pack12_rows(codes: np.ndarray) -> np.ndarray:
    """`pack12` of each row of codes [..., C] (uint8 [..., 3 ceil(C / 2)]), odd rows padded with one 0 code."""
    if codes.shape[-1] % 2:
        codes = np.concatenate([codes, np.zeros((*codes.shape[:-1], 1), dtype=codes.dtype)], axis=-1)
    return pack12(codes).reshape(*codes.shape[:-1], -1)


def _qk_layers(q_codes: np.ndarray, q_scale: np.ndarray, k_codes: np.ndarray, k_scale: np.ndarray,
               attention: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
               terms: tuple[np.ndarray, np.ndarray] | None = None) -> list[str]:
    """One base64 string per layer: each head's block (`_qk_fields`), heads in order; without the
    model's weights when `attention` is None; with the score terms' (codes [L, H, N, T, T], row scales
    [L, H, N, T]) from `quantise_vectors` at the end when given."""
    layers, heads = q_codes.shape[:2]

    def flat(array: np.ndarray, dtype: str) -> np.ndarray:
        return np.ascontiguousarray(array, dtype=dtype).view(np.uint8).reshape(layers, heads, -1)

    both = np.concatenate([q_codes.reshape(layers, heads, -1), k_codes.reshape(layers, heads, -1)], axis=-1)
    parts = [pack12(both).reshape(layers, heads, -1), flat(q_scale, "<f4"), flat(k_scale, "<f4")]
    if attention is not None:
        codes, floor, scale = attention
        parts += [flat(floor, "<f4"), flat(scale, "<f4"), flat(codes, "u1")]
    if terms is not None:
        term_codes, term_scale = terms
        parts += [_pack12_rows(term_codes.reshape(layers, heads, -1)), flat(term_scale, "<f4")]
    blocks = np.concatenate(parts, axis=-1)
    return [_b64(blocks[layer].tobytes()) for layer in range(layers)]


def decode_qk_layer(text: str, heads: int, n: int, dim: int, weights: bool = True,
                    terms: int = 0) -> dict[str, np.ndarray]:
    """Inverse of one layer of `_qk_layers` (for tests and checks): codes and scales per head; with
    `terms` (the payload's len(terms)) also term_codes [H, N, T, T] and term_scale [H, N, T]."""
    raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8).reshape(heads, -1)
    if raw.shape[1] != sum(size for _, size, _ in _qk_fields(n, dim, weights, terms)):
        raise ValueError(f"query/key layer of {raw.shape[1]} bytes per head does not match its fields")
    out, offset = {}, 0
    for name, size, dtype in _qk_fields(n, dim, weights, terms):
        part = np.ascontiguousarray(raw[:, offset:offset + size])
        out[name] = unpack12(part).reshape(heads, -1) if dtype == "packed" else part.view(dtype)
        offset += size
    codes = out.pop("codes").reshape(heads, 2, n, dim)
    out["q_codes"], out["k_codes"] = codes[:, 0], codes[:, 1]
    if weights:
        out["attention"] = out["attention"].reshape(heads, n, n)
    if terms:
        out["term_codes"] = out["term_codes"][:, :terms * n * n].reshape(heads, terms, n, n)
        out["term_scale"] = out["term_scale"].reshape(heads, terms, n)
    return out


def pack_visible(visible: np.ndarray) -> list[str | None]:
    """The payload's `visible` of bool [L, T, T]: per layer None where every key is visible, CAUSAL where each query
    sees itself and the keys before it (a decoder's mask: T * T bits would be 2 MB a layer at 4,096 tokens), else
    base64 of its T * T bits, query-major, little-endian bit order (views-core.js decodeVisible)."""
    causal = np.tril(np.ones(visible.shape[-2:], dtype=bool)) if visible.ndim == 3 else None
    return [None if layer.all() else CAUSAL if np.array_equal(layer, causal)
            else _b64(np.packbits(layer.reshape(-1), bitorder="little").tobytes()) for layer in visible]


def visible_bytes(visible: np.ndarray) -> int:
    """The bytes of base64 `pack_visible` writes for bool [L, T, T] (its layers other than None and CAUSAL), counted
    without packing: what a page's masks add to the site, asked before it is written (views.qk_bytes)."""
    n = visible.shape[-1]
    causal = np.tril(np.ones((n, n), dtype=bool))
    packed = sum(1 for layer in visible if not layer.all() and not np.array_equal(layer, causal))
    return packed * 4 * math.ceil(math.ceil(n * n / 8) / 3)


def decode_visible(text: str | None, n: int) -> np.ndarray:
    """Inverse of one layer of `pack_visible`: bool [T, T] (all True for None)."""
    if text is None:
        return np.ones((n, n), dtype=bool)
    if text == CAUSAL:
        return np.tril(np.ones((n, n), dtype=bool))
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8), bitorder="little")
    return bits[:n * n].astype(bool).reshape(n, n)


def qk_check(decoded: np.ndarray, model_decoded: np.ndarray, score_bound: np.ndarray,
             visible: np.ndarray | None = None) -> dict[str, float]:
    """What the query/key page says about its two columns: the largest difference between the softmax
    of the decoded vectors and the model's decoded weights over the example, and the largest the
    rounding of both allows (half the row's largest score bound, plus 0.5/255, plus float32 slack),
    each rounded up to 4 decimals. With `visible` (broadcast to the scores) a row's bound is over its
    visible keys only: the others' scores do not enter the softmax, and both sides' weights there are 0
    (the model's within the 0.5/255 of its encoding)."""
    bound = score_bound if visible is None else np.where(visible, score_bound, 0.0)
    rounding = 0.5 * bound.max(axis=-1) + 0.5 / 255 + FLOAT32_SLACK

    def up(value: float) -> float:  # rounded up to the 4 decimals the page prints, so it stays a bound
        return math.ceil(value * 1e4) / 1e4

    return {"difference": up(float(np.abs(decoded - model_decoded).max())), "rounding": up(float(rounding.max()))}
