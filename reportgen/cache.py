"""On-disk cache of model outputs, so a rebuild with nothing changed runs no model.

An entry's key hashes everything its content depends on: the model's file
fingerprint, the example, the truncation length and CACHE_VERSION (bump it when
the computation changes). Entries are written atomically (temp file + rename) and
carry a checksum; a damaged entry is reported and recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

from reportgen.attention import ExampleRun
from reportgen.config import ExampleSpec

CACHE_VERSION = "2"


def key_of(*parts) -> str:
    text = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Cache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / f"{key}{suffix}"

    def _write(self, path: Path, payload: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(payload).hexdigest().encode()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(digest + b"\n" + payload)
        os.replace(tmp, path)

    def _read(self, path: Path) -> bytes | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        digest, _, payload = raw.partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            warnings.warn(f"cache entry {path} is damaged (checksum mismatch); recomputing it")
            return None
        return payload

    def get_json(self, kind: str, key: str):
        payload = self._read(self._path(kind, key, ".json"))
        return None if payload is None else json.loads(payload)

    def put_json(self, kind: str, key: str, value) -> None:
        self._write(self._path(kind, key, ".json"), json.dumps(value).encode())  # key order is content

    def get_run(self, key: str, spec: ExampleSpec) -> ExampleRun | None:
        payload = self._read(self._path("runs", key, ".npz"))
        if payload is None:
            return None
        data = np.load(io.BytesIO(payload), allow_pickle=False)
        meta = json.loads(str(data["meta"]))
        extras = {name[len("x_"):]: data[name] for name in data.files if name.startswith("x_")}
        return ExampleRun(
            spec, meta["tokens"], data["word_ids"], data["segment_ids"], data["special"],
            data["attention"], meta["truncated"], extras,
        )

    def put_run(self, key: str, run: ExampleRun) -> None:
        buf = io.BytesIO()
        meta = json.dumps({"tokens": run.tokens, "truncated": run.truncated})
        arrays = {f"x_{name}": value for name, value in run.extras.items()}
        np.savez(buf, meta=np.array(meta), word_ids=run.word_ids, segment_ids=run.segment_ids,
                 special=run.special, attention=run.attention, **arrays)
        self._write(self._path("runs", key, ".npz"), buf.getvalue())
