"""Extra sentences for the pattern statistics, read from user files.

The pattern atlas (issue 4) averages over a corpus: the built-in examples plus any
text file or table column named in the config. Files are read lazily, one record at
a time, so a corpus of thousands of sentences never sits in memory as a whole; every
problem is reported as a one-line `DataError` naming the file and the line.

Formats:
- txt: one sentence per line; blank lines are skipped.
- csv: a header row; `column` names the text column (optional when the file has a
  single column), `pair_column` optionally sentence B; rows whose text is empty are
  skipped. Quoted fields may span lines; a quote left open is reported where it opened.
- tsv: the same, split on tabs with no quote processing, like the task data (a quote
  that opens a sentence, common in STS-B, must not swallow the lines after it).
- jsonl: one JSON value per line; with `column`, an object holding that key (and
  `pair_column`); without, a JSON string. Blank lines are skipped.

The file checks are the task data's (reportgen.datafiles): a regular file only (a FIFO would
hang the build), UTF-8 without NUL bytes, a sentence of at most `MAX_CELL_CHARS`
characters; a physical line is read with a bound so a file with no line breaks cannot
fill the memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

from reportgen.config import CorpusFile, ExampleSpec
from reportgen.datafiles import (
    MAX_CELL_CHARS,
    NUL_PROBLEM,
    CsvProblem,
    JsonProblem,
    cell_too_long,
    check_regular_file,
    csv_records,
    open_data_file,
    parse_json,
    shown,
    shown_names,
    tsv_records,
)
from reportgen.errors import DataError

SUFFIX_FORMATS = {".txt": "txt", ".text": "txt", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
                  ".jsonl": "jsonl", ".ndjson": "jsonl"}
# The longest physical line read: far above a sentence or a table row (a cell is at most
# MAX_CELL_CHARS, 4 MiB of UTF-8), low enough that a file without line breaks is refused
# instead of read whole into memory.
MAX_LINE_BYTES = 1 << 26


def file_format(spec: CorpusFile, path: Path) -> str:
    """The format to read `path` with: the configured one, else guessed from the suffix."""
    if spec.format != "auto":
        return spec.format
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"{path}: cannot tell the corpus format from the suffix '{shown(path.suffix)}'; "
                        "set format: txt, csv, tsv or jsonl")
    return fmt


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, decoded line) pairs; decoding per line so an error names its line."""
    with open_data_file(path, "corpus file") as handle:
        for number in itertools.count(1):
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except OSError as err:
                raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
            if not raw:
                return
            if len(raw) > MAX_LINE_BYTES:
                raise DataError(f"{path}:{number}: the line is longer than {MAX_LINE_BYTES:,} bytes; "
                                "a corpus file holds one sentence or table row per line")
            if b"\x00" in raw:
                raise DataError(f"{path}:{number}: {NUL_PROBLEM}")
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{number}: not UTF-8 text") from None


def _example(path: Path, line: int, text: object, pair: object = None) -> ExampleSpec | None:
    """An ExampleSpec from one record, None when the text is blank (skipped, like blank lines)."""
    for what, value in (("text", text), ("pair", pair)):
        if value is not None and not isinstance(value, str):
            raise DataError(f"{path}:{line}: the {what} must be a string, got {type(value).__name__}")
        if value is not None and len(value) > MAX_CELL_CHARS:
            raise DataError(f"{path}:{line}: {cell_too_long(len(value), f'the {what}')}")
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


def _column_index(path: Path, line: int, header: list[str], name: str | None, role: str) -> int:
    columns = shown_names(header)
    if name is None:
        if len(header) == 1:
            return 0
        raise DataError(f"{path}:{line}: the table has {len(header)} columns ({columns}); set {role} to one of them")
    if name not in header:
        raise DataError(f"{path}:{line}: no column '{name}' (columns: {columns})")
    return header.index(name)


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The task data's CSV parser (`csv_records`) over the file's lines, read one at a time."""
    try:
        yield from csv_records(line for _, line in _lines(path))
    except CsvProblem as problem:
        raise DataError(f"{path}:{problem.line}: {problem}") from None


def _blank(row: list[str]) -> bool:
    return all(not cell.strip() for cell in row)


def _read_table(path: Path, spec: CorpusFile, rows: Iterator[tuple[int, list[str]]]) -> Iterator[ExampleSpec | None]:
    """The examples of a csv/tsv table: a header row (the first non-blank one), then records."""
    head_line, header = next(((n, row) for n, row in rows if not _blank(row)), (0, None))
    if header is None:
        raise DataError(f"{path}: the table is empty; expected a header row")
    header = [h.strip() for h in header]
    text_at = _column_index(path, head_line, header, spec.column, "column")
    pair_at = None
    if spec.pair_column is not None:
        pair_at = _column_index(path, head_line, header, spec.pair_column, "pair_column")
    for number, row in rows:
        if _blank(row):
            continue
        if len(row) != len(header):
            raise DataError(f"{path}:{number}: {len(row)} fields, the header has {len(header)}")
        yield _example(path, number, row[text_at], None if pair_at is None else row[pair_at])


def _read_jsonl(path: Path, spec: CorpusFile) -> Iterator[ExampleSpec | None]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            value = parse_json(line)
        except JsonProblem as err:
            raise DataError(f"{path}:{number}: invalid JSON: {err}") from None
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
    check_regular_file(path, "corpus file")  # before the format: a directory is named as one
    fmt = file_format(spec, path)
    if fmt == "txt":
        records = _read_txt(path, spec)
    elif fmt == "jsonl":
        records = _read_jsonl(path, spec)
    else:
        records = _read_table(path, spec, _csv_rows(path) if fmt == "csv" else tsv_records(_lines(path)))
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
