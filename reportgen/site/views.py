"""Plain-data payloads and HTML snippets for the interactive attention views.

The pages are static and opened from file://, where `fetch` is blocked, so every
example page carries its own attention inside a <script type="application/json">
element that the views' scripts (site_src/assets/javascripts/views-*.js) decode.
The data must stay small (bertviz writes ~22 bytes per weight; we write ~1.4), so
attention is quantised to 8 bits per weight, one affine scale per row (encoding "u8-row-affine"):

    w[r, k] = floor[r] + q[r, k] * scale[r],   q in 0..255,   scale[r] = (max[r] - floor[r]) / 255

Why a floor: with plain per-row max scaling, a long row (512 keys, 0.9 on [SEP],
~0.0002 on each other key) rounds every small weight to 0 and loses 10% of the
row's mass. A floor b in [0, 0.5/255] that every weight decodes to at least puts
that mass back. The error bound still holds for any such floor: weights in
[floor, max] are off by at most scale/2 <= 0.5/255, weights below the floor by at
most floor <= 0.5/255. The floor is chosen per row by a few vectorised
fixed-point steps so that the decoded row sums to ~1.

Layout: `q` is one base64 string per (layer, head) so the browser decodes only
the heads it draws; `floor` and `scale` are little-endian float32 [L*H*T], base64.
A site's example pages keep most heads in data files beside the page instead (reportgen.site.view_files).

Rows may be of any length: an encoder-decoder's cross-attention is [L, H, T, S] (T decoder tokens over
S source tokens), `shape` then [L, H, T, S] and each row S codes. Its payload (`seq2seq_groups`) adds
`target` and `groups`, one entry per attention group in GROUP_NAMES order:

    {"name": "encoder" | "decoder" | "cross", "queries": [tokens], "keys": [tokens],
     "query_special": [0/1], "key_special": [0/1], "causal": true (decoder only),
     "attention": <this encoding>, "contributions": <norms-f32 of the keys>}

where the encoder's entry has no attention or contributions of its own: the payload's top level holds them
(with the source as `tokens`), so a page carries them once and starts valid on the encoder.

Contributions (Kobayashi et al. 2020; reportgen.model.value_norms), where the run has value norms:
`contributions` holds the per-row shares of ||A[i, j] f(x_j)|| (rows sum to 1) in the same
encoding, plus `total`, the per-row totals sum_j ||A[i, j] f(x_j)|| as little-endian float32
[L*H*T], base64, so the page can show magnitudes: ||A[i, j] f(x_j)|| = share[i, j] * total[i]
(within total[i] * 0.5/255). `decode_attention` decodes the shares; `decode_contributions` both.
A site's example page splits its payload (reportgen.site.view_files): there each head's chunk carries its own
codes, floor and scale (PACKED_ATTENTION), and its totals too for contributions (PACKED_CONTRIBUTIONS), since
the first view (weights, layer 0) needs none of the other heads' rows.

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
[L, T, T], False where the model masks key j for query i (score -inf, weight 0). The payload then has

    terms:   [{"name": "c2p", "label": <column title>, "title": <one sentence>}, ...]   (the extras' order)
    visible: per layer, null where every key is visible, else base64 of the T * T visibility bits,
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
import html
import math
from typing import TYPE_CHECKING

import numpy as np

from reportgen.site.htmlsafe import script_json

if TYPE_CHECKING:  # the model-running side imports torch; the pages only need its plain data
    from reportgen.runs import ExampleRun, Seq2SeqRun

ENCODING = "u8-row-affine"
QK_ENCODING = "i12-vector"
NORMS_ENCODING = "norms-f32"
# The q/k table lists every key of one query, with two vector strips per key: past this
# many tokens it is no longer a table one reads, so longer examples get no q/k page
# (their example page says why, from this number).
QK_MAX_TOKENS = 64
QK_CODE_MAX = 2047  # symmetric 12-bit codes: -2047..2047 (-2048 unused, so code * scale is symmetric)
# Added to the rounding bound the q/k page states: the model computes its weights in float32 from
# float32 vectors, and the page's softmax in float64; they differ by ~1e-7 even without rounding.
FLOAT32_SLACK = 1e-5
# The q/k page's column title and tooltip for each additive score term a run may give
# (extras["qk_term_names"]); a name not listed here is its own column title, with a generic tooltip
# (`qk_term_info`).
QK_TERMS = {
    "c2p": ("c2p", "content to position: the query's content against the key's position relative to the "
                   "query (DeBERTa, He et al. 2021)"),
    "p2c": ("p2c", "position to content: the key's content against the query's position relative to the "
                   "key (DeBERTa, He et al. 2021)"),
    "position": ("position", "relative position bias: this head's learned bias for the distance between the "
                             "query and the key (MPNet, Song et al. 2020)"),
}
# The views' classic scripts under assets/javascripts, in load order (also the `extra_javascript`
# order in mkdocs.yml, where charts.js comes right after the core, whose copy-link it uses).
VIEW_SCRIPTS = ("views-core.js", "views-widget.js", "views-head.js", "views-model.js", "views-qk.js",
                "views-start.js")
PAYLOAD_VERSION = 1
# A packed chunk's bytes, per head (reportgen.site.view_files): codes uint8 [T*S], then floor and scale (float32
# [T] each), and for contributions each row's total (float32 [T]) after them.
PACKED_ATTENTION = "codes,floor,scale"
PACKED_CONTRIBUTIONS = "codes,floor,scale,total"
MAX_FLOOR = 0.5 / 255  # the largest floor keeps weights below it within the error bound
FLOOR_STEPS = 12
ROW_SUM_RETRY = 0.001
TOP_CODES = (254, 253, 252, 250, 248, 245, 241, 236, 230)
# The same bound as a float32 that does not exceed it, since the browser reads float32 floors.
_FLOOR_CAP = (np.float32(MAX_FLOOR) if np.float32(MAX_FLOOR) <= MAX_FLOOR
              else np.nextafter(np.float32(MAX_FLOOR), np.float32(0)))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _quantise(rows: np.ndarray, floor: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Nearest code for every weight given each row's floor and scale (broadcast over the last axis)."""
    safe = np.where(scale > 0, scale, 1.0)
    codes = np.rint((rows - floor[..., None]) / safe[..., None])
    return np.clip(codes, 0, 255).astype(np.uint8)


