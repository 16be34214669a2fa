"""The "Your sentence" page (config `views.live`): the model's weights and tokenizer as script files beside the
page, so that a reader's browser runs the model itself, from file:// too (a page opened from a file may not
fetch, but it may load <script src>); site_src/assets/javascripts/live-page.js does the rest.

The files, in the site's live/ folder:

    model.js        reportgenLiveSpec({"model": <tensor table>, "tokenizer": <settings>, "bytes": N, ...})
    weights-NNN.js  reportgenLiveChunk(NNN, "<text>"): bytes [NNN * CHUNK_BYTES, (NNN + 1) * CHUNK_BYTES)

A weights file is UTF-16 (little-endian, with a byte order mark, which a browser honours before any charset a
server names) and each character of its string carries 15 bits (`pack_text`): 16 bytes on disk for 15 of
weights, where base64 would take 20. The chunks load in parallel and show progress; CHUNK_BYTES is a multiple of
15 bytes (8 characters), so that every chunk decodes on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from reportgen.report import Example
from reportgen.runs import LiveModel

FOLDER = "live"
PAGE = "your-sentence.md"
CHUNK_BYTES = 3_000_000
TEXT_BASE = 0x3000  # a 15-bit value v is the character TEXT_BASE + v: CJK and Yi letters, never a quote,
# a backslash, a line break or a surrogate
BOM = b"\xff\xfe"
# the page's own scripts, after the views' scripts that every page loads (mkdocs.yml extra_javascript)
SCRIPTS = ("live-tokenizer.js", "live-model.js", "live-page.js")
# What the page says of its numbers' accuracy, per `views.live_weights`: tests/live/ check every head's attention
# against the model's own (torch, float32) within this on TESTED. Issue 33 asks for 0.02; the 6-bit weights that
# keep MiniLM's site under 25 MB measure 0.28 (reportgen/model/live_weights.py has other encodings' figures).
TOLERANCE = {"compact": 0.05, "float16": 0.002}
TESTED = "51 texts of 3 to 512 tokens"


def _script_json(value) -> str:
    """JSON for a script file: ASCII only (a vocabulary holds any character; U+2028 too)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def pack_text(data: bytes) -> bytes:
    """`data` as UTF-16LE characters of 15 bits each (least significant first, zero-padded to whole characters):
    site_src/assets/javascripts/live-model.js textToBytes reads them back."""
    padded = np.frombuffer(data + b"\0" * (-len(data) % 15), dtype=np.uint8)
    bits = np.unpackbits(padded, bitorder="little").reshape(-1, 15).astype(np.uint16)
    values = (bits << np.arange(15, dtype=np.uint16)).sum(axis=1, dtype=np.uint16) + TEXT_BASE
    return values.astype("<u2").tobytes()


def live_files(live: LiveModel) -> dict[str, bytes]:
    """File name (in live/) -> its bytes."""
    chunks = [live.weights[start:start + CHUNK_BYTES] for start in range(0, len(live.weights), CHUNK_BYTES)]
    spec = {"model": live.spec, "tokenizer": live.tokenizer, "bytes": len(live.weights),
            "chunks": len(chunks), "chunk_bytes": CHUNK_BYTES, "max_tokens": live.max_tokens}
    files = {"model.js": f"reportgenLiveSpec({_script_json(spec)});\n".encode("ascii")}
    for index, chunk in enumerate(chunks):
        head, tail = f'reportgenLiveChunk({index},"'.encode("utf-16-le"), '");\n'.encode("utf-16-le")
        files[chunk_name(index)] = BOM + head + pack_text(chunk) + tail
    return files


def chunk_name(index: int) -> str:
    return f"weights-{index:03d}.js"


def write_live_files(docs: Path, live: LiveModel, first: Example) -> dict:
    """Writes live/ under `docs`; returns what the page's template says of it (plain data), the text box
    filled with the first example."""
    folder = docs / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    files = live_files(live)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return {"folder": FOLDER + "/", "chunks": len(files) - 1, "scripts": SCRIPTS,
            "megabytes": sum(map(len, files.values())) / 1e6, "max_tokens": live.max_tokens,
            "text": first.text, "pair": first.pair or "", "tolerance": TOLERANCE[live.weights_format], "tested": TESTED,
            "float16": live.weights_format == "float16"}
