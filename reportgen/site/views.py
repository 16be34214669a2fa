"""Plain-data payloads and HTML snippets for the interactive attention views.

The pages are static and opened from file://, where `fetch` is blocked, so every
example page carries its own attention inside a <script type="application/json">
element that the views' scripts (site_src/assets/javascripts/views-*.js) decode.
This module builds those payloads from a run (`example_payload`, `qk_payload`, `combined_payload`,
`seq2seq_groups`) and the HTML around them. How their arrays are written, and the error bounds that
rounding keeps, is in two modules beside it:

- reportgen.site.attention_encoding: the attention and contributions, 8 bits per weight with one
  floor and scale per row ("u8-row-affine"), and value norms ("norms-f32");
- reportgen.site.qk_encoding: the query/key page's vectors and score terms, 12 bits per component
  ("i12-vector"), with the bound on the scores and softmax the page prints.

Their names are re-exported here (see `__all__`), where the site, the tests and the benchmarks use them.
A site's example pages keep most heads in data files beside the page instead (reportgen.site.view_files).

An encoder-decoder's payload (`seq2seq_groups`; its cross-attention is [L, H, T, S], T decoder tokens over
S source tokens, encoded like any other) adds `target` and `groups`, one entry per attention group in
GROUP_NAMES order:

    {"name": "encoder" | "decoder" | "cross", "queries": [tokens], "keys": [tokens],
     "query_special": [0/1], "key_special": [0/1], "causal": true (decoder only: also at the top level of
     a decoder's payload),
     "attention": <u8-row-affine>, "contributions": <norms-f32 of the keys>}

where the encoder's entry has no attention or contributions of its own: the payload's top level holds them
(with the source as `tokens`), so a page carries them once and starts valid on the encoder.

The query/key page's payload (`qk_payload`) adds, for models whose scores are more than scaling * q . k
or that mask keys, `terms` (their names and column titles, QK_TERMS) and `visible`
(reportgen.site.qk_encoding gives the format).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from reportgen.site.attention_encoding import (
    COARSE_SCALE,
    COMPRESSION,
    ENCODING,
    FLOOR_STEPS,
    LONG_ROW,
    MAX_FLOOR,
    NORMS_ENCODING,
    PACKED_ATTENTION,
    PACKED_CONTRIBUTIONS,
    ROW_SUM_RETRY,
    TOP_CODES,
    _decode,
    chunk_codes,
    decode_attention,
    decode_contributions,
    decode_norm_contributions,
    deflate,
    encode_attention,
    encode_contributions,
    encode_norms,
    head_decoder,
    quantise_rows,
)
from reportgen.site.htmlsafe import script_json
from reportgen.site.qk_encoding import (
    CAUSAL,
    FLOAT32_SLACK,
    QK_CODE_MAX,
    QK_ENCODING,
    _qk_fields,
    _qk_layers,
    decode_qk_layer,
    decode_visible,
    decoded_softmax,
    dequantise_vectors,
    masked_softmax,
    pack12,
    pack_visible,
    qk_check,
    qk_score_bound,
    quantise_vectors,
    unpack12,
    visible_bytes,
)
from reportgen.site.token_text import shown_tokens

if TYPE_CHECKING:  # the model-running side imports torch; the pages only need its plain data
    from reportgen.runs import ExampleRun, Seq2SeqRun

# What the site, the tests and the benchmarks import from here: this module's own names, and the
# encodings' (reportgen.site.attention_encoding, reportgen.site.qk_encoding).
__all__ = [
    "FILES_SCRIPT", "GROUP_NAMES", "HEATMAP_SCRIPT", "HEATMAP_STYLE", "PAYLOAD_VERSION", "QK_LONG_SCRIPT", "QK_PAGE",
    "QK_TERMS", "VIEW_SCRIPTS", "combined_payload", "example_payload", "group_attention", "group_payload", "has_qk",
    "is_causal", "qk_masks", "needs_heatmaps", "needs_qk_pages", "qk_html", "qk_payload", "qk_term_info",
    "seq2seq_groups",
    "standalone_page", "views_html", "ENCODING", "FLOOR_STEPS", "MAX_FLOOR", "NORMS_ENCODING", "PACKED_ATTENTION",
    "PACKED_CONTRIBUTIONS", "ROW_SUM_RETRY", "TOP_CODES", "decode_attention", "decode_contributions",
    "decode_norm_contributions", "encode_attention", "encode_contributions", "encode_norms", "quantise_rows",
    "COARSE_SCALE", "COMPRESSION", "LONG_ROW", "chunk_codes", "deflate", "FLOAT32_SLACK", "QK_CODE_MAX",
    "QK_ENCODING", "decode_qk_layer", "decode_visible", "decoded_softmax", "dequantise_vectors", "masked_softmax",
    "pack12", "pack_visible", "qk_check", "qk_score_bound", "quantise_vectors", "unpack12",
]

# The q/k table lists the keys of one query, with two vector strips per key: up to this many keys it lists them
# all; past it, a page of this many at a time (views-qk.js QK_PAGE; views-qk-long.js: the keys the query weighs
# most, or a range).
QK_PAGE = 64
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
VIEW_SCRIPTS = ("views-core.js", "views-files.js", "views-widget.js", "views-head.js", "views-model.js",
                "views-qk.js", "views-qk-long.js", "views-heatmap.js", "views-start.js")
FILES_SCRIPT = "views-files.js"  # a site's data files beside its pages: a single file, all inline, never needs it
HEATMAP_SCRIPT = "views-heatmap.js"  # needed by inputs of more than LONG_ROW tokens only (`needs_heatmaps`)
QK_LONG_SCRIPT = "views-qk-long.js"  # needed by query/key views of more than QK_PAGE tokens only (`needs_qk_pages`)
HEATMAP_STYLE = "views-heatmap.css"  # its style, likewise
PAYLOAD_VERSION = 1


def needs_qk_pages(payload: dict) -> bool:
    """Whether the query/key view of `payload` (a combined one's "qk") lists its keys a page at a time
    (views-qk-long.js): more than QK_PAGE tokens."""
    qk = payload.get("qk", payload)
    return "shape" in qk and qk["shape"][2] > QK_PAGE


def needs_heatmaps(payload: dict) -> bool:
    """Whether the views of `payload` draw heatmaps (views-core.js isLong): more than LONG_ROW query or key tokens
    in some group of it."""
    lengths = [len(payload.get("tokens", ()))]
    lengths += [len(group.get(side, ())) for group in payload.get("groups", ()) for side in ("queries", "keys")]
    return max(lengths) > LONG_ROW


def _example_fields(run: ExampleRun) -> dict:
    spec = run.spec
    return {
        "version": PAYLOAD_VERSION,
        "name": spec.name,
        "text": spec.text,
        "pair": spec.pair,
        "tokens": shown_tokens(run.tokens),  # "Ġthe" as "␣the" (token_text)
        "segments": [int(s) for s in run.segment_ids],
        "special": [int(bool(s)) for s in run.special],
        "truncated": bool(run.truncated),
    }


def _views_fields(run: ExampleRun) -> dict:
    """The example's fields and its attention: what every payload of the head and model views holds; `causal`
    where every weight above the diagonal is 0 (a decoder's), so that the views draw nothing there (the floor
    would decode those weights to up to 0.5/255, and a long input's heatmap would tint its upper triangle)."""
    fields = {**_example_fields(run), "kind": "views", "attention": encode_attention(run.attention)}
    if is_causal(run.attention):
        fields["causal"] = True
    return fields


def is_causal(attention: np.ndarray) -> bool:
    """Whether every query of attention [L, H, T, T] gives its later keys weight 0 (a layer at a time)."""
    above = np.triu(np.ones(attention.shape[-2:], dtype=bool), k=1)
    return attention.shape[-1] > 1 and all(not layer[:, above].any() for layer in attention)


def example_payload(run: ExampleRun) -> dict:
    """Everything the head view and the model view need for one example, as plain JSON-able data:
    attention, and contributions where the run has value norms (the views' weights | contributions switch)."""
    payload = _views_fields(run)
    if run.value_norms is not None:  # None: synthetic runs, or a model whose heads were not located
        payload["contributions"] = encode_contributions(run.attention, run.value_norms)
    return payload


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


def qk_payload(run: ExampleRun, *, weights: bool = True, attention: dict | None = None) -> dict:
    """Data for the query/key page: 12-bit q and k per vector and the model's 8-bit attention, per layer.

    The vectors come from `run.extras` (filled by `reportgen.model.run.run_example(..., keep_qk=True)`),
    with the factor on q . k where the model gives one (else 1/sqrt(head_dim)), and the score terms and
    masked keys where it gives them (`terms` and `visible`, see reportgen.site.qk_encoding).
    Without `weights` the layers leave the model's weights out: the page reads them from the views'
    encoding `attention` (`encode_attention` of the run's; a single file's own, `combined_payload`, or a long
    example's page's data files, reportgen.site.view_files), so they are stored once. The check compares the
    page's softmax with the weights it shows, a head at a time: at 1,024 tokens the example's [L, H, T, T]
    float64 would be 1.2 GB.
    """
    queries, keys = run.extras["queries"], run.extras["keys"]
    layers, heads, n, dim = queries.shape
    if keys.shape != queries.shape or n != run.n_tokens or run.attention.shape[:2] != (layers, heads):
        raise ValueError(f"queries {queries.shape}, keys {keys.shape} and attention {run.attention.shape} disagree")
    scaling = float(run.extras["scaling"]) if "scaling" in run.extras else 1.0 / math.sqrt(dim)
    names, terms, visible = _qk_extras(run, (layers, heads, n))
    q, k = quantise_vectors(queries), quantise_vectors(keys)
    term_codes = quantise_vectors(terms) if terms is not None else None  # one scale per (term, query) row
    rows = quantise_rows(run.attention) if weights else None
    if rows is not None:
        model = lambda layer, head: _decode(*(part[layer, head] for part in rows))  # noqa: E731
    else:
        model = head_decoder(attention if attention is not None else encode_attention(run.attention))
    payload = _example_fields(run)
    payload.update(kind="qk", encoding=QK_ENCODING, shape=[layers, heads, n, int(dim)], head_dim=int(dim),
                   scaling=scaling, check=_check_by_head(q, k, scaling, term_codes, visible, model),
                   layers=_qk_layers(*q, *k, rows, term_codes))
    if names:
        payload["terms"] = qk_term_info(names)
    if visible is not None:
        payload["visible"] = pack_visible(visible)
    if not weights:
        payload["weights"] = "attention"
    return payload


def _check_by_head(q: tuple[np.ndarray, np.ndarray], k: tuple[np.ndarray, np.ndarray], scaling: float,
                   terms: tuple[np.ndarray, np.ndarray] | None, visible: np.ndarray | None,
                   model: Callable[[int, int], np.ndarray]) -> dict[str, float]:
    """`qk_check` over every head, one head's [T, T] at a time: the largest difference and bound of all (each is
    rounded up, so the largest of the heads' is that of the example)."""
    (q_codes, q_scale), (k_codes, k_scale) = q, k
    check = {"difference": 0.0, "rounding": 0.0}
    for layer, head in np.ndindex(*q_codes.shape[:2]):
        at = (layer, head)
        decoded_terms = None if terms is None else dequantise_vectors(terms[0][at], terms[1][at])
        mask = None if visible is None else visible[layer]
        decoded = decoded_softmax(q_codes[at], q_scale[at], k_codes[at], k_scale[at], scaling, decoded_terms, mask)
        bound = qk_score_bound(q_codes[at], q_scale[at], k_codes[at], k_scale[at], scaling,
                               None if terms is None else terms[1][at])
        head_check = qk_check(decoded, model(layer, head), bound, visible=mask)
        check = {name: max(check[name], head_check[name]) for name in check}
    return check


def qk_bytes(run: ExampleRun) -> int:
    """What the run's query/key page adds to the site beside its example's own data, in bytes of base64: its q and
    k codes and scales, its score terms and its masks (`qk_payload`'s layers without the weights, and `visible`);
    0 for a run without vectors. The config's views.query_key_mb bounds it (`without_qk_over`)."""
    if not has_qk(run):
        return 0
    layers, heads, n, dim = run.extras["queries"].shape
    terms = np.shape(run.extras["qk_terms"])[0] if "qk_terms" in run.extras else 0
    layer = heads * sum(field[1] for field in _qk_fields(n, dim, weights=False, terms=terms))
    visible = run.extras.get("qk_visible")
    masks = visible_bytes(np.asarray(visible, dtype=bool)) if visible is not None else 0
    return layers * 4 * math.ceil(layer / 3) + masks


def without_qk_over(run: ExampleRun, budget: float) -> ExampleRun:
    """`run` without its query/key vectors where its query/key page would add more than `budget` bytes to the site
    (`qk_bytes`; config views.query_key_mb), their size kept in extras["qk_bytes"], so that the example's page or
    the single-file view's note can say why it has none. Changes `run` in place."""
    size = qk_bytes(run)
    if size > budget:
        run.extras.clear()
        run.extras["qk_bytes"] = np.array(size, dtype=np.int64)
    return run


def qk_masks(payload: dict) -> list[str]:
    """Which masks the query/key payload's `visible` holds, for its page's words: "causal" where a layer masks the keys
    after each query (a decoder's), "causal-window" where it masks those and some before them too (a sliding window
    on a causal mask, Mistral's), "window" where it masks keys on both sides (ModernBERT's local layers); sorted, []
    for a model that masks nothing."""
    n = payload["shape"][2]
    later = ~np.tril(np.ones((n, n), dtype=bool))
    kinds = set()
    for text in payload.get("visible", []):
        if text == CAUSAL:
            kinds.add("causal")
        elif text is not None:
            hidden = ~decode_visible(text, n)
            kinds.add("window" if not hidden[later].all() else
                      "causal-window" if hidden[~later].any() else "causal")
    return sorted(kinds)


def has_qk(run: ExampleRun) -> bool:
    """Whether the run kept what the query/key view needs (reportgen.pipeline.model_stage drops it from a run
    whose page would exceed the config's views.query_key_mb)."""
    return "queries" in run.extras


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
        qk = qk_payload(run, weights=False, attention=payload["attention"])
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
    group = {"name": name, "queries": shown_tokens(queries[0]), "keys": shown_tokens(keys[0]),
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
    extra = f' data-qk-href="{html.escape(qk_href, quote=True)}"' if qk_href else ""
    # what a long input needs besides (overrides/main.html loads views-heatmap.js and views-qk-long.js only there)
    extra += ' data-rgv-long="1"' if needs_heatmaps(payload) else ""
    extra += ' data-rgv-qk-long="1"' if needs_qk_pages(payload) else ""
    return (
        f'<div class="rgv" data-rgv="{kind}"{extra} aria-label="attention views: {label}">'
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
        f'<link rel="stylesheet" href="{base}/stylesheets/{HEATMAP_STYLE}">'
        f"</head><body>\n{body_html}\n"
        f"{scripts}</body></html>\n"
    )
