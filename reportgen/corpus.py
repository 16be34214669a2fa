"""Extra sentences for the pattern statistics, read from user files.

The pattern atlas (issue 4) averages over a corpus: the built-in examples plus any
text file or table column named in the config. Files are read lazily, one record at
a time, so a corpus of thousands of sentences never sits in memory as a whole; every
problem is reported as a one-line `DataError` naming the file and the line.

Formats:
- txt: one sentence per line; blank lines are skipped.
- csv / tsv: a header row; `column` names the text column (optional when the file has
  a single column), `pair_column` optionally sentence B; rows whose text is empty are skipped.
- jsonl: one JSON value per line; with `column`, an object holding that key (and
  `pair_column`); without, a JSON string. Blank lines are skipped.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterable, Iterator


from reportgen.config import CorpusFile, ExampleSpec
from reportgen.errors import DataError

SUFFIX_FORMATS = {".txt": "txt", ".text": "txt", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
                  ".jsonl": "jsonl", ".ndjson": "jsonl"}

def file_format(spec: CorpusFile, path: Path) -> str:
    """The format to read `path` with: the configured one, else guessed from the suffix."""
    if spec.format != "auto":
        return spec.format
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"{path}: cannot tell the corpus format from the suffix '{path.suffix}'; "
                        "set format: txt, csv, tsv or jsonl")
    return fmt


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, decoded line) pairs; decoding per line so an error names its line."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: corpus file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{number}: not UTF-8 text") from None


def _example(path: Path, line: int, text: object, pair: object = None) -> ExampleSpec | None:
    """An ExampleSpec from one record, None when the text is blank (skipped, like blank lines)."""
    for what, value in (("text", text), ("pair", pair)):
        if value is not None and not isinstance(value, str):
            raise DataError(f"{path}:{line}: the {what} must be a string, got {type(value).__name__}")
    text = (text or "").strip()
    pair = (pair or "").strip() or None
    if not text:
        return None
    return ExampleSpec(text=text, pair=pair, name=f"{path.name}:{line}")


def _read_txt(path: Path, spec: CorpusFile) -> Iterator[ExampleSpec | None]:
    if spec.column or spec.pair_column:
        raise DataError(f"{path}: a txt corpus has no columns; remove column/pair_column or use csv, tsv or jsonl")
    for number, line in _lines(path):
        yield _example(path, number, line.rstrip("\r\n"))


def _column_index(path: Path, header: list[str], name: str | None, role: str) -> int:
    if name is None:
        if len(header) == 1:
            return 0
        raise DataError(f"{path}:1: the table has {len(header)} columns ({', '.join(header)}); "
                        f"set {role} to one of them")
    if name not in header:
        raise DataError(f"{path}:1: no column '{name}' (columns: {', '.join(header)})")
    return header.index(name)


def _read_table(path: Path, spec: CorpusFile, delimiter: str) -> Iterator[ExampleSpec | None]:
    lines = _lines(path)
    reader = csv.reader((line for _, line in lines), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: the table is empty; expected a header row")
        header = [h.strip() for h in header]
        text_at = _column_index(path, header, spec.column, "column")
        pair_at = None if spec.pair_column is None else _column_index(path, header, spec.pair_column, "pair_column")
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(f"{path}:{reader.line_num}: {len(row)} fields, the header has {len(header)}")
            yield _example(path, reader.line_num, row[text_at], None if pair_at is None else row[pair_at])
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: malformed {('csv', 'tsv')[delimiter == chr(9)]}: {exc}") from None


def _read_jsonl(path: Path, spec: CorpusFile) -> Iterator[ExampleSpec | None]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
        if spec.column is None:
            if spec.pair_column is not None:
                raise DataError(f"{path}: pair_column needs column as well")
            yield _example(path, number, value)
            continue
        if not isinstance(value, dict):
            raise DataError(f"{path}:{number}: expected a JSON object with key '{spec.column}'")
        for key in (spec.column, spec.pair_column):
            if key is not None and key not in value:
                raise DataError(f"{path}:{number}: no key '{key}'")
        yield _example(path, number, value[spec.column], value.get(spec.pair_column) if spec.pair_column else None)


def iter_corpus_file(spec: CorpusFile, base_dir: str | Path | None = None) -> Iterator[ExampleSpec]:
    """The sentences of one corpus file, lazily, in file order (at most `spec.limit`)."""
    path = Path(spec.path).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    fmt = file_format(spec, path)
    if fmt == "txt":
        records = _read_txt(path, spec)
    elif fmt == "jsonl":
        records = _read_jsonl(path, spec)
    else:
        records = _read_table(path, spec, "," if fmt == "csv" else "\t")
    count = 0
    for example in records:
        if example is None:
            continue
        yield example
        count += 1
        if spec.limit is not None and count >= spec.limit:
            return


def iter_corpus(files: Iterable[CorpusFile], base_dir: str | Path | None = None) -> Iterator[ExampleSpec]:
    """The sentences of all corpus files, one after the other, lazily."""
    for spec in files:
        yield from iter_corpus_file(spec, base_dir)


def read_corpus(files: Iterable[CorpusFile], base_dir: str | Path | None = None) -> list[ExampleSpec]:
    """All sentences of the corpus files as a list (use `iter_corpus` to stream)."""
    return list(iter_corpus(files, base_dir))
