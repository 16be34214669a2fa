"""Data files beside a page: what a site's views load when asked, so that a page carries its first view only.

A 6 x 12 model's 19-token example holds 26,000 attention weights and as many contributions: ~107 KB of
the page inline, all parsed before the page shows anything, though the first view (the head view at
layer 0, weights: views-widget.js defaultState) draws one layer's weights. A 512-token example holds 18.9M
weights, 25 MB. So a site's example page (`example_html`) always splits its payload (`split_views`):

- short examples (data up to VIEWS_INLINE_LIMIT): layer 0's weights stay inline, each head's chunk with
  its own rows' floor and scale (`inline`); the other layers go to one file per layer (l<L>.js) and the
  contributions to one file per layer of their own (c-l<L>.js), so the model view loads a handful of files;
- long examples (over the limit): nothing inline; one file per (layer, head), l<L>h<H>.js and c-l<L>h<H>.js,
  since their first view draws one head and each head is ~0.35 MB at 512 tokens.

Each chunk, inline or in a file, is one head packed as views.PACKED_ATTENTION (codes, floor, scale) or
views.PACKED_CONTRIBUTIONS (codes, floor, scale, total): a page shown as weights loads no contribution
file, and no head's rows travel before it is drawn. The query/key page keeps its data inline below
QK_INLINE_LIMIT and in one file per layer above it (`split_qk`).

The files are plain scripts, added by the views as <script src> elements (fetch is blocked from file://),
each line one call:

    window.reportgenViews.deliver("example-7", "l0h3", "<base64>");

a per-layer file holding one line per head. The page key comes from the example's number and the chunk
name from layer and head numbers, so no user text reaches a file name or a file; the rest is base64. The
payload lists the files with their relative URLs (`files`: key, urls by file name, `per`: "layer" where a
file holds a layer's chunks, bytes of the largest file), which views-files.js DataFiles loads, each once.

`read_page_payload` (and `join_views`) put a split payload back together, equal to the unsplit one: what
tests and checks read the numbers of a built page with. Notebooks and `reportgen view` keep their payloads
inline (views.views_html); so does an encoder-decoder's `groups` (its decoder and cross entries).
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from reportgen.site import views

# Data (base64 characters of the rows' codes: attention and contributions) above which an example is long:
# its page keeps nothing inline and has one data file per head instead of one per layer. A 64-token example
# on a 6x12 model carries ~0.45 MB of attention (as much again of contributions), a 512-token one 25 MB.
VIEWS_INLINE_LIMIT = 1_000_000
# The same for the query/key page, whose first view should stay under ~150 KB: the seed pair's
# 19 tokens carry ~0.24 MB, of which one layer (what the first view draws) is a sixth.
QK_INLINE_LIMIT = 100_000
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_NAME = re.compile(r"[a-z0-9-]+")


def data_script(key: str, chunk: str, text: str) -> str:
    """One line of a data file (one chunk); refuses anything but our own names and base64."""
    if not (_NAME.fullmatch(key) and _NAME.fullmatch(chunk) and _BASE64.fullmatch(text)):
        raise ValueError(f"data file {key}/{chunk}: names must be [a-z0-9-] and the data base64")
    return f'window.reportgenViews.deliver("{key}","{chunk}","{text}");\n'


def read_data_script(content: str) -> tuple[str, str, str]:
    """(key, chunk, base64) of a data file's content of one line (tests, checks)."""
    match = re.fullmatch(r'window\.reportgenViews\.deliver\(("[a-z0-9-]+"),("[a-z0-9-]+"),("[A-Za-z0-9+/=]*")\);\n',
                         content)
    if not match:
        raise ValueError("not a reportgen data file")
    key, chunk, text = (json.loads(group) for group in match.groups())
    return key, chunk, text


def read_data_scripts(content: str) -> list[tuple[str, str, str]]:
    """(key, chunk, base64) of each call in a data file's content, a per-layer file holding several."""
    lines = content.splitlines(keepends=True)
    if not lines:
        raise ValueError("not a reportgen data file")
    return [read_data_script(line) for line in lines]


def _file_of(chunk: str, per_layer: bool) -> str:
    """The data file (without .js) that holds `chunk`: its layer's file (l3h5 -> l3, c-l3h5 -> c-l3) or its own."""
    return re.sub(r"h\d+$", "", chunk) if per_layer else chunk


