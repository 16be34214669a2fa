"""On-disk cache of model outputs, so a rebuild with nothing changed runs no model.

An entry's key hashes everything its content depends on: the model's file
fingerprint, the example, the truncation length and CACHE_VERSION (bump it when
the computation changes). Every entry, whatever writes it (model runs, pattern
statistics, model info, each ablation mask), goes through `Cache.write_bytes`:
the file is a sha256 line then the payload, written to `<entry>.tmp<pid>` and renamed,
so a kill never leaves half an entry under the entry's name. `read_bytes` checks the
sha256: a damaged entry is reported with a warning and recomputed, never trusted. A hit's
modification time is set to now, so that an entry's time says when a build last used it: that is
how `reportgen.cache.usage` records which entries each config uses, for `reportgen cache prune`.

A temp file outlives its writer only when the writer is killed between writing and
renaming (SIGTERM, SIGKILL); `sweep` removes those of writers that are no longer
running, and nothing else.

The cache is output reportgen writes: a cache directory that cannot be read or written
is an `OutputError` (exit 5) with one line naming the path, never a traceback.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import stat
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from reportgen.errors import OutputError
from reportgen.runs import StoredAttention, kept_in_file

if TYPE_CHECKING:  # the site stage stores its drawings here too (reportgen.site.export_cache) and loads no analysis
    from reportgen.config import ExampleSpec
    from reportgen.runs import ExampleRun

DAMAGED = "cache entry {path} is damaged ({why}); recomputing it"  # one warning per entry
CACHE_VERSION = "2"
DIGEST_CHARS = 64  # an entry's first line: the sha256 of the rest, in hex
# The name of every entry reportgen writes, whatever its kind: a hex key (16 to 64 digits), maybe
# after a lowercase prefix (`mask-`, `importance-calibrated-`, ...) and before a short suffix (`.npz`,
# `.json`, `.png`, ...). Housekeeping (`reportgen cache prune`, `sweep`) touches no file named otherwise.
ENTRY_NAME = r"(?:[a-z]+-)*[0-9a-f]{16,64}(?:\.[a-z0-9]{1,5})?"
# The temp files reportgen writes: an entry's name then `.tmp<pid>` (old versions wrote
# `mask-<key>.tmp<pid>`, without the suffix). Nothing else in the cache is ever swept.
TEMP_NAME = re.compile(rf"^{ENTRY_NAME}\.tmp(\d+)$")
FIELD = "(config field 'cache_dir')"
# The cache directory tag (https://bford.info/cachedir/): backup tools skip the folder, and reportgen knows it as
# its own cache. OWN_FOLDERS: what a cache made before the tag holds at its top (the kinds of entries, records).
TAG = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by reportgen (https://bford.info/cachedir/).\n")
OWN_FOLDERS = frozenset({"runs", "info", "patterns", "live", "ablation", "patching", "exports", "used"})


def key_of(*parts) -> str:
    text = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def temp_path(path: Path, pid: int | None = None) -> Path:
    """Where the entry `path` is written before it is renamed into place."""
    return path.with_name(f"{path.name}.tmp{os.getpid() if pid is None else pid}")


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def claim(cache_dir: Path, tag_it: bool = True) -> None:
    """Refuse (OutputError) a `cache_dir` that holds what reportgen did not write, and tag one that is reportgen's:
    `cache_dir: "~"` put entries among the home folder's files, and sweeping or pruning there walked all of them.
    A folder with reportgen's tag is its cache; one without it is taken (and tagged) when it holds only
    reportgen's own folders (a cache made before the tag, or by the build before); with `tag_it` False (pruning),
    nothing is written. A cache_dir that is not yet a folder, or that cannot be read or written, is left to the
    cache's first read or write to say so."""
    root = Path(cache_dir)
    tag = root / TAG
    try:
        if not root.is_dir() or (tag.is_file() and not tag.is_symlink()
                                 and "reportgen" in tag.read_text(encoding="utf-8", errors="replace")):
            return
        foreign = sorted(path.name for path in root.iterdir()
                         if not (path.name in OWN_FOLDERS and path.is_dir() and not path.is_symlink()))
    except OSError:
        return
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise OutputError(f"cache_dir {root} holds files reportgen did not write ({shown}); give the cache a folder "
                          f"of its own, such as .reportgen-cache {FIELD}")
    try:
        if tag_it:
            tag.write_text(TAG_TEXT, encoding="utf-8")
    except OSError:
        pass  # an unwritable cache is said by its first write, in the words it always had


