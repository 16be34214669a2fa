"""Which cache entries each config's latest build used, so `reportgen cache prune` knows what to keep.

Why a record per build, and why file times: the cache is shared by every config whose `cache_dir`
names it, and new kinds of entries appear whenever a stage learns to cache something. Nothing that
writes an entry has to register it: `Cache.write_bytes` renames a fresh file into place and
`Cache.read_bytes` sets a hit's modification time to now (`Cache.touch`), so every entry a build
reads or writes, in any thread or process, ends with a time at or after the build's start. The
build's record is `used/<sha256 of the config's path>.json` in the cache (itself an entry, written
with its checksum at the start, its time marking the start on the cache's own clock); at the end it
lists every entry whose time is not older. A build that fails keeps the entries of the previous
record as well, so an interrupted build never makes the work it resumes from look unused.

Nothing here creates the cache directory: a build that stops before the cache exists leaves none.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from reportgen.cache.store import Cache
from reportgen.config import Config
from reportgen.errors import OutputError

RECORDS = "used"  # the folder of build records inside the cache
RECORD_FORMAT = 1
_ACTIVE: set[Path] = set()  # records being written by this process (a nested `recording` adds nothing)


@dataclass
class BuildRecord:
    """One config's latest build, as `recording` left it: `entries` are paths relative to the cache."""

    path: Path
    config: str | None  # the config file; None for the built-in defaults of `base_dir`
    base_dir: str
    models: list[str]
    started: float
    complete: bool
    entries: set[str] = field(default_factory=set)

    def current(self) -> bool:
        """Whether the config still exists, so that its entries are still wanted."""
        return Path(self.config).is_file() if self.config else Path(self.base_dir).is_dir()

    def label(self) -> str:
        return self.config or f"(defaults) in {self.base_dir}"


def record_path(cache_dir: Path, config_file: str | None, base_dir: Path) -> Path:
    """Where the record of a config's builds lives: named by a hash of the config's absolute path
    (or of its directory, for a build without a config file)."""
    identity = f"config:{config_file}" if config_file else f"defaults:{base_dir}"
    return Path(cache_dir) / RECORDS / f"{hashlib.sha256(identity.encode()).hexdigest()[:24]}.json"


def config_identity(config: Config) -> tuple[str | None, Path]:
    """The config file as an absolute path (None for the defaults) and the project directory."""
    base_dir = Path(config.base_dir).resolve()
    if config.config_file is None:  # the defaults, or a dict given to reportgen.build: one record per directory
        return None, base_dir
    return str(config.config_file.resolve()), base_dir


@contextmanager
def recording(config: Config) -> Iterator[None]:
    """Record the cache entries the build inside this block reads or writes (see the module's doc)."""
    config_file, base_dir = config_identity(config)
    cache = Cache(Path(config.cache_dir))
    path = record_path(cache.root, config_file, base_dir)
    if path in _ACTIVE:
        yield
        return
    previous = read_record(cache, path)
    record = BuildRecord(path, config_file, str(base_dir), _models(config), time.time(), False,
                         previous.entries if previous else set())
    start_ns = _write(cache, record)
    _ACTIVE.add(path)
    complete = False
    try:
        yield
        complete = True
    finally:
        _ACTIVE.discard(path)
        if cache.root.is_dir():
            used = entries_since(cache.root, start_ns)
            record.complete = complete
            record.entries = used if complete else used | record.entries
            _write(cache, record)


def _models(config: Config) -> list[str]:
    written = config.as_written()
    return [written["model"]] + ([written["compare"]["model"]] if written.get("compare") else [])


def _write(cache: Cache, record: BuildRecord) -> int:
    """Store `record`; returns its file's modification time (ns), 0 when the cache is not there or
    not writable (then every entry counts as this build's, and the build itself reports the problem)."""
    if not cache.root.is_dir():
        return 0
    payload = {"format": RECORD_FORMAT, "config": record.config, "base_dir": record.base_dir,
               "models": record.models, "started": record.started, "complete": record.complete,
               "entries": sorted(record.entries - {_relative(cache.root, record.path)})}
    try:
        cache.write_bytes(record.path, json.dumps(payload, indent=0).encode())
        return os.stat(record.path).st_mtime_ns
    except (OutputError, OSError):
        return 0


def read_record(cache: Cache, path: Path) -> BuildRecord | None:
    """The record at `path`; None when missing, damaged or not one."""
    payload = cache.read_bytes(path, touch=False)
    try:
        data = json.loads(payload) if payload is not None else None
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            return None
        return BuildRecord(path, data["config"], data["base_dir"], list(data["models"]), float(data["started"]),
                           bool(data["complete"]), {str(entry) for entry in data["entries"]})
    except (ValueError, KeyError, TypeError):
        return None


def read_records(cache_dir: Path) -> list[BuildRecord]:
    """Every build record in the cache, oldest build first."""
    cache = Cache(Path(cache_dir))
    folder = cache.root / RECORDS
    if not folder.is_dir() or folder.is_symlink():
        return []
    records = [read_record(cache, path) for path in sorted(folder.glob("*.json"))
               if stat.S_ISREG(os.lstat(path).st_mode)]
    return sorted((record for record in records if record is not None), key=lambda record: record.started)


def entries_since(root: Path, start_ns: int) -> set[str]:
    """The regular files under `root` (symlinks never followed) modified at or after `start_ns`."""
    found = set()
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_mtime_ns >= start_ns:
                found.add(_relative(root, Path(folder) / name))
    return found


def _relative(root: Path, path: Path) -> str:
    return Path(path).relative_to(root).as_posix()
