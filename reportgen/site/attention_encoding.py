"""The 8-bit encoding of attention weights and contributions in the views' payloads (reportgen.site.views).

The pages are static and opened from file://, where `fetch` is blocked, so every example page carries
its own attention (reportgen.site.views builds the payload); this module is how the weights in it are
written, and read back for the tests and checks.

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

Long rows (more than LONG_ROW keys: a prompt of hundreds or thousands of tokens, issue 46) are coded at a step of
at least COARSE_SCALE (0.5/255, so a weight is still within 0.25/255 of its code, and within 0.5/255 after the
row sum's rebalancing), not at (max - floor) / 255: a row of 1,000 weights near 0.001 would otherwise spread its
tiny differences over all 256 codes, which no compressor shrinks. At that step most of a long row's weights sit on
code 0 above the row's floor, so each head's codes are deflated (`compressed`: "deflate", zlib's format, which
browsers inflate natively with DecompressionStream): 1 MB of codes a head at 1,024 tokens becomes a few KB to a
few hundred KB. Rows of up to LONG_ROW keys are coded as before, byte for byte.

Rows may be of any length: an encoder-decoder's cross-attention is [L, H, T, S] (T decoder tokens over
S source tokens), `shape` then [L, H, T, S] and each row S codes (reportgen.site.views `seq2seq_groups`).

Contributions (Kobayashi et al. 2020; reportgen.model.value_norms), where the run has value norms:
`contributions` holds the per-row shares of ||A[i, j] f(x_j)|| (rows sum to 1) in the same
encoding, plus `total`, the per-row totals sum_j ||A[i, j] f(x_j)|| as little-endian float32
[L*H*T], base64, so the page can show magnitudes: ||A[i, j] f(x_j)|| = share[i, j] * total[i]
(within total[i] * 0.5/255). `decode_attention` decodes the shares; `decode_contributions` both.
A site's example page splits its payload (reportgen.site.view_files): there each head's chunk carries its own
codes, floor and scale (PACKED_ATTENTION), and its totals too for contributions (PACKED_CONTRIBUTIONS), since
the first view (weights, layer 0) needs none of the other heads' rows.

A single-file view carries the contributions as each key's value norm instead (`encode_norms`, encoding
"norms-f32"), from which the page computes them with the decoded weights.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable

import numpy as np

from reportgen.runs import StoredAttention

ENCODING = "u8-row-affine"
NORMS_ENCODING = "norms-f32"
# A packed chunk's bytes, per head (reportgen.site.view_files): codes uint8 [T*S], then floor and scale (float32
# [T] each), and for contributions each row's total (float32 [T]) after them.
PACKED_ATTENTION = "codes,floor,scale"
PACKED_CONTRIBUTIONS = "codes,floor,scale,total"
MAX_FLOOR = 0.5 / 255  # the largest floor keeps weights below it within the error bound
FLOOR_STEPS = 12
ROW_SUM_RETRY = 0.001
TOP_CODES = (254, 253, 252, 250, 248, 245, 241, 236, 230)
# The same bound as a float32 that does not exceed it, since the browser reads float32 floors (compared as Python
# floats: NumPy 2 would compare a float32 with a Python float in float32, where they are equal).
_FLOOR_CAP = (np.float32(MAX_FLOOR) if float(np.float32(MAX_FLOOR)) <= MAX_FLOOR
              else np.nextafter(np.float32(MAX_FLOOR), np.float32(0)))
# Rows of more keys than this are long: coded at a step of at least COARSE_SCALE and deflated (module docstring).
LONG_ROW = 256
COARSE_SCALE = _FLOOR_CAP
COMPRESSION = "deflate"


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


def _scale_for(maxima: np.ndarray, floor: np.ndarray, top: np.ndarray | int = 255,
               least: float = 0.0) -> np.ndarray:
    """(max - floor) / top as float32, rounded down so scale / 2 never exceeds 0.5/255 by a float32 ulp, and at
    least `least` (COARSE_SCALE for long rows: the row's maximum then gets a code below `top`).

    `top` is the code the row's maximum gets: 255 normally; a little less gives the
    rounding another pattern (see `quantise_rows`), which is allowed while scale <= 1/255.
    """
    exact = (maxima - floor.astype(np.float64)) / top
    scale = exact.astype(np.float32)
    too_big = scale.astype(np.float64) > exact
    scale[too_big] = np.nextafter(scale[too_big], np.float32(0))
    return np.maximum(scale, np.float32(least))


def _choose_floor(rows: np.ndarray, top: np.ndarray | int = 255,
                  least: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (floor, scale) with the floor set so the decoded row sums to ~1 where the floor can do it."""
    maxima = rows.max(axis=-1)
    floor = _first_floor(rows, maxima) if least else np.zeros(rows.shape[:-1], dtype=np.float32)
    for _ in range(FLOOR_STEPS):
        scale = _scale_for(maxima, floor, top, least)
        codes = _quantise(rows, floor, scale)
        deficit = 1.0 - _decode(codes, floor, scale).sum(axis=-1)
        # Only weights on code 0 move with the floor; the others decode to ~their value whatever it is.
        step = deficit / np.maximum((codes == 0).sum(axis=-1), 1)
        if np.abs(step).max() < 1e-9:  # converged (usually after 2-3 steps)
            break
        floor = np.clip(floor.astype(np.float64) + step, 0.0, float(_FLOOR_CAP)).astype(np.float32)
        floor = np.minimum(floor, maxima.astype(np.float32))  # a floor above the max would waste the codes
    return floor, _scale_for(maxima, floor, top, least)


def _first_floor(rows: np.ndarray, maxima: np.ndarray) -> np.ndarray:
    """A long row's first floor: the mean of its positive weights (within the cap). Most of a long row's weights
    are near it, so they start on code 0 above the floor and the floor's steps keep them there, instead of the
    sum being made up by mixing codes 0 and 1 all along the row (a bit a weight that deflate cannot shrink). The
    median does as well and costs 15% more."""
    positive = (rows > 0).sum(axis=-1)
    mean = np.where(positive > 0, rows.sum(axis=-1) / np.maximum(positive, 1), 0.0)
    return np.minimum(np.minimum(mean, float(_FLOOR_CAP)), maxima).astype(np.float32)


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


def _encode_block(rows: np.ndarray, top: np.ndarray | int = 255,
                  least: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(codes, floor, scale, |row sum - 1|) for a block of float64 rows, at a step of at least `least`."""
    floor, scale = _choose_floor(rows, top, least)
    codes = _rebalance(rows, _quantise(rows, floor, scale), floor, scale)
    return codes, floor, scale, np.abs(_decode(codes, floor, scale).sum(axis=-1) - 1.0)


def _encode_with_retries(rows: np.ndarray, least: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, floor, scale) of float64 rows, re-encoding rows whose sum is off with their maximum on lower codes."""
    codes, floor, scale, err = _encode_block(rows, least=least)
    retry = np.nonzero(err > ROW_SUM_RETRY)[0]
    if retry.size == 0:
        return codes, floor, scale
    sub = rows[retry]
    lowest = np.ceil(255 * sub.max(axis=-1) - 1e-9)  # scale must stay <= 1/255
    for top in TOP_CODES:
        codes2, floor2, scale2, err2 = _encode_block(sub, np.maximum(top, lowest), least)
        better = err2 < err[retry]
        pick = retry[better]
        codes[pick], floor[pick], scale[pick], err[pick] = codes2[better], floor2[better], scale2[better], err2[better]
    return codes, floor, scale


BLOCK_CELLS = 4096 * 1024  # weights encoded at once (_quantise_blocks)


def quantise_rows(attention: np.ndarray, block: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes uint8 [..., T], floor float32 [...], scale float32 [...]) for rows along the last axis.

    Rows whose sum is still off by more than ROW_SUM_RETRY after floor and rebalancing
    (short rows with one large weight: few codes may move) are encoded again with the
    maximum on a lower code (TOP_CODES), and the best sum wins. Works through `block`
    rows at a time to bound memory at 512 tokens (18.9M weights on a 6x12 model).
    """
    shape = attention.shape
    count = int(np.prod(shape[:-1]))
    codes, floor, scale = _quantise_blocks(_rows_of(attention), count, shape[-1], block)
    return codes.reshape(shape), floor.reshape(shape[:-1]), scale.reshape(shape[:-1])


def _rows_of(attention) -> Callable[[int, int], np.ndarray]:
    """rows(start, stop): rows start..stop-1 of attention [..., S] as [stop - start, S], from an array or from a
    StoredAttention's file (a long input's, never read whole)."""
    if isinstance(attention, StoredAttention):
        return attention.rows
    flat = attention.reshape(-1, attention.shape[-1])
    return lambda start, stop: flat[start:stop]


def _quantise_blocks(rows: Callable[[int, int], np.ndarray], count: int, width: int,
                     block: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`quantise_rows` of `count` rows of `width` that `rows(start, stop)` gives a block at a time (the encoding
    of a row depends on its block: the floor's steps run until the whole block converges). Rows longer than
    LONG_ROW get a step of at least COARSE_SCALE. A block holds at most BLOCK_CELLS weights (rows of more than
    1,024 keys come fewer at a time), so its float64 temporaries stay near 32 MB each whatever the length."""
    least = float(COARSE_SCALE) if width > LONG_ROW else 0.0
    block = max(1, min(block, BLOCK_CELLS // max(1, width)))
    codes = np.empty((count, width), dtype=np.uint8)
    floor = np.empty(count, dtype=np.float32)
    scale = np.empty(count, dtype=np.float32)
    for start in range(0, count, block):
        part = slice(start, min(start + block, count))
        codes[part], floor[part], scale[part] = _encode_with_retries(rows(part.start, part.stop).astype(np.float64),
                                                                     least)
    return codes, floor, scale


def encode_attention(attention: np.ndarray) -> dict:
    """Compact JSON-able form of attention [L, H, T, T] (see the module docstring), or of a rectangular
    [L, H, T, S] (an encoder-decoder's cross-attention: T decoder tokens over S source tokens): rows are
    encoded alike, whatever their length."""
    return _encoded(*quantise_rows(attention))


def _encoded(codes: np.ndarray, floor: np.ndarray, scale: np.ndarray) -> dict:
    """The encoding's JSON-able form of codes [L, H, T, S] with each row's floor and scale."""
    layers, heads, _, width = codes.shape
    compressed = width > LONG_ROW
    encoded = {"encoding": ENCODING, "shape": list(codes.shape)}
    if compressed:
        encoded["compressed"] = COMPRESSION
    encoded.update(
        q=[_b64(deflate(codes[layer, head].tobytes()) if compressed else codes[layer, head].tobytes())
           for layer in range(layers) for head in range(heads)],
        floor=_b64(floor.astype("<f4").tobytes()),
        scale=_b64(scale.astype("<f4").tobytes()),
    )
    return encoded


def deflate(data: bytes) -> bytes:
    """`data` in zlib's format (what DecompressionStream("deflate") reads), run-length matching only (Z_RLE): a
    long row's codes are runs and a few small values, which Huffman codes well; on 1 MB of them that is 5 ms and
    within 15% of zlib's best level, which takes 1.5 s. The same bytes always give the same output, so a split
    payload joins back equal (reportgen.site.view_files)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    return packer.compress(data) + packer.flush()


def chunk_codes(encoded: dict, text: str) -> bytes:
    """A chunk's codes (base64 `text` of `encoded`'s q), inflated where the encoding says it is compressed."""
    data = base64.b64decode(text)
    return zlib.decompress(data) if encoded.get("compressed") == COMPRESSION else data


def head_decoder(encoded: dict) -> Callable[[int, int], np.ndarray]:
    """decode(layer, head): one head of `encoded` decoded as the browser does it (float64 [T, S]), the others left
    coded: what checks of a long input read, a head at a time."""
    layers, heads, n, keys = encoded["shape"]
    floor = np.frombuffer(base64.b64decode(encoded["floor"]), dtype="<f4").reshape(layers, heads, n)
    scale = np.frombuffer(base64.b64decode(encoded["scale"]), dtype="<f4").reshape(layers, heads, n)

    def decode(layer: int, head: int) -> np.ndarray:
        codes = np.frombuffer(chunk_codes(encoded, encoded["q"][layer * heads + head]), dtype=np.uint8)
        return _decode(codes.reshape(n, keys), floor[layer, head], scale[layer, head])

    return decode


def decode_attention(encoded: dict) -> np.ndarray:
    """Inverse of `encode_attention`, as the browser does it (float64); for tests and checks."""
    layers, heads, n, keys = encoded["shape"]
    codes = np.stack([np.frombuffer(chunk_codes(encoded, text), dtype=np.uint8) for text in encoded["q"]])
    floor = np.frombuffer(base64.b64decode(encoded["floor"]), dtype="<f4")
    scale = np.frombuffer(base64.b64decode(encoded["scale"]), dtype="<f4")
    codes = codes.reshape(layers, heads, n, keys)
    return _decode(codes, floor.reshape(layers, heads, n), scale.reshape(layers, heads, n))


def encode_contributions(attention: np.ndarray, norms: np.ndarray) -> dict:
    """Contributions of attention [L, H, T, T] with value norms [L, H, T]: the per-row shares in the
    attention encoding, plus `total` (see the module docstring). The shares are made a block of rows at a time
    as they are encoded: never the whole model's at once (2.4 GB in float32 and float64 at 1,024 tokens on
    12 x 12 heads)."""
    from reportgen.runs import row_shares

    shape = attention.shape
    rows, per_map = _rows_of(attention), norms.reshape(-1, shape[-1])
    count = int(np.prod(shape[:-1]))
    totals = np.empty(count, dtype=np.float32)

    def block(start: int, stop: int) -> np.ndarray:
        share, totals[start:stop] = row_shares(rows(start, stop), per_map[np.arange(start, stop) // shape[-2]])
        return share

    codes, floor, scale = _quantise_blocks(block, count, shape[-1])
    encoded = _encoded(codes.reshape(shape), floor.reshape(shape[:-1]), scale.reshape(shape[:-1]))
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