Sink = Callable[[str, str], object]  # sink(path, content): a data file, handed over as soon as it is complete


def _to_files(container: dict, chunks: Iterable[tuple[str, str]], key: str, folder: str,
              per_layer: bool, sink: Sink) -> None:
    """Hands `chunks` ((name, base64) in order) to `sink` as files, each as soon as it is complete (a file is a
    layer's consecutive chunks, or one chunk), and lists them in container["files"]; nothing where there are
    no chunks. One file's text at a time: a long example's data (hundreds of MB) is never all in memory."""
    urls, largest = {}, 0
    for name, group in itertools.groupby(chunks, key=lambda item: _file_of(item[0], per_layer)):
        content = "".join(data_script(key, chunk, text) for chunk, text in group)
        urls[name] = f"{folder}/{name}.js"
        largest = max(largest, len(content))
        sink(urls[name], content)
    if not urls:
        return
    container["files"] = {"key": key, "urls": urls, "bytes": largest}
    if per_layer:
        container["files"]["per"] = "layer"


def _moved(payload: dict, container: dict, field: str, key: str, folder: str, names: list[str],
           sink: Sink) -> dict:
    """Moves the base64 list container[field] into files named after `names`, handed to `sink`: the payload."""
    texts = container.pop(field)
    _to_files(container, zip(names, texts, strict=True), key, folder, per_layer=False, sink=sink)
    return payload


def _b64_bytes(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=np.uint8)


def _row_fields(packed: str) -> tuple[str, ...]:
    """The float32 row fields after a packed chunk's codes: ("floor", "scale"[, "total"])."""
    if packed not in (views.PACKED_ATTENTION, views.PACKED_CONTRIBUTIONS):
        raise ValueError(f"unknown packing: {packed}")
    return tuple(packed.split(",")[1:])


def pack_heads(encoded: dict) -> list[str]:
    """One base64 text per (layer, head) of views.encode_attention's (or encode_contributions') output: the
    head's codes, then its rows' floor, scale (and total) as little-endian float32 (views.PACKED_ATTENTION,
    views.PACKED_CONTRIBUTIONS)."""
    return list(_packed_heads(encoded))


def _packed_heads(encoded: dict) -> Iterator[str]:
    """`pack_heads`, a head at a time: a compressed encoding's chunk is the whole packed head deflated
    (views.deflate), rows and all."""
    layers, heads, n, _ = encoded["shape"]
    fields = ("floor", "scale", "total") if "total" in encoded else ("floor", "scale")
    rows = [_b64_bytes(encoded[field]).reshape(layers * heads, 4 * n) for field in fields]
    compressed = encoded.get("compressed") == views.COMPRESSION
    for index, text in enumerate(encoded["q"]):
        block = b"".join([views.chunk_codes(encoded, text), *(row[index].tobytes() for row in rows)])
        yield base64.b64encode(views.deflate(block) if compressed else block).decode("ascii")


def unpack_heads(texts: list[str], shape: list[int], packed: str, compressed: str | None = None) -> dict:
    """Inverse of `pack_heads`: the inline form (encoding, shape, q, floor, scale[, total]) from the per-head texts,
    their codes deflated again where they came `compressed`."""
    layers, heads, n, keys = shape
    fields = _row_fields(packed)
    if compressed not in (None, views.COMPRESSION):
        raise ValueError(f"unknown compression: {compressed}")
    inflate = zlib.decompress if compressed else bytes
    blocks = np.stack([np.frombuffer(inflate(base64.b64decode(text)), dtype=np.uint8) for text in texts])
    if blocks.shape != (layers * heads, n * keys + 4 * n * len(fields)):
        raise ValueError(f"packed chunks of {blocks.shape} bytes do not fit the shape {list(shape)}")
    parts = np.split(blocks, [n * keys + 4 * n * at for at in range(len(fields))], axis=1)

    def text(part: np.ndarray, deflate: bool = False) -> str:
        data = np.ascontiguousarray(part).tobytes()
        return base64.b64encode(views.deflate(data) if deflate else data).decode("ascii")

    out = {"encoding": views.ENCODING, "shape": list(shape)}
    if compressed:
        out["compressed"] = compressed
    out["q"] = [text(row, bool(compressed)) for row in parts[0]]
    out.update((field, text(part)) for field, part in zip(fields, parts[1:], strict=True))
    return out


