"""`reportgen cache prune`: remove the cache entries that no current config uses.

What "used" means: an entry is used when the latest build of a config that still exists read or
wrote it (its build record, `reportgen.cache.usage`). Every build records this, whatever kinds of
entries its stages cache, so a new kind is covered without being registered anywhere. Prune refuses
to run before the given config has a record (then it cannot know what that config needs), and keeps:
- every entry a current config's latest build used, and the config's record;
- the per-mask results (`ablation/<model>/<data>-<method>/...`) of every model whose ablation
  folder holds a used entry: a warm build reads only the stage's stored record
  (`ablation/<model>/record-<key>.json`), yet those results are what a changed setting (alpha,
  seeds, fractions, another experiment) needs again. The price: a changed data file's old results
  stay until that model is no longer used;
- everything used after the newest record was written: a build may be running now.
It removes the other entries and the records of configs that no longer exist.

What may be removed: only what reportgen wrote, checked two ways: the file's name is an entry's
name (`reportgen.cache.store.ENTRY_NAME`, in folders named like reportgen's), and its content is an
entry's, a sha256 line then the payload it hashes. A file failing either, a symlink (never
followed: a symlinked folder inside the cache is not entered), a damaged entry: left alone. A
symlinked cache directory is resolved first and the same rules apply to its target.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.cache.store import ENTRY_NAME, FIELD, TAG, TEMP_NAME, Cache, claim
from reportgen.cache.usage import RECORDS, BuildRecord, config_identity, read_records
from reportgen.errors import OutputError

if TYPE_CHECKING:
    from reportgen.config import Config

ENTRY = re.compile(rf"^{ENTRY_NAME}$")
FOLDER = re.compile(r"^[0-9a-z][0-9a-z_-]*$")  # the folders reportgen makes: kinds, fingerprints, data-method
GROUPED = ("ablation",)  # kinds whose subfolders are kept a model at a time (see the module's doc)


@dataclass(frozen=True)
class Entry:
    """One file reportgen wrote into the cache (by its name); `relative` is a POSIX path from the cache root."""

    relative: str
    size: int
    mtime_ns: int

    @property
    def kind(self) -> str:
        """The top folder, with the name's prefix when it has one: `runs`, `ablation/mask`, ..."""
        parts = self.relative.split("/")
        top = parts[0] if len(parts) > 1 else "."
        prefix = parts[-1].rsplit("-", 1)[0] if "-" in parts[-1] else ""  # `mask`, `importance-calibrated`
        return f"{top}/{prefix}" if prefix else top


@dataclass
class Contents:
    """What is in a cache directory: reportgen's entries, and what is not reportgen's (left alone)."""

    root: Path
    entries: list[Entry] = field(default_factory=list)
    temp: list[str] = field(default_factory=list)  # temp files of writers (swept when their writer is gone)
    foreign: list[str] = field(default_factory=list)


def cache_root(cache_dir: Path) -> Path | None:
    """The real cache directory (symlinks resolved); None when there is none yet."""
    try:
        root = Path(cache_dir).resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError on Python 3.11, ELOOP after)
        raise OutputError(f"cache_dir {cache_dir} is a symlink loop {FIELD}") from None
    if not root.exists():
        return None
    if not root.is_dir():
        raise OutputError(f"cache_dir {cache_dir} is a file, not a directory {FIELD}")
    return root


