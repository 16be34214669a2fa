"""The "Your sentence" page (config `views.live`): the model's weights and tokenizer as script files beside the
page, so that a reader's browser runs the model itself, from file:// too (a page opened from a file may not
fetch, but it may load <script src>); site_src/assets/javascripts/live-page.js does the rest.

The files, in the site's live/ folder:

    model.js        reportgenLiveSpec({"model": <tensor table>, "tokenizer": <settings>, "bytes": N, ...})
    weights-NNN.js  reportgenLiveChunk(NNN, "<text>"): bytes [NNN * CHUNK_BYTES, (NNN + 1) * CHUNK_BYTES)

A weights file is UTF-16 (little-endian, with a byte order mark, which a browser honours before any charset a
server names) and every three characters of its string carry 47 bits (`pack_text`): 48 bytes on disk for 47 of
weights, where base64 would take 63. The chunks load in parallel and show progress; CHUNK_BYTES is a multiple of
47 bytes (8 groups of three characters), so that every chunk decodes on its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from reportgen.report import Example
from reportgen.runs import LiveModel

FOLDER = "live"
PAGE = "your-sentence.md"
CHUNK_BYTES = 47 * 64_000
# A weights file's characters stand for the digits 0..RADIX-1 of 47-bit groups (RADIX^3 >= 2^47 > (RADIX-1)^3),
# each digit a character from these ranges in turn (first code point, end): never a quote, a backslash, a line
# break (U+2028 and U+2029 are left out too), a surrogate, a noncharacter or the byte order mark.
RADIX = 52_016
DIGIT_RANGES = ((0x1000, 0x2028), (0x202A, 0xD800), (0xE000, 0xFDD0))
BOM = b"\xff\xfe"
# the page's own scripts, after the views' scripts that every page loads (mkdocs.yml extra_javascript)
SCRIPTS = ("live-tokenizer.js", "live-model.js", "live-page.js")
# What the page says of its numbers' accuracy, per `views.live_weights`: tests/live/test_live_model.py checks every
# head's attention from the embedded all-MiniLM-L6-v2's export against the model's own (torch, float32) within
# TOLERANCE on TESTED, and tests/live/test_live_site.py the page's typed texts in Chromium. Measured: compact 0.016
# (median 0.004), float16 0.0016.
TOLERANCE = {"compact": 0.02, "float16": 0.002}
MEASURED_ON = "all-MiniLM-L6-v2"
TESTED = "57 texts of 3 to 512 tokens (sentences, pairs, long and repeated text)"


def _bits_per_weight(spec: dict) -> int:
    """The bits one rounded weight takes on average (the Rice-coded matrices: steps and codes); 0 without any."""
    coded = [entry for entry in spec["tensors"] if entry["encoding"] == "rice"]
    values = sum(math.prod(entry["shape"]) for entry in coded)
    return round(8 * sum(entry["length"] for entry in coded) / values) if values else 0


def _script_json(value) -> str:
    """JSON for a script file: ASCII only (a vocabulary holds any character; U+2028 too)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def pack_text(data: bytes) -> bytes:
    """`data` as UTF-16LE text, three characters for every 47 bits (least significant bit first; zero-padded to
    whole groups): the group's value v is d0 + RADIX * d1 + RADIX^2 * d2, and each digit is written as a character
    of DIGIT_RANGES. site_src/assets/javascripts/live-model.js textToBytes reads it back."""
    padded = np.frombuffer(data + b"\0" * (-len(data) % 47), dtype=np.uint8)
    bits = np.unpackbits(padded, bitorder="little").reshape(-1, 47)
    groups = np.packbits(np.pad(bits, ((0, 0), (0, 17))), axis=1, bitorder="little")  # 8 bytes a group
    values = np.ascontiguousarray(groups).view("<u8").reshape(-1)
    digits = np.stack([values % RADIX, values // RADIX % RADIX, values // RADIX // RADIX], axis=1).reshape(-1)
    chars = np.zeros(digits.shape, dtype=np.uint64)
    first = 0
    for start, end in DIGIT_RANGES:
        inside = (digits >= first) & (digits < first + end - start)
        chars[inside] = digits[inside] - first + start
        first += end - start
    return chars.astype("<u2").tobytes()


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
            "measured_on": MEASURED_ON, "bits": _bits_per_weight(live.spec),
            "float16": live.weights_format == "float16"}
