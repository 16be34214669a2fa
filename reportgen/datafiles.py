"""Reading a user's task data: CSV, TSV or JSONL, with or without a header, or plain text.

Columns are chosen by name (needs a header, or JSON objects) or by 0-based index.
TSV is split on tabs with no quote processing at all, because real benchmark files
(STS-B, GLUE) contain unbalanced quotes that a CSV reader would swallow across lines.
A .txt file is one text per line (blank and whitespace-only lines skipped, no header): it
holds a single column, so it serves a task that reads only texts (mlm, causal_lm), and a task that
needs pairs, scores or labels is told which columns it needs.
Every problem the user can fix raises a one-line `DataError` that names the file and,
where there is one, the line and the column.

The file is hostile until read: only a regular file is opened (a FIFO would block the
build forever, a device could be endless), it must be UTF-8 without NUL bytes, and one
cell holds at most `MAX_CELL_CHARS` characters. The corpus reader (corpus.py) shares
these checks and the TSV and CSV parsers (`tsv_records`, `csv_records`).
"""

from __future__ import annotations

import bisect
import csv
import errno
import hashlib
import io
import itertools
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np

from reportgen.errors import DataError

# The longest text one cell may hold. Python's csv refuses fields over 131,072 characters
# by default, which a long document in a data file can pass; a text is cut to max_length
# tokens anyway, so we accept 8 times that. Beyond it a fast tokenizer, which reads the
# whole text before truncating, needs about 250 MB and 2 s per cell and grows linearly
# (16 M characters took 3 GB), so a longer cell is refused with its line.
MAX_CELL_CHARS = 1 << 20

# Line breaks as Python's csv module counts them (newline=""): \r\n, \r or \n. Not
# str.splitlines, which also breaks at U+2028, \x0c or \x1c and so splits cells that hold them.
LINE_BREAK = re.compile(r"\r\n|\r|\n")

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
# Control characters from a file are shown escaped in messages, never sent to the terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_QUOTED = re.compile(r'"[^"]*(?:""[^"]*)*"')  # one closed CSV quoted field, "" escapes included
_UNQUOTED = re.compile(r"[^,\r\n]*")  # the rest of a CSV field up to its comma or line break
NUL_PROBLEM = "holds a NUL byte, so it is not a text file (binary, or UTF-16?); save it as UTF-8 text"


Format = Literal["auto", "txt", "csv", "tsv", "jsonl"]
Column = str | int


@dataclass
class Rows:
    """The chosen columns of a data file, as strings, with the line each row came from."""

    path: Path
    values: dict[str, list[str | None]]  # role -> one value per row (None: JSON null)
    lines: list[int]  # 1-based line number of each row (where its record starts), for messages
    names: dict[str, str]  # role -> how the column was given, for messages

    def __len__(self) -> int:
        return len(self.lines)

    def texts(self, role: str) -> list[str]:
        """The column as non-empty strings; an empty or missing cell is the user's mistake."""
        out = []
        for value, line in zip(self.values[role], self.lines, strict=True):
            if value is None or not value.strip():
                raise DataError(f"{self.path}: line {line}: column {self.names[role]} is empty")
            out.append(value)
        return out

    def floats(self, role: str) -> np.ndarray:
        """The column as finite numbers (graded scores); NaN and text are refused by line."""
        out = np.empty(len(self), dtype=np.float64)
        for row, (value, line) in enumerate(zip(self.values[role], self.lines, strict=True)):
            where = f"{self.path}: line {line}: column {self.names[role]}"
            try:
                number = float(value) if value is not None else math.nan
            except ValueError:
                raise DataError(f"{where}: '{shown(value)}' is not a number") from None
            if not math.isfinite(number):
                raise DataError(f"{where}: value '{shown(str(value))}' is not a finite number")
            out[row] = number
        return out

    def line_of(self, row: int) -> int:
        return self.lines[row]


def shown(text: str | None, width: int = 40) -> str:
    """Text from a file as a message may quote it: control characters escaped (a file must not
    drive the user's terminal) and cut to `width` characters."""
    text = ("" if text is None else text).translate(_CONTROL)
    return text if len(text) <= width else text[: width - 3] + "..."


def shown_names(names: list[str], most: int = 30) -> str:
    """Column names or keys from a file for a message: each `shown`, at most `most` of them."""
    listed = ", ".join(shown(name, 80) for name in names[:most])
    return listed if len(names) <= most else f"{listed}, ... ({len(names):,} in all)"