def scan(root: Path) -> Contents:
    """Every file under `root`, sorted into reportgen's entries, temp files and foreign files;
    symlinks (to files or folders) are foreign and never followed."""
    contents = Contents(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        ours = all(FOLDER.match(part) for part in here.relative_to(root).parts)
        for name in sorted(dirs):
            if (here / name).is_symlink():
                contents.foreign.append((here / name).relative_to(root).as_posix())
        for name in sorted(files):
            relative = (here / name).relative_to(root).as_posix()
            try:
                info = os.lstat(here / name)
            except OSError:
                continue
            if relative == TAG and stat.S_ISREG(info.st_mode):
                continue  # the cache directory tag (store.claim): reportgen's, and no entry
            if not (ours and stat.S_ISREG(info.st_mode)):
                contents.foreign.append(relative)
            elif ENTRY.match(name):
                contents.entries.append(Entry(relative, info.st_size, info.st_mtime_ns))
            elif TEMP_NAME.match(name):
                contents.temp.append(relative)
            else:
                contents.foreign.append(relative)
    return contents


def is_entry(path: Path) -> bool:
    """Whether the file holds what `Cache.write_bytes` writes: a sha256 line, then the payload it hashes."""
    try:
        with open(path, "rb") as handle:
            digest = handle.readline().rstrip(b"\n")
            hasher = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(block)
    except OSError:
        return False
    return hasher.hexdigest().encode() == digest


@dataclass
class PrunePlan:
    """What prune removes and keeps, decided before anything is removed."""

    root: Path
    current: list[BuildRecord]
    stale: list[BuildRecord]
    remove: list[Entry]
    keep: list[Entry]
    left_alone: list[str]  # foreign files, and removable-looking files that are not entries (damaged)


def used_entries(contents: Contents, current: list[BuildRecord]) -> set[str]:
    """The entries prune keeps (see the module's doc), as paths relative to the cache."""
    root = contents.root
    used = {entry for record in current for entry in record.entries}
    used |= {record.path.relative_to(root).as_posix() for record in current}
    models = {_model_folder(entry) for entry in used} - {None}
    newest = max((os.lstat(record.path).st_mtime_ns for record in current), default=0)
    return used | {entry.relative for entry in contents.entries
                   if (entry.relative.count("/") >= 3 and _model_folder(entry.relative) in models)
                   or entry.mtime_ns > newest}


def _model_folder(relative: str) -> str | None:
    """`ablation/<model>` for an entry anywhere below it; None for other kinds."""
    parts = relative.split("/")
    return "/".join(parts[:2]) if parts[0] in GROUPED and len(parts) >= 3 else None


def plan_prune(config: Config) -> PrunePlan | None:
    """Decide what pruning the cache of `config` removes; None when there is no cache.
    Refused (OutputError) while the config has no build record in it."""
    root = cache_root(config.cache_dir)
    if root is None:
        return None
    claim(root, tag_it=False)  # a folder holding what reportgen did not write is not pruned at all
    records = [record for record in read_records(root) if record.path.parent == root / RECORDS]
    current = [record for record in records if record.current()]
    config_file, base_dir = config_identity(config)
    if not any(record.config == config_file and (config_file or record.base_dir == str(base_dir))
               for record in current):
        raise OutputError(f"the cache {root} holds no record of a build of {config_file or 'the defaults'}; "
                          "build it once with this version of reportgen, then prune (nothing was removed)")
    contents = scan(root)
    used = used_entries(contents, current)
    stale = [record for record in records if not record.current()]
    unused = [entry for entry in contents.entries if entry.relative not in used]
    removable = [entry for entry in unused if is_entry(root / entry.relative)]
    damaged = sorted({entry.relative for entry in unused} - {entry.relative for entry in removable})
    return PrunePlan(root, current, stale, removable, [entry for entry in contents.entries if entry.relative in used],
                     contents.foreign + damaged)


def prune(plan: PrunePlan) -> list[Entry]:
    """Remove the plan's entries (each checked again to be a regular file, not a symlink), the temp
    files of writers no longer running, and the folders this left empty; returns what was removed."""
    removed = []
    for entry in plan.remove:
        path = plan.root / entry.relative
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()
                removed.append(entry)
        except OSError:
            continue  # gone already, or not removable: kept, and said so by its absence from the count
    Cache(plan.root).sweep()
    for folder in sorted({(plan.root / entry.relative).parent for entry in removed}, key=lambda p: -len(p.parts)):
        while folder != plan.root and plan.root in folder.parents:
            try:
                folder.rmdir()  # only ever an empty folder
            except OSError:
                break
            folder = folder.parent
    return removed
