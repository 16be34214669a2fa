"""A drawing's PNG in indexed colour: the same pixels in a fraction of the bytes.

vl-convert (resvg) writes every PNG as 8-bit RGBA. A head map is flat colours and anti-aliased
text on white, about a hundred distinct colours, so a palette of them (PNG colour type 3) keeps
every pixel exactly and stores one byte per pixel instead of four: the findings page's map went
from 64 KB to a fraction of it, which matters with one map per example page (issue 15; the
default site must stay under 12 MB). Anything this cannot keep exactly (more than 256 colours,
transparency, a filter other than None, Sub and Up, interlacing) is returned as it came, only
recompressed (exports.recompressed).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from reportgen.site.exports import PNG_SIGNATURE, png_chunks, recompressed

MAX_COLOURS = 256


def rgba_pixels(png: bytes) -> np.ndarray | None:
    """[height, width, 4] uint8 of an 8-bit RGBA, non-interlaced PNG whose rows use the None, Sub or Up
    filter (PNG spec, section 9.2: the ones that decode a whole row at once); None for anything else."""
    chunks = png_chunks(png)
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, colour_type, interlace) != (8, 6, 0):
        return None
    data = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    rows = np.frombuffer(data, dtype=np.uint8).reshape(height, 1 + 4 * width)
    if not np.isin(rows[:, 0], (0, 1, 2)).all():
        return None
    pixels = np.empty((height, width, 4), dtype=np.uint8)
    previous = np.zeros((width, 4), dtype=np.uint8)
    for number, row in enumerate(rows):
        line = row[1:].reshape(width, 4)
        if row[0] == 1:  # Sub: each byte adds the same channel of the pixel to its left (mod 256)
            line = np.cumsum(line, axis=0, dtype=np.uint8)
        elif row[0] == 2:  # Up: each byte adds the byte above it
            line = line + previous
        pixels[number] = previous = line
    return pixels


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def indexed(png: bytes) -> bytes:
    """`png` as an indexed-colour PNG with the same pixels, when it is opaque and has at most 256
    colours; otherwise as it is, recompressed at zlib's best level."""
    pixels = rgba_pixels(png)
    if pixels is None or (pixels[..., 3] != 255).any():
        return recompressed(png)
    height, width = pixels.shape[:2]
    packed = pixels[..., :3].astype(np.uint32)
    packed = (packed[..., 0] << 16) | (packed[..., 1] << 8) | packed[..., 2]
    colours, index = np.unique(packed.reshape(-1), return_inverse=True)
    if len(colours) > MAX_COLOURS:
        return recompressed(png)
    palette = np.stack([(colours >> 16) & 255, (colours >> 8) & 255, colours & 255], axis=1).astype(np.uint8)
    rows = np.zeros((height, width + 1), dtype=np.uint8)  # filter byte 0 (None) before each row
    rows[:, 1:] = index.reshape(height, width)
    header = struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)
    return b"".join([PNG_SIGNATURE, _chunk(b"IHDR", header), _chunk(b"PLTE", palette.tobytes()),
                     _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)), _chunk(b"IEND", b"")])