# -- opening: regular files only --------------------------------------------------------------------
def check_regular_file(path: Path, what: str = "file") -> None:
    """Refuse, before anything opens it, a path that is not a regular file.

    Opening a FIFO blocks until someone writes to it (the build hangs), a device can be
    endless or have side effects on open, and a directory is a mistake worth naming.
    `what` names the file in messages ("data file", "corpus file").
    """
    try:
        mode = path.stat().st_mode  # follows symlinks: the target is what gets read
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(f"{path}: {what} not found") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DataError(f"{path}: the {what} is a symlink loop") from None
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    except ValueError:  # a NUL character in the name
        raise DataError(f"{shown(str(path), 200)}: the {what} name holds a NUL character") from None
    _refuse_special(path, mode, what)


def special_kind(mode: int) -> str | None:
    """What a file of this stat mode is when it is not a regular file ("a directory", "a named pipe (FIFO)", ...);
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _refuse_special(path: Path, mode: int, what: str) -> None:
    kind = special_kind(mode)
    if kind is None:
        return
    if kind == "a directory":
        raise DataError(f"{path}: is a directory, not a {what}")
    raise DataError(f"{path}: is not a regular file but {kind}; reportgen reads data only from regular files")


def open_data_file(path: Path, what: str = "file") -> BinaryIO:
    """The file opened for binary reading, once it is known to be a regular file.

    Checked with stat before opening, then again on the open descriptor: the open is
    non-blocking, so a FIFO swapped in between the two cannot hang us either.
    """
    path = Path(path)
    check_regular_file(path, what)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise DataError(f"{path}: {what} not found") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        _refuse_special(path, os.fstat(descriptor).st_mode, what)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def file_sha256(path: Path, what: str = "data file") -> str:
    """sha256 of a data file, read in blocks; only a regular file is opened (a FIFO would hang the build)."""
    digest = hashlib.sha256()
    with open_data_file(Path(path), what) as handle:
        try:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        except OSError as err:
            raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    return digest.hexdigest()


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a BOM is dropped); the message names the first bad line."""
    path = Path(path)
    with open_data_file(path, "data file") as handle:
        try:
            data = handle.read()
        except OSError as err:
            raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DataError(f"{path}: line {_line_at(data, nul)}: {NUL_PROBLEM}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: line {_line_at(data, err.start)}: not UTF-8 text (byte 0x{data[err.start]:02x}); "
                        "re-save the file as UTF-8") from None


def _line_at(data: bytes, offset: int) -> int:
    """1-based line of a byte offset, breaks counted as csv counts them."""
    return len(re.findall(rb"\r\n|\r|\n", data[:offset])) + 1


# -- parsing helpers shared with corpus.py ------------------------------------------------------------
@contextmanager
def cell_limit() -> Iterator[None]:
    """csv's field limit set to MAX_CELL_CHARS while a reader runs, then put back (it is
    process-wide state of the csv module)."""
    before = csv.field_size_limit(MAX_CELL_CHARS)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def cell_too_long(length: int | None = None, subject: str = "the cell") -> str:
    """What is wrong with an over-long cell; `length` None when the reader stopped counting."""
    held = f"{subject} is longer than" if length is None else f"{subject} holds {length:,} characters, more than"
    return (f"{held} the {MAX_CELL_CHARS:,} reportgen takes for one text "
            "(a text is cut to max_length tokens anyway, so shorten it)")