def pack_contributions(encoded: dict) -> list[str]:
    """`pack_heads` of views.encode_contributions' output (views.PACKED_CONTRIBUTIONS)."""
    return pack_heads(encoded)


def unpack_contributions(texts: list[str], shape: list[int], compressed: str | None = None) -> dict:
    """Inverse of `pack_contributions`: the inline form (q, floor, scale, total) from the per-head texts."""
    return unpack_heads(texts, shape, views.PACKED_CONTRIBUTIONS, compressed)


def _head_names(prefix: str, shape: list[int]) -> list[str]:
    return [f"{prefix}l{layer}h{head}" for layer in range(shape[0]) for head in range(shape[1])]


def _split_part(encoded: dict, prefix: str, key: str, folder: str, per_layer: bool,
                inline_layers: int, sink: Sink) -> dict:
    """One attention-encoded block packed per head: its first `inline_layers` layers inline (`inline`),
    the rest in files (`files`) handed to `sink` as they are packed."""
    packed = views.PACKED_CONTRIBUTIONS if "total" in encoded else views.PACKED_ATTENTION
    part = {"encoding": encoded["encoding"], "shape": list(encoded["shape"]), "packed": packed}
    if "compressed" in encoded:
        part["compressed"] = encoded["compressed"]
    chunks = zip(_head_names(prefix, encoded["shape"]), _packed_heads(encoded), strict=True)
    inline_count = inline_layers * encoded["shape"][1]
    if inline_count:
        part["inline"] = dict(itertools.islice(chunks, inline_count))
    _to_files(part, chunks, key, folder, per_layer, sink)
    return part


def split_views(payload: dict, key: str, folder: str, per_layer: bool = False,
                sink: Sink | None = None) -> tuple[dict, dict[str, str]]:
    """An example page's payload with its attention and contributions (if any) packed per head (`pack_heads`)
    and moved to files: with `per_layer` (a short example) one file per layer, l<L> and c-l<L>, layer 0's
    weights staying inline for the first view; else one file per (layer, head), l<L>h<H> and c-l<L>h<H>,
    nothing inline. An encoder-decoder's `groups` stay as they are. Returns (payload, {path: content}), or
    with a `sink`, hands each file to it as soon as it is made and returns (payload, {})."""
    files: dict[str, str] = {}
    write = sink or files.__setitem__
    payload = copy.deepcopy(payload)
    payload["attention"] = _split_part(payload["attention"], "", key, folder, per_layer,
                                       inline_layers=1 if per_layer else 0, sink=write)
    contributions = payload.get("contributions")
    if contributions is not None and contributions.get("encoding") == views.ENCODING:
        payload["contributions"] = _split_part(contributions, "c-", key, folder, per_layer, inline_layers=0,
                                               sink=write)
    return payload, files


def split_qk(payload: dict, key: str, folder: str, sink: Sink | None = None) -> tuple[dict, dict[str, str]]:
    """A query/key page's payload with its data in one file per layer, named qk-l<L> (and `sink` as for
    `split_views`)."""
    files: dict[str, str] = {}
    payload = copy.deepcopy(payload)
    names = [f"qk-l{layer}" for layer in range(payload["shape"][0])]
    return _moved(payload, payload, "layers", key, folder, names, sink or files.__setitem__), files


def _file_chunks(spec: dict, read: Callable[[str], str]) -> dict[str, str]:
    """Every chunk the files of a `files` spec deliver, read with read(url) -> the file's content."""
    chunks = {}
    for url in spec["urls"].values():
        for key, chunk, text in read_data_scripts(read(url)):
            if key != spec["key"]:
                raise ValueError(f"{url} delivers to {key}, not {spec['key']}")
            chunks[chunk] = text
    return chunks


def _joined_part(part: dict, prefix: str, read: Callable[[str], str]) -> dict:
    chunks = dict(part.get("inline", {}))
    if "files" in part:
        chunks.update(_file_chunks(part["files"], read))
    texts = [chunks[name] for name in _head_names(prefix, part["shape"])]
    if "packed" in part:
        return unpack_heads(texts, part["shape"], part["packed"], part.get("compressed"))
    joined = {name: value for name, value in part.items() if name not in ("files", "inline")}
    return {"encoding": joined.pop("encoding"), "shape": joined.pop("shape"), "q": texts, **joined}