def _decode(codes: np.ndarray, floor: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The browser's decoding, in float64 from the float32 floor and scale it reads."""
    return floor.astype(np.float64)[..., None] + codes.astype(np.float64) * scale.astype(np.float64)[..., None]


def _scale_for(maxima: np.ndarray, floor: np.ndarray, top: np.ndarray | int = 255) -> np.ndarray:
    """(max - floor) / top as float32, rounded down so scale / 2 never exceeds 0.5/255 by a float32 ulp.

    `top` is the code the row's maximum gets: 255 normally; a little less gives the
    rounding another pattern (see `quantise_rows`), which is allowed while scale <= 1/255.
    """
    exact = (maxima - floor.astype(np.float64)) / top
    scale = exact.astype(np.float32)
    too_big = scale.astype(np.float64) > exact
    scale[too_big] = np.nextafter(scale[too_big], np.float32(0))
    return np.maximum(scale, np.float32(0))


def _choose_floor(rows: np.ndarray, top: np.ndarray | int = 255) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (floor, scale) with the floor set so the decoded row sums to ~1 where the floor can do it."""
    maxima = rows.max(axis=-1)
    floor = np.zeros(rows.shape[:-1], dtype=np.float32)
    for _ in range(FLOOR_STEPS):
        scale = _scale_for(maxima, floor, top)
        codes = _quantise(rows, floor, scale)
        deficit = 1.0 - _decode(codes, floor, scale).sum(axis=-1)
        # Only weights on code 0 move with the floor; the others decode to ~their value whatever it is.
        step = deficit / np.maximum((codes == 0).sum(axis=-1), 1)
        if np.abs(step).max() < 1e-9:  # converged (usually after 2-3 steps)
            break
        floor = np.clip(floor.astype(np.float64) + step, 0.0, float(_FLOOR_CAP)).astype(np.float32)
        floor = np.minimum(floor, maxima.astype(np.float32))  # a floor above the max would waste the codes
    return floor, _scale_for(maxima, floor, top)


def _rebalance(rows: np.ndarray, codes: np.ndarray, floor: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Round some weights the other way (one step) so the row sums to 1 within half a step.

    Nearest rounding leaves up to scale/2 on each weight, and over hundreds of small
    weights that adds up; but when scale < 0.5/255 either neighbouring code is within
    the error bound, so we may move codes by one, smallest resulting error first, as
    long as each moved weight stays within 0.5/255 (MAX_FLOOR).
    """
    safe = np.where(scale > 0, scale, np.inf).astype(np.float64)
    steps = scale.astype(np.float64)[..., None]
    decoded = floor.astype(np.float64)[..., None] + codes * steps
    units = np.rint((1.0 - decoded.sum(axis=-1)) / safe).astype(np.int64)  # + add steps, - remove steps
    todo = np.nonzero(units)[0]
    if todo.size == 0:
        return codes
    wanted, old_codes, old_values, step = rows[todo], codes[todo].astype(np.int64), decoded[todo], steps[todo]
    limit = MAX_FLOOR * (1 - 1e-9)  # margin for float rounding in the comparison below
    up_err = old_values + step - wanted
    down_err = wanted - (old_values - step)
    add = (units[todo] > 0)[:, None]
    cost = np.where(add, np.where((old_codes < 255) & (up_err <= limit), up_err, np.inf),
                    np.where((old_codes > 0) & (down_err <= limit), down_err, np.inf))
    rank = np.argsort(np.argsort(cost, axis=-1, kind="stable"), axis=-1, kind="stable")
    move = (rank < np.abs(units[todo])[:, None]) & np.isfinite(cost)
    codes[todo] = (old_codes + np.where(add, move, -move.astype(np.int64))).astype(np.uint8)
    return codes


def _encode_block(rows: np.ndarray,
                  top: np.ndarray | int = 255) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(codes, floor, scale, |row sum - 1|) for a block of float64 rows."""
    floor, scale = _choose_floor(rows, top)
    codes = _rebalance(rows, _quantise(rows, floor, scale), floor, scale)
    return codes, floor, scale, np.abs(_decode(codes, floor, scale).sum(axis=-1) - 1.0)


def _encode_with_retries(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, floor, scale) of float64 rows, re-encoding rows whose sum is off with their maximum on lower codes."""
    codes, floor, scale, err = _encode_block(rows)
    retry = np.nonzero(err > ROW_SUM_RETRY)[0]
    if retry.size == 0:
        return codes, floor, scale
    sub = rows[retry]
    lowest = np.ceil(255 * sub.max(axis=-1) - 1e-9)  # scale must stay <= 1/255
    for top in TOP_CODES:
        codes2, floor2, scale2, err2 = _encode_block(sub, np.maximum(top, lowest))
        better = err2 < err[retry]
        pick = retry[better]
        codes[pick], floor[pick], scale[pick], err[pick] = codes2[better], floor2[better], scale2[better], err2[better]
    return codes, floor, scale


def quantise_rows(attention: np.ndarray, block: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes uint8 [..., T], floor float32 [...], scale float32 [...]) for rows along the last axis.

    Rows whose sum is still off by more than ROW_SUM_RETRY after floor and rebalancing
    (short rows with one large weight: few codes may move) are encoded again with the
    maximum on a lower code (TOP_CODES), and the best sum wins. Works through `block`
    rows at a time to bound memory at 512 tokens (18.9M weights on a 6x12 model).
    """
    shape = attention.shape
    flat = attention.reshape(-1, shape[-1])
    codes = np.empty(flat.shape, dtype=np.uint8)
    floor = np.empty(flat.shape[0], dtype=np.float32)
    scale = np.empty(flat.shape[0], dtype=np.float32)
    for start in range(0, flat.shape[0], block):
        part = slice(start, start + block)
        codes[part], floor[part], scale[part] = _encode_with_retries(flat[part].astype(np.float64))
    return codes.reshape(shape), floor.reshape(shape[:-1]), scale.reshape(shape[:-1])


def encode_attention(attention: np.ndarray) -> dict:
    """Compact JSON-able form of attention [L, H, T, T] (see the module docstring), or of a rectangular
    [L, H, T, S] (an encoder-decoder's cross-attention: T decoder tokens over S source tokens): rows are
    encoded alike, whatever their length."""
    layers, heads, n, keys = attention.shape
    codes, floor, scale = quantise_rows(attention)
    return {
        "encoding": ENCODING,
        "shape": [layers, heads, n, keys],
        "q": [_b64(codes[layer, head].tobytes()) for layer in range(layers) for head in range(heads)],
        "floor": _b64(floor.astype("<f4").tobytes()),
        "scale": _b64(scale.astype("<f4").tobytes()),
    }


def decode_attention(encoded: dict) -> np.ndarray:
    """Inverse of `encode_attention`, as the browser does it (float64); for tests and checks."""
    layers, heads, n, keys = encoded["shape"]
    codes = np.stack([np.frombuffer(base64.b64decode(s), dtype=np.uint8) for s in encoded["q"]])
    floor = np.frombuffer(base64.b64decode(encoded["floor"]), dtype="<f4")
    scale = np.frombuffer(base64.b64decode(encoded["scale"]), dtype="<f4")
    codes = codes.reshape(layers, heads, n, keys)
    return _decode(codes, floor.reshape(layers, heads, n), scale.reshape(layers, heads, n))


def encode_contributions(attention: np.ndarray, norms: np.ndarray) -> dict:
    """Contributions of attention [L, H, T, T] with value norms [L, H, T]: the per-row shares in the
    attention encoding, plus `total` (see the module docstring)."""
    from reportgen.runs import shares

    share, totals = shares(attention, norms)
    encoded = encode_attention(share)
    encoded["total"] = _b64(totals.astype("<f4").tobytes())
    return encoded


def decode_contributions(encoded: dict) -> tuple[np.ndarray, np.ndarray]:
    """(shares [L, H, T, T] as the browser decodes them, per-row totals [L, H, T] float32) of
    `encode_contributions`' output; for tests and checks."""
    totals = np.frombuffer(base64.b64decode(encoded["total"]), dtype="<f4")
    return decode_attention(encoded), totals.reshape(encoded["shape"][:3])


def encode_norms(norms: np.ndarray) -> dict:
    """Contributions as each key's value norm ||f(x_j)|| [L, H, T] (encoding "norms-f32"), from which the
    page computes them with the decoded weights (views-core.js NormContributions): 4 bytes per token and
    head instead of a second 8-bit matrix, for a page that must be small (a single-file view)."""
    return {"encoding": NORMS_ENCODING, "shape": list(norms.shape), "norms": _b64(norms.astype("<f4").tobytes())}


def decode_norm_contributions(attention: dict, encoded: dict) -> tuple[np.ndarray, np.ndarray]:
    """(shares [L, H, T, T], per-row totals [L, H, T]) as the page computes them from `encode_attention`'s
    and `encode_norms`' output; for tests and checks."""
    from reportgen.runs import shares

    norms = np.frombuffer(base64.b64decode(encoded["norms"]), dtype="<f4").reshape(encoded["shape"])
    share, totals = shares(decode_attention(attention), norms.astype(np.float64))
    return share.astype(np.float64), totals


def _example_fields(run: ExampleRun) -> dict:
    spec = run.spec
    return {
        "version": PAYLOAD_VERSION,
        "name": spec.name,
        "text": spec.text,
        "pair": spec.pair,
        "tokens": [str(t) for t in run.tokens],
        "segments": [int(s) for s in run.segment_ids],
        "special": [int(bool(s)) for s in run.special],
        "truncated": bool(run.truncated),
    }


def _views_fields(run: ExampleRun) -> dict:
    """The example's fields and its attention: what every payload of the head and model views holds."""
    return {**_example_fields(run), "kind": "views", "attention": encode_attention(run.attention)}


def example_payload(run: ExampleRun) -> dict:
    """Everything the head view and the model view need for one example, as plain JSON-able data:
    attention, and contributions where the run has value norms (the views' weights | contributions switch)."""
    payload = _views_fields(run)
    if run.value_norms is not None:  # None: synthetic runs, or a model whose heads were not located
        payload["contributions"] = encode_contributions(run.attention, run.value_norms)
    return payload


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
    """The payload's `visible` of bool [L, T, T]: per layer None where every key is visible, else base64 of
    its T * T bits, query-major, little-endian bit order (views-core.js decodeVisible)."""
    return [None if layer.all() else _b64(np.packbits(layer.reshape(-1), bitorder="little").tobytes())
            for layer in visible]


def decode_visible(text: str | None, n: int) -> np.ndarray:
    """Inverse of one layer of `pack_visible`: bool [T, T] (all True for None)."""
    if text is None:
        return np.ones((n, n), dtype=bool)
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8), bitorder="little")
    return bits[:n * n].astype(bool).reshape(n, n)