def tsv_records(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) for each numbered physical line, split on tabs (its line break dropped).

    No quote processing at all: a quote is an ordinary character in TSV benchmark files, and
    one that opens a sentence (common in STS-B) must not swallow the lines after it.
    """
    for number, line in lines:
        yield number, line.rstrip("\r\n").split("\t")


class CsvProblem(ValueError):
    """A CSV record that cannot be read; `line` is where the user should look, the text is fit for them."""

    def __init__(self, line: int, problem: str):
        super().__init__(problem)
        self.line = line


def csv_records(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """(line the record starts on, fields) from physical lines that keep their line breaks.

    Strict quoting, so a quote left open is a `CsvProblem` naming the line where it opened
    instead of the rest of the file read into one cell. csv's field limit is raised only
    while a record is read, so a paused generator leaves the module's state as it was.
    """
    record: list[str] = []  # the physical lines of the record being read, for _csv_problem

    def feed() -> Iterator[str]:
        for line in lines:
            record.append(line)
            yield line

    reader = csv.reader(feed(), strict=True)
    while True:
        first = reader.line_num + 1
        record.clear()
        try:
            with cell_limit():
                fields = next(reader, None)
        except csv.Error as err:
            raise CsvProblem(*_csv_problem(err, record, first)) from None
        if fields is None:
            return
        yield first, fields


def _csv_problem(err: csv.Error, lines: list[str], first: int) -> tuple[int, str]:
    """(line, what is wrong) for a csv.Error, from the physical lines of the record it stopped in.

    The reader reports where it stopped, which for a missing closing quote is the end of
    the file; the user needs the line where the quote opened.
    """
    opening = _open_quote("".join(lines))
    quote_line = None
    if opening is not None:
        quote_line = first + bisect.bisect_right(list(itertools.accumulate(map(len, lines))), opening)
    last = first + max(len(lines), 1) - 1
    message = str(err)
    if "unexpected end of data" in message and quote_line is not None:
        return quote_line, "unterminated quote (the quoted field runs to the end of the file)"
    if "field larger than field limit" in message:
        if quote_line is not None:
            return quote_line, (f"a quoted field runs on for more than {MAX_CELL_CHARS:,} characters; "
                                "is its closing quote missing?")
        return last, cell_too_long(None, "a cell")
    if "new-line character seen in unquoted field" in message:  # a lone \r; csv's hint is for programmers
        return last, ("a carriage return (\\r) inside an unquoted field; quote the field, "
                      "or end lines with \\n or \\r\\n")
    return last, f"malformed CSV: {message}"


def _open_quote(record: str) -> int | None:
    """Offset of the quote opening a field that never closes in `record` (one CSV record's
    text, up to where the reader stopped), None when every quoted field closes."""
    position = 0
    while position < len(record):
        if record[position] == '"':
            closed = _QUOTED.match(record, position)
            if closed is None:
                return position
            position = closed.end()
        position = _UNQUOTED.match(record, position).end()  # the field's rest (after a closing quote: junk)
        if position >= len(record) or record[position] != ",":
            return None
        position += 1
    return None


class JsonProblem(ValueError):
    """A JSON line that cannot be read; the text is fit for a user."""


def parse_json(line: str) -> Any:
    """json.loads, with every way a line can fail as a `JsonProblem` (not only JSONDecodeError:
    deep nesting is a RecursionError, a number of 4,300+ digits a plain ValueError)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise JsonProblem(err.msg) from None
    except RecursionError:
        raise JsonProblem("nested too deeply") from None
    except ValueError:
        raise JsonProblem(f"a number has more than {sys.get_int_max_str_digits():,} digits") from None


# -- formats ------------------------------------------------------------------------------------------
def detect_format(path: Path) -> Literal["txt", "csv", "tsv", "jsonl"]:
    suffix = path.suffix.lower()
    if suffix in {".txt", ".text"}:
        return "txt"
    if suffix in {".tsv", ".tab"}:
        return "tsv"
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise DataError(f"{path}: cannot tell the format from the extension '{shown(suffix)}'; "
                    "set the format (txt, csv, tsv or jsonl)")


def load_rows(
    path: str | Path,
    columns: Mapping[str, Column | None],
    *,
    fmt: Format = "auto",
    header: bool = True,
    comment: str | None = None,
    limit: int | None = None,
    field: str = "ablation.data",
) -> Rows:
    """Read `columns` (role -> name or index; None = not used) from a TXT/CSV/TSV/JSONL file.

    `comment`: lines starting with it are skipped (the shipped demo set has a note).
    `limit`: keep only the first rows. Blank lines are skipped.
    A txt file has one column, the line: it serves one role only (its column's name is not
    checked, an index must be 0), and `header` does not apply (every line is a text).
    `field`: the config field that names the file, for the message when a txt file cannot
    give every column.
    """
    path = Path(path)
    text = read_text(path)
    kind = detect_format(path) if fmt == "auto" else fmt
    wanted = {role: col for role, col in columns.items() if col is not None}
    names = {role: (f"'{col}'" if isinstance(col, str) else f"#{col}") for role, col in wanted.items()}
    if kind == "txt":
        _check_txt_columns(path, wanted, names, field)
        records = _txt_records(text, comment)
    elif kind == "jsonl":
        records = _jsonl_records(path, text, comment)
    elif kind == "csv":
        records = _csv_records(path, text, comment)
    else:
        records = _tsv_records(text, comment)
    if not records:
        raise DataError(f"{path}: the file has no rows")
    if kind == "txt":
        values, lines = _pick_delimited(path, records, {role: 0 for role in wanted}, names, False, limit)
    elif kind == "jsonl":
        values, lines = _pick_json(path, records, wanted, names, limit)
    else:
        values, lines = _pick_delimited(path, records, wanted, names, header, limit)
    if not lines:
        raise DataError(f"{path}: the file has a header but no data rows")
    return Rows(path, values, lines, names)


def _skipped(fields: list[str], comment: str | None) -> bool:
    return not fields or not any(f.strip() for f in fields) or bool(comment and fields[0].startswith(comment))


