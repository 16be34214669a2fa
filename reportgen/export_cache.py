"""Pictures kept between builds, so a rebuild copies what it drew before instead of drawing it again.

Drawing is most of the site stage: every chart export (vl-convert's Vega pass, resvg, then zlib at its
best level), the inline finding pictures, the head-map PNGs and the Vega bundle for the pages. Each is a
pure function of its inputs, so each is stored under the hash of them: the spec (or SVG drawing), the
format and scale, the versions of what draws it (vl-convert, zlib) and the source of reportgen's modules
that shape a picture after vl-convert (DRAWING_MODULES): changing one of them draws every picture anew,
so a stale picture cannot outlive the code that made it.

Entries live in the config's cache directory (the one the model outputs use), as
`exports/<24 hex>.<png|svg|js>`, in the format reportgen.cache writes every entry in: a sha256 line, then
the payload, written to `<entry>.tmp<pid>` and renamed, so a killed build never leaves half an entry
under an entry's name, and a damaged one is warned about and drawn again, never copied into a site.
A hit sets the entry's modification time, so the ones no recent build used can be told apart.
This module repeats that format instead of importing reportgen.cache, which brings the analyses' types
(reportgen.attention) into the site stage; the site stage loads no analysis (tests/test_report.py).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import stat
import threading
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

from reportgen.errors import OutputError

KIND = "exports"  # the folder under the cache directory: `reportgen cache info` counts it as a kind of its own
DRAWING_MODULES = ("exports.py", "inline_svg.py", "head_map_svg.py", "png_palette.py", "export_cache.py")
SUFFIXES = ("png", "svg", "js")
FIELD = "(config field 'cache_dir')"


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


class ExportCache:
    """Bytes by the hash of what made them; with no directory (`root` None) everything is drawn anew.

    Safe to use from several threads (the chart exports run in a pool): one key is drawn by one thread
    at a time, and a second asking for it waits and then reads the entry."""

    def __init__(self, root: Path | None):
        self.root = Path(root) if root is not None else None
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
            payload = self._read(path)
            if payload is not None:
                self.hits += 1
                return payload
            payload = draw()
            self._write(path, payload)
            self.misses += 1
            return payload

    def get_text(self, inputs: object, suffix: str, draw: Callable[[], str]) -> str:
        """`get_bytes` for text (SVG, JavaScript), stored as UTF-8."""
        return self.get_bytes(inputs, suffix, lambda: draw().encode("utf-8")).decode("utf-8")

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _read(self, path: Path) -> bytes | None:
        try:
            if not _is_entry(path):
                return None
            raw = path.read_bytes()
        except OSError as exc:
            raise self._error(path, exc, "read") from None
        digest, _, payload = raw.partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            # stacklevel 1: the CLI shows the warnings raised in reportgen's own files
            warnings.warn(f"cache entry {path} is damaged (checksum mismatch); drawing it again", stacklevel=1)
            return None
        try:
            os.utime(path)  # used now: `cache prune` can tell it from entries no build has used for long
        except OSError:
            pass  # a read-only cache still serves its entries
        return payload

    def _write(self, path: Path, payload: bytes) -> None:
        temp = path.with_name(f"{path.name}.tmp{os.getpid()}")  # what reportgen.cache.sweep removes
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(temp, "wb") as handle:
                    handle.write(hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
                os.replace(temp, path)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise self._error(path, exc, "write") from None

    def _error(self, path: Path, exc: OSError, action: str) -> OutputError:
        """One line naming what stopped the cache, as reportgen.cache words it."""
        for folder in (self.root, self.root / KIND):
            if folder.exists() and not folder.is_dir():
                return OutputError(f"cache_dir {self.root} holds a file where a directory should be: {folder}; "
                                   f"delete it or set cache_dir to another directory {FIELD}")
        if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            verb = "writable" if action == "write" else "readable"
            return OutputError(f"cache directory {self.root} is not {verb}; make it {verb} or set cache_dir "
                               f"to another directory {FIELD}")
        what = "written" if action == "write" else "read"
        return OutputError(f"cache entry {path} cannot be {what} ({exc.strerror or type(exc).__name__}); "
                           "delete it (anything in the cache can be deleted)")


def _is_entry(path: Path) -> bool:
    """Whether an entry is at `path`; anything there but a regular file (a FIFO would block the read) is refused."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise OutputError(f"cache entry {path} is not a regular file; delete it (anything in the cache can be deleted)")
    return True


NO_CACHE = ExportCache(None)