def qk_term_info(names: list[str]) -> list[dict[str, str]]:
    """The payload's `terms`: each score term's name, column title and tooltip (QK_TERMS, else generic)."""
    known = {name: QK_TERMS.get(name, (name, f"a term the model adds to each score: {name}")) for name in names}
    return [{"name": name, "label": known[name][0], "title": known[name][1]} for name in names]


def _qk_extras(run: ExampleRun, shape: tuple[int, int, int]) -> tuple[list[str], np.ndarray | None,
                                                                      np.ndarray | None]:
    """(term names, terms [L, H, N, T, T] float32 or None, visible bool [L, T, T] or None) from
    `run.extras`, checked against the (layers, heads, tokens) `shape`. A mask that hides nothing is None
    (the payload then is what it was without one); terms on masked keys are set to 0, since the model's
    filler there (-inf, or the dtype's minimum) would swamp the row's 12-bit scale."""
    layers, heads, n = shape
    visible = run.extras.get("qk_visible")
    if visible is not None:
        visible = np.asarray(visible, dtype=bool)
        if visible.shape != (layers, n, n):
            raise ValueError(f"qk_visible {visible.shape} is not [layers, tokens, tokens] {(layers, n, n)}")
        if visible.all():
            visible = None
    if "qk_terms" not in run.extras:
        return [], None, visible
    terms = np.asarray(run.extras["qk_terms"], dtype=np.float32)
    names = [str(name) for name in np.asarray(run.extras.get("qk_term_names", [])).reshape(-1)]
    if terms.shape[1:] != (layers, heads, n, n) or len(names) != terms.shape[0]:
        raise ValueError(f"qk_terms {terms.shape} and qk_term_names {names} do not fit "
                         f"[N, layers, heads, tokens, tokens] with {(layers, heads, n, n)}")
    if not terms.shape[0]:
        return [], None, visible
    terms = np.moveaxis(terms, 0, 2)  # [L, H, N, T, T]: one head's terms together, as its block stores them
    if visible is not None:
        terms = np.where(visible[:, None, None], terms, np.float32(0))
    if not np.isfinite(terms).all():
        raise ValueError("qk_terms are not finite on keys the model does not mask")
    return names, terms, visible


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


