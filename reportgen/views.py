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
"""

from __future__ import annotations

import base64
import html
import math
from typing import TYPE_CHECKING

import numpy as np

from reportgen.htmlsafe import script_json

if TYPE_CHECKING:  # the model-running side imports torch; the pages only need its plain data
    from reportgen.attention import ExampleRun

ENCODING = "u8-row-affine"
# The q/k page carries float32 query and key vectors for every layer and head
# (L*H*T*head_dim*8 bytes, ~1.2 MB at 64 tokens on a 6x12 model), so it is only
# built for examples up to this many tokens.
QK_MAX_TOKENS = 64
# The views' classic scripts under assets/javascripts, in load order (also the `extra_javascript`
# order in mkdocs.yml, where charts.js comes right after the core, whose copy-link it uses).
VIEW_SCRIPTS = ("views-core.js", "views-widget.js", "views-head.js", "views-model.js", "views-qk.js",
                "views-start.js")
PAYLOAD_VERSION = 1
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
    """Compact JSON-able form of attention [L, H, T, T] (see the module docstring)."""
    layers, heads, n, _ = attention.shape
    codes, floor, scale = quantise_rows(attention)
    return {
        "encoding": ENCODING,
        "shape": [layers, heads, n, n],
        "q": [_b64(codes[layer, head].tobytes()) for layer in range(layers) for head in range(heads)],
        "floor": _b64(floor.astype("<f4").tobytes()),
        "scale": _b64(scale.astype("<f4").tobytes()),
    }


def decode_attention(encoded: dict) -> np.ndarray:
    """Inverse of `encode_attention`, as the browser does it (float64); for tests and checks."""
    layers, heads, n, _ = encoded["shape"]
    codes = np.stack([np.frombuffer(base64.b64decode(s), dtype=np.uint8) for s in encoded["q"]])
    floor = np.frombuffer(base64.b64decode(encoded["floor"]), dtype="<f4")
    scale = np.frombuffer(base64.b64decode(encoded["scale"]), dtype="<f4")
    codes = codes.reshape(layers, heads, n, n)
    return _decode(codes, floor.reshape(layers, heads, n), scale.reshape(layers, heads, n))


def _encode_f32(array: np.ndarray) -> str:
    return _b64(np.ascontiguousarray(array, dtype="<f4").tobytes())


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


def example_payload(run: ExampleRun) -> dict:
    """Everything the head view and the model view need for one example, as plain JSON-able data."""
    payload = _example_fields(run)
    payload["kind"] = "views"
    payload["attention"] = encode_attention(run.attention)
    return payload


def qk_payload(run: ExampleRun, *, max_tokens: int = QK_MAX_TOKENS) -> dict:
    """Data for the query/key page: float32 q and k per (layer, head), plus the model's attention to compare.

    The vectors come from `run.extras` (filled by `reportgen.attention.run_example(..., keep_qk=True)`),
    with the factor on q . k where the model gives one (else 1/sqrt(head_dim)).
    Raises ValueError beyond `max_tokens`, which keeps these pages bounded.
    """
    queries, keys = run.extras["queries"], run.extras["keys"]
    if run.n_tokens > max_tokens:
        raise ValueError(f"q/k view is built for examples of at most {max_tokens} tokens; this one has {run.n_tokens}")
    layers, heads, n, dim = queries.shape
    if keys.shape != queries.shape or n != run.n_tokens or run.attention.shape[:2] != (layers, heads):
        raise ValueError(f"queries {queries.shape}, keys {keys.shape} and attention {run.attention.shape} disagree")
    scaling = float(run.extras["scaling"]) if "scaling" in run.extras else 1.0 / math.sqrt(dim)
    payload = _example_fields(run)
    payload.update(
        kind="qk",
        head_dim=int(dim),
        scaling=float(scaling),
        queries=[_encode_f32(queries[layer, head]) for layer in range(layers) for head in range(heads)],
        keys=[_encode_f32(keys[layer, head]) for layer in range(layers) for head in range(heads)],
        attention=encode_attention(run.attention),
    )
    return payload


def _snippet(kind: str, payload: dict) -> str:
    # One line per element and no blank lines: Markdown keeps a raw HTML block intact
    # only until the first blank line.
    label = html.escape(payload.get("name") or payload.get("text") or "example", quote=True)
    return (
        f'<div class="rgv" data-rgv="{kind}" aria-label="attention views: {label}">'
        f'<script type="application/json" class="rgv-data">{script_json(payload)}</script>'
        '<noscript>The attention views need JavaScript.</noscript></div>'
    )


def views_html(payload: dict) -> str:
    """HTML for an example page: head view + model view, drawn by the views' scripts from the embedded payload."""
    return _snippet("views", payload)


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
