"""Pictures kept between builds, so a rebuild copies what it drew before instead of drawing it again.

Drawing is most of the site stage: every chart export (vl-convert's Vega pass, resvg, then zlib at its
best level), the inline finding pictures, the head-map PNGs and the Vega bundle for the pages. Each is a
pure function of its inputs, so each is stored under the hash of them: the spec (or SVG drawing), the
format and scale, the versions of what draws it (vl-convert, zlib) and the source of reportgen's modules
that shape a picture after vl-convert (DRAWING_MODULES): changing one of them draws every picture anew,
so a stale picture cannot outlive the code that made it.

Entries live in the config's cache directory (the one the model outputs use), as
`exports/<24 hex>.<png|svg|js>`, stored by `reportgen.cache.store.Cache` like every entry: a sha256 line, then
the payload, written to a temp file and renamed, so a killed build never leaves half an entry under an
entry's name, and a damaged one is warned about and drawn again, never copied into a site. A hit sets
the entry's modification time, so the ones no recent build used can be told apart (`cache prune`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from reportgen.cache.store import Cache

KIND = "exports"  # the folder under the cache directory: `reportgen cache info` counts it as a kind of its own
DRAWING_MODULES = ("exports.py", "charts/inline_svg.py", "charts/head_map_svg.py", "charts/png_palette.py",
                   "export_cache.py")  # relative to reportgen/site/
SUFFIXES = ("png", "svg", "js")
MEMORY_BYTES = 128 * 2**20  # pictures a process keeps for its next build (`drawn`)
Drawing = TypeVar("Drawing", str, bytes)


@functools.cache
def _drawing_versions() -> tuple[str, ...]:
    """What the bytes of a picture depend on besides its inputs: vl-convert (Vega, resvg), zlib, and the
    code of DRAWING_MODULES (its sha256: read once per process)."""
    import vl_convert

    package = Path(__file__).parent
    code = hashlib.sha256(b"".join((package / name).read_bytes() for name in DRAWING_MODULES)).hexdigest()
    return vl_convert.__version__, zlib.ZLIB_RUNTIME_VERSION, code


def key_of(inputs: object) -> str:
    """24 hex digits of the sha256 over the inputs (JSON, keys sorted) and the drawing versions."""
    text = json.dumps([_drawing_versions(), inputs], sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class _Drawn:
    """What vl-convert drew in this process, by the hash of its inputs, the least recently used forgotten first
    past `limit` bytes. A process that builds again copies it instead of drawing it again: `serve --watch`,
    the Python API or a notebook building in a loop, a build without a cache directory (its finished site
    after its partial one). Below the cache directory's entries, which stay the record across processes."""

    def __init__(self, limit: int):
        self.limit, self.size = limit, 0
        self.items: OrderedDict[str, str | bytes] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, inputs: object, draw: Callable[[], Drawing]) -> Drawing:
        key = key_of(inputs)
        with self._guard:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = draw()
        with self._guard:
            if key not in self.items:
                self.items[key] = value
                self.size += len(value)
            while self.size > self.limit:
                self.size -= len(self.items.popitem(last=False)[1])
        return value


DRAWN = _Drawn(MEMORY_BYTES)


def drawn(inputs: object, draw: Callable[[], Drawing]) -> Drawing:
    """`draw()`, a pure function of `inputs`, or what it gave in this process before (_Drawn)."""
    return DRAWN.get(inputs, draw)


class ExportCache:
    """Bytes by the hash of what made them; with no directory (`root` None) everything is drawn anew.

    Safe to use from several threads (the chart exports run in a pool): one key is drawn by one thread
    at a time, and a second asking for it waits and then reads the entry."""

    def __init__(self, root: Path | None):
        self.root = Path(root) if root is not None else None
        self.store = Cache(self.root) if self.root is not None else None
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self.hits = 0  # entries read back, and drawn: for the build's timings and the tests
        self.misses = 0

    def path(self, key: str, suffix: str) -> Path | None:
        return None if self.root is None else self.root / KIND / f"{key}.{suffix}"

    def get_bytes(self, inputs: object, suffix: str, draw: Callable[[], bytes]) -> bytes:
        """The bytes `draw()` makes from `inputs`, from the cache when it holds them."""
        if suffix not in SUFFIXES:
            raise ValueError(f"not an export suffix: {suffix!r}")
        if self.root is None:
            return draw()
        key = key_of(inputs)
        path = self.root / KIND / f"{key}.{suffix}"
        with self._lock(key):
            payload = self.store.read_bytes(path)
            if payload is not None:
                self.hits += 1
                return payload
            payload = draw()
            self.store.write_bytes(path, payload)
            self.misses += 1
            return payload

    def get_text(self, inputs: object, suffix: str, draw: Callable[[], str]) -> str:
        """`get_bytes` for text (SVG, JavaScript), stored as UTF-8."""
        return self.get_bytes(inputs, suffix, lambda: draw().encode("utf-8")).decode("utf-8")

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


NO_CACHE = ExportCache(None)