def qk_payload(run: ExampleRun, *, max_tokens: int = QK_MAX_TOKENS, weights: bool = True) -> dict:
    """Data for the query/key page: 12-bit q and k per vector and the model's 8-bit attention, per layer.

    The vectors come from `run.extras` (filled by `reportgen.model.run.run_example(..., keep_qk=True)`),
    with the factor on q . k where the model gives one (else 1/sqrt(head_dim)), and the score terms and
    masked keys where it gives them (`terms` and `visible`, see the module docstring).
    Without `weights` the layers leave the model's weights out (`combined_payload`: the page has them).
    Raises ValueError beyond `max_tokens`, which keeps these pages bounded.
    """
    queries, keys = run.extras["queries"], run.extras["keys"]
    if run.n_tokens > max_tokens:
        raise ValueError(f"q/k view is built for examples of at most {max_tokens} tokens; this one has {run.n_tokens}")
    layers, heads, n, dim = queries.shape
    if keys.shape != queries.shape or n != run.n_tokens or run.attention.shape[:2] != (layers, heads):
        raise ValueError(f"queries {queries.shape}, keys {keys.shape} and attention {run.attention.shape} disagree")
    scaling = float(run.extras["scaling"]) if "scaling" in run.extras else 1.0 / math.sqrt(dim)
    names, terms, visible = _qk_extras(run, (layers, heads, n))
    (q_codes, q_scale), (k_codes, k_scale) = quantise_vectors(queries), quantise_vectors(keys)
    term_codes = quantise_vectors(terms) if terms is not None else None  # one scale per (term, query) row
    mask = visible[:, None] if visible is not None else None  # [L, 1, T, T]: the same for every head
    decoded_terms, term_scale = (None, None) if term_codes is None else (dequantise_vectors(*term_codes),
                                                                         term_codes[1])
    attention = quantise_rows(run.attention)
    check = qk_check(decoded_softmax(q_codes, q_scale, k_codes, k_scale, scaling, decoded_terms, mask),
                     _decode(*attention),
                     qk_score_bound(q_codes, q_scale, k_codes, k_scale, scaling, term_scale), visible=mask)
    payload = _example_fields(run)
    payload.update(kind="qk", encoding=QK_ENCODING, shape=[layers, heads, n, int(dim)], head_dim=int(dim),
                   scaling=scaling, check=check,
                   layers=_qk_layers(q_codes, q_scale, k_codes, k_scale, attention if weights else None, term_codes))
    if names:
        payload["terms"] = qk_term_info(names)
    if visible is not None:
        payload["visible"] = pack_visible(visible)
    if not weights:
        payload["weights"] = "attention"
    return payload