class Cache:
    def __init__(self, root: Path):
        self.root = Path(root)

    # -- bytes with a checksum: the one way entries are stored --------------------------------------
    def read_bytes(self, path: Path, touch: bool = True) -> bytes | None:
        """The payload of the entry at `path`; None when it is not there or is damaged (warned).
        With `touch`, a hit is marked as used now (see the module's doc)."""
        path = Path(path)
        try:
            if not self._check_entry(path):
                return None
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(path, exc, "read") from None
        digest, _, payload = raw.partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            self.damaged(path, "checksum mismatch")
            return None
        if touch:
            self.touch(path)
        return payload

    @staticmethod
    def touch(path: Path) -> None:
        """Set the entry's modification time to now: it was used. A cache reportgen cannot write
        keeps its times (and its build records: `reportgen.cache.usage`)."""
        try:
            os.utime(path)
        except OSError:
            pass

    def write_bytes(self, path: Path, payload: bytes) -> None:
        """Store `payload` with its sha256 at `path`, atomically (temp file + rename)."""
        self.write_with(path, lambda handle: handle.write(payload))

    def write_with(self, path: Path, fill: Callable[[BinaryIO], object]) -> None:
        """Store what `fill(handle)` writes, with its sha256, at `path`, atomically (temp file + rename).

        The payload goes straight into the file and its digest is read back from there: a model run's
        attention (600 MB at 1,024 tokens on 12 x 12 heads) is never copied into memory to be stored."""
        path = Path(path)
        tmp = temp_path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._check_entry(path)  # never replace a directory, FIFO... that reportgen did not write
            try:
                with open(tmp, "w+b") as handle:
                    handle.write(b"0" * DIGEST_CHARS + b"\n")  # the digest's place, written last
                    fill(_Payload(handle, DIGEST_CHARS + 1))
                    handle.seek(DIGEST_CHARS + 1)
                    digest = hashlib.sha256()
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
                    handle.seek(0)
                    handle.write(digest.hexdigest().encode())
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise self._error(path, exc, "write") from None

    @staticmethod
    def _check_entry(path: Path) -> bool:
        """Whether an entry exists at `path`; anything there but a regular file is refused (a FIFO
        would block the read, a directory the rename)."""
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OutputError(f"cache entry {path} is not a regular file; delete it "
                              "(anything in the cache can be deleted)")
        return True

    def damaged(self, path: Path, why: str) -> None:
        # stacklevel 1: the CLI shows the warnings raised in reportgen's own files
        warnings.warn(DAMAGED.format(path=path, why=why), stacklevel=1)

    def _error(self, path: Path, exc: OSError, action: str) -> OutputError:
        """One line for what stopped reading or writing `path`: which path, and what to do."""
        if self.root.is_symlink() and not self.root.exists() and exc.errno == errno.ELOOP:
            return OutputError(f"cache_dir {self.root} is a symlink loop {FIELD}")
        if self.root.exists() and not self.root.is_dir():
            return OutputError(f"cache_dir {self.root} is a file, not a directory {FIELD}")
        for parent in [p for p in reversed(path.parents) if self.root in (p, *p.parents)]:
            if parent.exists() and not parent.is_dir():
                return OutputError(f"cache entry {parent} is a file where the cache needs a directory; delete it "
                                   "(anything in the cache can be deleted)")
        if isinstance(exc, IsADirectoryError) or path.is_dir():
            return OutputError(f"cache entry {path} is a directory, not a file; delete it "
                               "(anything in the cache can be deleted)")
        if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            verb = "writable" if action == "write" else "readable"
            return OutputError(f"cache directory {self.root} is not {verb}; make it {verb} or set cache_dir "
                               f"to another directory {FIELD}")
        what = "written" if action == "write" else "read"
        return OutputError(f"cache entry {path} cannot be {what} ({exc.strerror or type(exc).__name__})")

    # -- housekeeping ----------------------------------------------------------------------------
    def sweep(self, under: Path | None = None) -> list[Path]:
        """Remove the temp files (see TEMP_NAME) of writers no longer running, under `under`
        (default: the whole cache); returns what was removed. Nothing else is touched."""
        top = Path(under) if under is not None else self.root
        removed = []
        for folder, _dirs, files in os.walk(top, followlinks=False):
            for name in files:
                match = TEMP_NAME.match(name)
                if match is None or _running(int(match.group(1))):
                    continue
                path = Path(folder) / name
                try:
                    if stat.S_ISREG(os.lstat(path).st_mode):
                        path.unlink()
                        removed.append(path)
                except OSError:
                    pass  # gone already, or not ours to remove: a later build tries again
        return removed

    # -- typed entries --------------------------------------------------------------------------
    def _path(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / f"{key}{suffix}"

    def get_json(self, kind: str, key: str):
        path = self._path(kind, key, ".json")
        payload = self.read_bytes(path)
        if payload is None:
            return None
        try:
            return json.loads(payload)
        except ValueError:
            self.damaged(path, "not JSON")
            return None

    def put_json(self, kind: str, key: str, value) -> None:
        self.write_bytes(self._path(kind, key, ".json"), json.dumps(value).encode())  # key order is content

    def get_blob(self, kind: str, key: str) -> bytes | None:
        """Bytes stored with `put_blob` (e.g. the in-browser model's weights); None when missing or damaged."""
        return self.read_bytes(self._path(kind, key, ".bin"))

    def put_blob(self, kind: str, key: str, payload: bytes) -> None:
        self.write_bytes(self._path(kind, key, ".bin"), payload)

    def get_array(self, path: Path) -> np.ndarray | None:
        """One numpy array stored with `put_array`; None when missing or damaged."""
        payload = self.read_bytes(path)
        if payload is None:
            return None
        try:
            stream = io.BytesIO(payload)
            if declared_bytes(stream) > len(payload):  # before numpy allocates what the header claims
                raise ValueError("its header claims more than the file holds")
            return np.load(stream, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            self.damaged(path, "not a numpy array")
            return None

    def put_array(self, path: Path, value: np.ndarray) -> None:
        buf = io.BytesIO()
        np.save(buf, np.asarray(value), allow_pickle=False)
        self.write_bytes(path, buf.getvalue())

    def get_run(self, key: str, spec: ExampleSpec) -> ExampleRun | None:
        """The run stored by `put_run`; None when missing or damaged. Its attention stays in the entry's file
        (a StoredAttention, read a layer at a time) when it is larger than SPOOL_BYTES, else it is read in."""
        from reportgen.runs import ExampleRun

        path = self._path("runs", key, ".npz")
        handle = self.open_verified(path)
        if handle is None:
            return None
        try:
            handle.seek(DIGEST_CHARS + 1)
            data = np.load(_Payload(handle, DIGEST_CHARS + 1), allow_pickle=False)
            _check_members(data, os.fstat(handle.fileno()).st_size - DIGEST_CHARS - 1)
            meta = json.loads(str(data["meta"]))
            attention = _stored_member(handle, data, "attention")
            attention = data["attention"] if attention is None else attention
            extras = {name[len("x_"):]: data[name] for name in data.files if name.startswith("x_")}
            run = ExampleRun(
                spec, meta["tokens"], data["word_ids"], data["segment_ids"], data["special"],
                attention, meta["truncated"], extras,
                data["value_norms"] if "value_norms" in data.files else None,
                _seq2seq_of(meta, data, attention),
            )
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            handle.close()
            self.damaged(path, f"not a stored run: {exc}")
            return None
        if not isinstance(attention, StoredAttention):
            handle.close()
        return run

    def open_verified(self, path: Path, touch: bool = True) -> BinaryIO | None:
        """The entry's file, open, once its sha256 is checked by reading it through (never all in memory); None
        when it is not there or is damaged (warned). The caller reads the payload from DIGEST_CHARS + 1 on."""
        path = Path(path)
        try:
            if not self._check_entry(path):
                return None
            handle = open(path, "rb")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(path, exc, "read") from None
        try:
            expected = handle.read(DIGEST_CHARS + 1)
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        except OSError as exc:
            handle.close()
            raise self._error(path, exc, "read") from None
        if expected != digest.hexdigest().encode() + b"\n":
            handle.close()
            self.damaged(path, "checksum mismatch")
            return None
        if touch:
            self.touch(path)
        return handle

    def put_run(self, key: str, run: ExampleRun) -> None:
        meta = {"tokens": run.tokens, "truncated": run.truncated}
        arrays = {f"x_{name}": value for name, value in run.extras.items()}
        if run.seq2seq is not None:
            pair_meta, pair_arrays = _seq2seq_parts(run.seq2seq)
            meta["seq2seq"], arrays = pair_meta, {**arrays, **pair_arrays}
        if run.value_norms is not None:
            arrays["value_norms"] = run.value_norms
        arrays = {"meta": np.array(json.dumps(meta)), "word_ids": run.word_ids, "segment_ids": run.segment_ids,
                  "special": run.special, "attention": run.attention, **arrays}
        self.write_with(self._path("runs", key, ".npz"), lambda handle: _write_npz(handle, arrays))


def _write_npz(handle: BinaryIO, arrays: dict) -> None:
    """`arrays` as np.savez writes them (a zip of .npy files, stored, not compressed), a StoredAttention among them
    copied a layer at a time: what np.load reads, and where a stored member's data lies whole in the file."""
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", mode="w", force_zip64=True) as member:
                if isinstance(value, StoredAttention):
                    header = {"descr": value.dtype.str, "fortran_order": False, "shape": value.shape}
                    np.lib.format.write_array_header_2_0(member, header)
                    for layer in value:
                        member.write(memoryview(np.ascontiguousarray(layer)).cast("B"))
                else:
                    np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def declared_bytes(stream: BinaryIO) -> int:
    """The bytes of data an .npy header in `stream` claims (its shape times its item size), read from the header
    alone, `stream` put back where it was: what numpy would allocate before reading a value."""
    start = stream.tell()
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    stream.seek(start)
    return math.prod(shape) * dtype.itemsize


def _check_members(data, size: int) -> None:
    """Every member of a stored run (an NpzFile over a payload of `size` bytes) as `put_run` writes it: stored,
    not deflated, within the payload, and holding the bytes its header claims. A damaged or hostile entry is
    refused here, before numpy allocates what a header says (1e12 values) or inflates a member without end."""
    for info in data.zip.infolist():
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size \
                or info.header_offset + info.file_size > size:
            raise ValueError(f"member {info.filename} is compressed or larger than the entry")
        with data.zip.open(info) as member:
            if declared_bytes(member) > info.file_size:
                raise ValueError(f"member {info.filename}'s header claims more than it holds")


def _stored_member(handle: BinaryIO, data, name: str) -> StoredAttention | None:
    """The float32 member `name` of the open entry `data` (an NpzFile over `handle`'s payload) as a
    StoredAttention over `handle`, where it is larger than SPOOL_BYTES and stored uncompressed; else None."""
    info = data.zip.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED or not kept_in_file(info.file_size):
        return None
    start = DIGEST_CHARS + 1 + info.header_offset
    handle.seek(start)
    local = handle.read(30)  # the member's local header: its name's and extra field's lengths at 26 and 28
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    handle.seek(start + 30 + name_length + extra_length)
    version = np.lib.format.read_magic(handle)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(handle)
    if fortran_order or dtype != np.dtype("<f4") or len(shape) != 4:
        return None
    return StoredAttention(shape, handle, handle.tell())


# the encoder's attention is the run's own `attention`, stored once
SEQ2SEQ_ARRAYS = ("decoder_attention", "cross_attention", "target_special")


def _seq2seq_parts(pair_run) -> tuple[dict, dict[str, np.ndarray]]:
    """An encoder-decoder's run as (its texts, tokens and flags for the meta; its arrays, each under "s_")."""
    meta = {name: getattr(pair_run, name) for name in ("source", "target", "source_tokens", "target_tokens",
                                                       "label_tokens", "source_truncated", "target_truncated")}
    arrays = {f"s_{name}": getattr(pair_run, name) for name in SEQ2SEQ_ARRAYS if getattr(pair_run, name) is not None}
    arrays.update({f"s_norms_{group}": norms for group, norms in (pair_run.value_norms or {}).items()})
    return meta, arrays


def _seq2seq_of(meta: dict, data, encoder_attention):
    """The encoder-decoder run that `_seq2seq_parts` stored, or None for any other model's run."""
    if "seq2seq" not in meta:
        return None
    from reportgen.runs import Seq2SeqRun

    arrays = {name: data[f"s_{name}"] if f"s_{name}" in data.files else None for name in SEQ2SEQ_ARRAYS}
    norms = {name[len("s_norms_"):]: data[name] for name in data.files if name.startswith("s_norms_")}
    return Seq2SeqRun(**meta["seq2seq"], encoder_attention=encoder_attention, **arrays, value_norms=norms or None)


class _Payload:
    """An entry's file from its payload on, as a file of its own: what `fill` writes (an .npz, whose zip
    offsets count from its first byte) reads back the same from the payload alone."""

    def __init__(self, handle: BinaryIO, start: int):
        self.handle, self.start = handle, start

    def write(self, data: bytes) -> int:
        return self.handle.write(data)

    def read(self, size: int = -1) -> bytes:  # numpy takes an object with `read` for a file
        return self.handle.read(size)

    def tell(self) -> int:
        return self.handle.tell() - self.start

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.handle.seek(offset + self.start if whence == os.SEEK_SET else offset, whence) - self.start

    def seekable(self) -> bool:
        return True

    def flush(self) -> None:
        self.handle.flush()