def join_views(payload: dict, read: Callable[[str], str]) -> dict:
    """Inverse of `split_views` and `split_qk` (a payload that was not split comes back as it is): the payload
    with every chunk back inline, read(url) giving a data file's content. Equal to the unsplit payload."""
    payload = copy.deepcopy(payload)
    if payload.get("kind") == "qk":
        if "files" in payload:
            chunks = _file_chunks(payload.pop("files"), read)
            payload["layers"] = [chunks[f"qk-l{layer}"] for layer in range(payload["shape"][0])]
        if "files" in payload.get("attention", {}):  # a long example's weights, in its example page's files
            payload["attention"] = _joined_part(payload["attention"], "", read)
        return payload
    for field, prefix in (("attention", ""), ("contributions", "c-")):
        part = payload.get(field)
        if part is not None and ("files" in part or "inline" in part):
            payload[field] = _joined_part(part, prefix, read)
    return payload


_PAYLOAD = re.compile(r'<script type="application/json" class="rgv-data">(.*?)</script>', re.S)


def read_page_payload(html_path: Path) -> dict:
    """The full payload of a page's (first) views, as the site split it: its inline part joined with its data
    files beside the page (`join_views`); equal to the payload before `example_html` split it."""
    html_path = Path(html_path)
    match = _PAYLOAD.search(html_path.read_text(encoding="utf-8"))
    if not match:
        raise ValueError(f"{html_path} holds no views payload")
    return join_views(json.loads(match.group(1)),
                      lambda url: (html_path.parent / url).read_text(encoding="ascii"))


def _inline_size(payload: dict) -> int:
    if payload["kind"] == "qk":
        return sum(len(text) for text in payload["layers"])
    parts = [payload["attention"], payload.get("contributions") or {"q": []}]
    return sum(len(text) for part in parts for text in part.get("q", []))


def per_head(payload: dict) -> bool:
    """Whether an example page stores its attention a file per head, nothing inline (a long example's): then its
    query/key page can read the model's weights from those files (`example_pages`)."""
    return _inline_size(payload) > VIEWS_INLINE_LIMIT


def example_html(docs: Path, example_id: int, payload: dict, qk: bool = False, qk_href: str | None = None) -> str:
    """The views' HTML of example `example_id`'s page (or its query/key page with `qk`), writing its data
    files into docs/example-<id>-data/: always for the example page (`split_views`, per layer up to
    VIEWS_INLINE_LIMIT, per head over it), for the query/key page over QK_INLINE_LIMIT. `qk_href`: see views_html."""
    if qk:
        return _qk_html(docs, example_id, payload)
    folder, key = f"example-{int(example_id)}-data", f"example-{int(example_id)}"
    payload, _ = split_views(payload, key, folder, not per_head(payload), _writer(docs))
    return views.views_html(payload, qk_href)


def example_pages(docs: Path, example_id: int, payload: dict, qk_payload: dict | None = None,
                  qk_href: str | None = None) -> tuple[str, str | None]:
    """The views' HTML of an example's page and of its query/key page (None without `qk_payload`), as
    `example_html` writes them. A query/key payload without the model's weights (views.qk_payload(weights=False):
    a long example's) reads them from the example page's files, which hold them per head, so that the site
    stores them once."""
    folder, key = f"example-{int(example_id)}-data", f"example-{int(example_id)}"
    split, _ = split_views(payload, key, folder, not per_head(payload), _writer(docs))
    page = views.views_html(split, qk_href)
    if qk_payload is None:
        return page, None
    if qk_payload.get("weights") == "attention" and "attention" not in qk_payload:
        if "inline" in split["attention"] or "files" not in split["attention"]:
            raise ValueError(f"example {example_id}: a query/key page without weights needs its example's "
                             "per-head files")
        qk_payload = {**qk_payload, "attention": split["attention"]}
    return page, _qk_html(docs, example_id, qk_payload)


def _qk_html(docs: Path, example_id: int, payload: dict) -> str:
    """A query/key page's views, its layers inline up to QK_INLINE_LIMIT, else in files (`split_qk`)."""
    if _inline_size(payload) > QK_INLINE_LIMIT:
        payload, _ = split_qk(payload, f"example-{int(example_id)}-qk", f"example-{int(example_id)}-data",
                              _writer(docs))
    return views.qk_html(payload)


def _writer(docs: Path) -> Sink:
    """A sink that writes each data file under `docs`."""
    def write(path: str, content: str) -> None:
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(content, encoding="ascii")

    return write