def has_qk(run: ExampleRun) -> bool:
    """Whether the run kept what the query/key view needs, within the tokens it is built for."""
    return "queries" in run.extras and run.n_tokens <= QK_MAX_TOKENS


def combined_payload(run: ExampleRun) -> dict:
    """One input's views and query/key view in one payload, for a page that shows them together
    (reportgen.site.standalone): `example_payload`, with the query/key data under "qk" where the run
    has it, its layers without the model's weights, which the query/key view reads from "attention"
    (the same 8-bit encoding), so a single-file page does not carry them twice; and the contributions as
    value norms (`encode_norms`), which the page multiplies with those weights."""
    payload = _views_fields(run)
    if run.value_norms is not None:
        payload["contributions"] = encode_norms(run.value_norms)
    if has_qk(run):
        qk = qk_payload(run, weights=False)
        payload["qk"] = {key: qk[key] for key in ("encoding", "shape", "head_dim", "scaling", "check", "layers",
                                                  "weights", "terms", "visible") if key in qk}
    return payload


# An encoder-decoder's attention groups, in the order of the views' switch (views-widget.js): the encoder's
# self-attention over the source, the decoder's causal self-attention over its inputs, and the decoder's
# cross-attention over the source.
GROUP_NAMES = ("encoder", "decoder", "cross")


