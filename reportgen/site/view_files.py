"""Data files beside a page, for views too large to carry their data inline.

A 512-token example holds 18.9M attention weights: 25 MB of 8-bit rows inline, all parsed before
the page shows anything, though the head view of a long input starts with one head. So above
a size limit the data moves into script files next to the page, one per (layer, head) for the
example page and one per layer for the query/key page, and the views load the ones they draw.
They are plain scripts, added by the views as <script src> elements (fetch is blocked from
file://), each one call:

    window.reportgenViews.deliver("example-7", "l0h3", "<base64>");

Contributions (reportgen.site.views, the views' weights | contributions switch) go to files of their own,
c-l<L>h<H>, each carrying the head's codes, floor, scale and per-row totals (views.PACKED_CONTRIBUTIONS),
so a page shown as weights loads none of them.

The page key comes from the example's number and the chunk name from layer and head numbers,
so no user text reaches a file name or a file; the rest is base64. The payload lists the
chunks with their relative URLs (`files`), which views-core.js DataFiles loads.

Below the limits the page stays one self-contained file, as ordinary examples are.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path

import numpy as np

from reportgen.site import views

# Inline data (base64 characters of the rows' codes: attention and contributions) above which the
# example page's data goes to files: a 64-token example on a 6x12 model carries ~0.45 MB of
# attention (as much again of contributions), a 512-token one 25 MB.
VIEWS_INLINE_LIMIT = 1_000_000
# The same for the query/key page, whose first view should stay under ~150 KB: the seed pair's
# 19 tokens carry ~0.24 MB, of which one layer (what the first view draws) is a sixth.
QK_INLINE_LIMIT = 100_000
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_NAME = re.compile(r"[a-z0-9-]+")


def data_script(key: str, chunk: str, text: str) -> str:
    """The content of one data file; refuses anything but our own names and base64."""
    if not (_NAME.fullmatch(key) and _NAME.fullmatch(chunk) and _BASE64.fullmatch(text)):
        raise ValueError(f"data file {key}/{chunk}: names must be [a-z0-9-] and the data base64")
    return f'window.reportgenViews.deliver("{key}","{chunk}","{text}");\n'


def read_data_script(content: str) -> tuple[str, str, str]:
    """(key, chunk, base64) of a data file's content (tests, checks)."""
    match = re.fullmatch(r'window\.reportgenViews\.deliver\(("[a-z0-9-]+"),("[a-z0-9-]+"),("[A-Za-z0-9+/=]*")\);\n',
                         content)
    if not match:
        raise ValueError("not a reportgen data file")
    key, chunk, text = (json.loads(group) for group in match.groups())
    return key, chunk, text


def _moved(payload: dict, container: dict, field: str, key: str, folder: str,
           names: list[str]) -> tuple[dict, dict[str, str]]:
    """Moves the base64 list container[field] into files named after `names`: (payload, {path: content})."""
    texts = container.pop(field)
    files = {f"{folder}/{name}.js": data_script(key, name, text) for name, text in zip(names, texts, strict=True)}
    container["files"] = {"key": key, "urls": {name: f"{folder}/{name}.js" for name in names},
                          "bytes": max(len(content) for content in files.values())}
    return payload, files


def _b64_bytes(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=np.uint8)


def pack_contributions(encoded: dict) -> list[str]:
    """One base64 text per (layer, head) of views.encode_contributions' output: the head's codes, then its
    rows' floor, scale and total as little-endian float32 (views.PACKED_CONTRIBUTIONS)."""
    layers, heads, n, _ = encoded["shape"]
    codes = np.stack([_b64_bytes(text) for text in encoded["q"]]).reshape(layers * heads, n * n)
    rows = [_b64_bytes(encoded[field]).reshape(layers * heads, 4 * n) for field in ("floor", "scale", "total")]
    return [base64.b64encode(block.tobytes()).decode("ascii") for block in np.concatenate([codes, *rows], axis=1)]


def unpack_contributions(texts: list[str], shape: list[int]) -> dict:
    """Inverse of `pack_contributions`: the inline form (q, floor, scale, total) from the per-head texts."""
    layers, heads, n, _ = shape
    blocks = np.stack([_b64_bytes(text) for text in texts])
    parts = np.split(blocks, [n * n, n * n + 4 * n, n * n + 8 * n], axis=1)

    def text(part: np.ndarray) -> str:
        return base64.b64encode(np.ascontiguousarray(part).tobytes()).decode("ascii")

    return {"encoding": views.ENCODING, "shape": list(shape), "q": [text(row) for row in parts[0]],
            "floor": text(parts[1]), "scale": text(parts[2]), "total": text(parts[3])}


def _head_names(prefix: str, shape: list[int]) -> list[str]:
    return [f"{prefix}l{layer}h{head}" for layer in range(shape[0]) for head in range(shape[1])]


def split_views(payload: dict, key: str, folder: str) -> tuple[dict, dict[str, str]]:
    """An example page's payload with its attention rows in one file per (layer, head), named l<L>h<H>,
    and its contributions (if any) in files of their own, c-l<L>h<H>."""
    payload = copy.deepcopy(payload)
    attention = payload["attention"]
    payload, files = _moved(payload, attention, "q", key, folder, _head_names("", attention["shape"]))
    contributions = payload.get("contributions")
    if contributions is not None:
        texts = pack_contributions(contributions)
        for field in ("floor", "scale", "total"):
            del contributions[field]
        contributions.update(q=texts, packed=views.PACKED_CONTRIBUTIONS)
        payload, more = _moved(payload, contributions, "q", key, folder, _head_names("c-", contributions["shape"]))
        files.update(more)
    return payload, files


def split_qk(payload: dict, key: str, folder: str) -> tuple[dict, dict[str, str]]:
    """A query/key page's payload with its data in one file per layer, named qk-l<L>."""
    payload = copy.deepcopy(payload)
    names = [f"qk-l{layer}" for layer in range(payload["shape"][0])]
    return _moved(payload, payload, "layers", key, folder, names)


def _inline_size(payload: dict) -> int:
    if payload["kind"] == "qk":
        return sum(len(text) for text in payload["layers"])
    parts = [payload["attention"], payload.get("contributions") or {"q": []}]
    return sum(len(text) for part in parts for text in part["q"])


def example_html(docs: Path, example_id: int, payload: dict, qk: bool = False, qk_href: str | None = None) -> str:
    """The views' HTML of example `example_id`'s page (or its query/key page with `qk`), writing its data
    files into docs/example-<id>-data/ when the data is over the inline limit. `qk_href`: see views_html."""
    limit = QK_INLINE_LIMIT if qk else VIEWS_INLINE_LIMIT

    def to_html(payload: dict) -> str:
        return views.qk_html(payload) if qk else views.views_html(payload, qk_href)
    if _inline_size(payload) <= limit:
        return to_html(payload)
    folder = f"example-{int(example_id)}-data"
    key = f"example-{int(example_id)}" + ("-qk" if qk else "")
    payload, files = (split_qk if qk else split_views)(payload, key, folder)
    for path, content in files.items():
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(content, encoding="ascii")
    return to_html(payload)