def _check_txt_columns(path: Path, wanted: Mapping[str, Column], names: dict[str, str], field: str) -> None:
    """A txt file gives one text per line and nothing else: more than one column is the user's mistake."""
    if len(wanted) > 1:
        needed = ", ".join(f"{role} ({names[role]})" for role in wanted)
        raise DataError(f"{path}: a .txt file gives only text, one per line, but the task needs {len(wanted)} "
                        f"columns: {needed}; give a csv, tsv or jsonl file with them (config field '{field}')")
    for role, col in wanted.items():
        if isinstance(col, int) and col != 0:
            raise DataError(f"{path}: a .txt file has one column (0), the line; column {col} for {role} "
                            f"is not in it (config field '{field}')")


def _txt_records(text: str, comment: str | None) -> list[tuple[int, list[str]]]:
    """(line number, [the line's text, stripped]) for each line that holds some text."""
    records = []
    for number, line in enumerate(LINE_BREAK.split(text), start=1):
        if line.strip() and not (comment and line.startswith(comment)):
            records.append((number, [line.strip()]))
    return records


def _tsv_records(text: str, comment: str | None) -> list[tuple[int, list[str]]]:
    records = tsv_records(enumerate(LINE_BREAK.split(text), start=1))
    return [(number, fields) for number, fields in records if not _skipped(fields, comment)]


def _csv_records(path: Path, text: str, comment: str | None) -> list[tuple[int, list[str]]]:
    try:
        records = csv_records(io.StringIO(text, newline=""))
        return [(number, fields) for number, fields in records if not _skipped(fields, comment)]
    except CsvProblem as problem:
        raise DataError(f"{path}: line {problem.line}: {problem}") from None


def _check_cell(path: Path, number: int, name: str, value: str) -> str:
    if len(value) > MAX_CELL_CHARS:
        raise DataError(f"{path}: line {number}: column {name}: {cell_too_long(len(value))}")
    return value


def _pick_delimited(path, records, wanted, names, header, limit):
    index: dict[str, int] = {}
    if header:
        head_line, head = records[0]
        records = records[1:]
        head = [h.strip() for h in head]
    for role, col in wanted.items():
        if isinstance(col, int):
            index[role] = col
        elif not header:
            raise DataError(f"{path}: column '{col}' is given by name but the file is read without a header; "
                            "give a 0-based index or set header: true")
        elif col not in head:
            raise DataError(f"{path}: line {head_line}: no column named '{col}' in the header "
                            f"(columns: {shown_names(head)})")
        else:
            index[role] = head.index(col)
    values: dict[str, list[str | None]] = {role: [] for role in wanted}
    lines = []
    for number, fields in records[:limit] if limit else records:
        for role, at in index.items():
            if at >= len(fields):
                raise DataError(f"{path}: line {number}: has {len(fields)} fields, no column {names[role]}")
            values[role].append(_check_cell(path, number, names[role], fields[at]))
        lines.append(number)
    return values, lines


def _jsonl_records(path: Path, text: str, comment: str | None):
    out = []
    for number, line in enumerate(LINE_BREAK.split(text), start=1):
        if not line.strip() or (comment and line.startswith(comment)):
            continue
        try:
            out.append((number, parse_json(line)))
        except JsonProblem as err:
            raise DataError(f"{path}: line {number}: not valid JSON ({err})") from None
    return out


def _pick_json(path, records, wanted, names, limit):
    values: dict[str, list[str | None]] = {role: [] for role in wanted}
    lines = []
    for number, record in records[:limit] if limit else records:
        for role, col in wanted.items():
            if isinstance(record, dict):
                if isinstance(col, int):
                    raise DataError(f"{path}: line {number}: rows are JSON objects; give column {col} by name")
                if col not in record:
                    raise DataError(f"{path}: line {number}: no key '{col}' (keys: {shown_names(list(record))})")
                value = record[col]
            elif isinstance(record, list):
                if not isinstance(col, int):
                    raise DataError(f"{path}: line {number}: rows are JSON arrays; "
                                    f"give column '{col}' as a 0-based index")
                if col >= len(record):
                    raise DataError(f"{path}: line {number}: has {len(record)} fields, no column {names[role]}")
                value = record[col]
            else:
                raise DataError(f"{path}: line {number}: expected a JSON object or array per line, "
                                f"got {_json_kind(record)}")
            text = None if value is None else value if isinstance(value, str) else json.dumps(value)
            values[role].append(None if text is None else _check_cell(path, number, names[role], text))
        lines.append(number)
    return values, lines


def _json_kind(value: object) -> str:
    return {str: "a string", bool: "true/false", int: "a number", float: "a number"}.get(type(value), "null")