def group_payload(name: str, queries: tuple[list[str], list[bool]], keys: tuple[list[str], list[bool]],
                  attention: np.ndarray | None, norms: np.ndarray | None) -> dict:
    """One entry of an encoder-decoder payload's `groups`: its query tokens (the head view's left column) and
    key tokens (the right column), each with its special flags, the attention [L, H, Q, K] in the 8-bit
    encoding and the contributions as the keys' value norms (`encode_norms`). `attention` None: the
    payload's top-level attention and contributions are this group's (the encoder's, carried once).
    A decoder group says `causal`: its weights above the diagonal are 0, so the views draw nothing there
    (the 8-bit floor would otherwise decode them to up to 0.5/255)."""
    group = {"name": name, "queries": [str(t) for t in queries[0]], "keys": [str(t) for t in keys[0]],
             "query_special": [int(bool(s)) for s in queries[1]], "key_special": [int(bool(s)) for s in keys[1]]}
    if name == "decoder":
        group["causal"] = True
    if attention is None:
        return group
    if attention.shape[2:] != (len(queries[0]), len(keys[0])):
        raise ValueError(f"{name} attention {attention.shape} does not fit {len(queries[0])} queries and "
                         f"{len(keys[0])} keys")
    group["attention"] = encode_attention(attention)
    if norms is not None:
        group["contributions"] = encode_norms(norms)
    return group


def seq2seq_groups(run: Seq2SeqRun, source_special: list[bool], target_special: list[bool]) -> list[dict]:
    """The payload's `groups` of an encoder-decoder run (GROUP_NAMES order), the encoder's attention left to
    the payload's top level (`combined_payload` of the encoder's run), so that the page carries it once."""
    norms = run.value_norms or {}
    source, target = (run.source_tokens, source_special), (run.target_tokens, target_special)
    return [group_payload("encoder", source, source, None, None),
            group_payload("decoder", target, target, run.decoder_attention, norms.get("decoder")),
            group_payload("cross", target, source, run.cross_attention, norms.get("cross"))]


def group_attention(payload: dict, name: str) -> tuple[dict, dict | None]:
    """(attention, contributions or None) of the group `name` of an encoder-decoder payload, where the page
    reads them: the group's own, or the top level's for the encoder; for tests and checks."""
    group = next(group for group in payload["groups"] if group["name"] == name)
    holder = group if "attention" in group else payload
    return holder["attention"], holder.get("contributions")


def _snippet(kind: str, payload: dict, qk_href: str | None = None) -> str:
    # One line per element and no blank lines: Markdown keeps a raw HTML block intact
    # only until the first blank line.
    label = html.escape(payload.get("name") or payload.get("text") or "example", quote=True)
    qk = f' data-qk-href="{html.escape(qk_href, quote=True)}"' if qk_href else ""
    return (
        f'<div class="rgv" data-rgv="{kind}"{qk} aria-label="attention views: {label}">'
        f'<script type="application/json" class="rgv-data">{script_json(payload)}</script>'
        '<noscript>The attention views need JavaScript.</noscript></div>'
    )


def views_html(payload: dict, qk_href: str | None = None) -> str:
    """HTML for an example page: head view + model view, drawn by the views' scripts from the embedded payload.

    `qk_href`: the example's query/key page, if it has one; the toolbar links there with the current state."""
    return _snippet("views", payload, qk_href)


def qk_html(payload: dict) -> str:
    """HTML for an example's query/key page, drawn by the views' scripts from the embedded payload."""
    return _snippet("qk", payload)


def standalone_page(body_html: str, title: str, assets: str = "assets") -> str:
    """A minimal page around snippets, loading the views' scripts and views.css from `assets`.

    For tests and benchmarks, which check the views without building a site.
    """
    base = html.escape(assets.rstrip("/"), quote=True)
    scripts = "".join(f'<script src="{base}/javascripts/{name}"></script>' for name in VIEW_SCRIPTS)
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{base}/stylesheets/views.css">'
        f"</head><body>\n{body_html}\n"
        f"{scripts}</body></html>\n"
    )
