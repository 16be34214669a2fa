"""Reading a user's task data: CSV, TSV or JSONL, with or without a header.

Columns are chosen by name (needs a header, or JSON objects) or by 0-based index.
TSV is split on tabs with no quote processing at all, because real benchmark files
(STS-B, GLUE) contain unbalanced quotes that a CSV reader would swallow across lines.
Every problem the user can fix raises a one-line `DataError` that names the file and,
where there is one, the line and the column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from reportgen.errors import DataError

Format = Literal["auto", "csv", "tsv", "jsonl"]
Column = str | int


@dataclass
class Rows:
    """The chosen columns of a data file, as strings, with the line each row came from."""

    path: Path
    values: dict[str, list[str | None]]  # role -> one value per row (None: JSON null)
    lines: list[int]  # 1-based line number of each row, for messages
    names: dict[str, str]  # role -> how the column was given, for messages

    def __len__(self) -> int:
        return len(self.lines)

    def texts(self, role: str) -> list[str]:
        """The column as non-empty strings; an empty or missing cell is the user's mistake."""
        out = []
        for value, line in zip(self.values[role], self.lines):
            if value is None or not value.strip():
                raise DataError(f"{self.path}: line {line}: column {self.names[role]} is empty")
            out.append(value)
        return out

    def floats(self, role: str) -> np.ndarray:
        """The column as finite numbers (graded scores); NaN and text are refused by line."""
        out = np.empty(len(self), dtype=np.float64)
        for i, (value, line) in enumerate(zip(self.values[role], self.lines)):
            try:
                number = float(value) if value is not None else math.nan
            except ValueError:
                raise DataError(f"{self.path}: line {line}: column {self.names[role]}: '{_short(value)}' is not a number") from None
            if not math.isfinite(number):
                raise DataError(f"{self.path}: line {line}: column {self.names[role]}: value '{_short(str(value))}' is not a finite number")
            out[i] = number
        return out

    def line_of(self, row: int) -> int:
        return self.lines[row]


def _short(text: str | None, width: int = 40) -> str:
    text = "" if text is None else text
    return text if len(text) <= width else text[: width - 3] + "..."


def detect_format(path: Path) -> Literal["csv", "tsv", "jsonl"]:
    suffix = path.suffix.lower()
    if suffix in {".tsv", ".tab"}:
        return "tsv"
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise DataError(f"{path}: cannot tell the format from the extension '{suffix}'; set the format (csv, tsv or jsonl)")


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a BOM is dropped); the message names the first bad line."""
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line}: not UTF-8 text (byte 0x{data[err.start]:02x}); re-save the file as UTF-8") from None


def load_rows(
    path: str | Path,
    columns: Mapping[str, Column | None],
    *,
    fmt: Format = "auto",
    header: bool = True,
    comment: str | None = None,
    limit: int | None = None,
) -> Rows:
    """Read `columns` (role -> name or index; None = not used) from a CSV/TSV/JSONL file.

    `comment`: lines starting with it are skipped (the shipped demo set has a note).
    `limit`: keep only the first rows. Blank lines are skipped.
    """
    path = Path(path)
    text = read_text(path)
    kind = detect_format(path) if fmt == "auto" else fmt
    wanted = {role: col for role, col in columns.items() if col is not None}
    if kind == "jsonl":
        records = _jsonl_records(path, text, comment)
    else:
        records = _delimited_records(text, kind, comment)
    if not records:
        raise DataError(f"{path}: the file has no rows")
    names = {role: (f"'{col}'" if isinstance(col, str) else f"#{col}") for role, col in wanted.items()}
    if kind == "jsonl":
        values, lines = _pick_json(path, records, wanted, names, limit)
    else:
        values, lines = _pick_delimited(path, records, wanted, names, header, limit)
    if not lines:
        raise DataError(f"{path}: the file has a header but no data rows")
    return Rows(path, values, lines, names)


def _delimited_records(text: str, kind: str, comment: str | None) -> list[tuple[int, list[str]]]:
    out = []
    if kind == "tsv":
        # No quote processing: a quote is an ordinary character in TSV benchmark files.
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or (comment and line.startswith(comment)):
                continue
            out.append((number, line.split("\t")))
        return out
    reader = csv.reader(io.StringIO(text, newline=""))
    for fields in reader:
        number = reader.line_num  # line where the record ended; right for one-line records
        if not fields or not any(f.strip() for f in fields) or (comment and fields[0].startswith(comment)):
            continue
        out.append((number, fields))
    return out


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
            raise DataError(f"{path}: column '{col}' is given by name but the file is read without a header; give a 0-based index or set header: true")
        elif col not in head:
            raise DataError(f"{path}: line {head_line}: no column named '{col}' in the header (columns: {', '.join(head)})")
        else:
            index[role] = head.index(col)
    values: dict[str, list[str | None]] = {role: [] for role in wanted}
    lines = []
    for number, fields in records[:limit] if limit else records:
        for role, i in index.items():
            if i >= len(fields):
                raise DataError(f"{path}: line {number}: has {len(fields)} fields, no column {names[role]}")
            values[role].append(fields[i])
        lines.append(number)
    return values, lines


def _jsonl_records(path: Path, text: str, comment: str | None):
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (comment and line.startswith(comment)):
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: line {number}: not valid JSON ({err.msg})") from None
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
                    raise DataError(f"{path}: line {number}: no key '{col}' (keys: {', '.join(map(str, record))})")
                value = record[col]
            elif isinstance(record, list):
                if not isinstance(col, int):
                    raise DataError(f"{path}: line {number}: rows are JSON arrays; give column '{col}' as a 0-based index")
                if col >= len(record):
                    raise DataError(f"{path}: line {number}: has {len(record)} fields, no column {names[role]}")
                value = record[col]
            else:
                raise DataError(f"{path}: line {number}: expected a JSON object or array per line")
            values[role].append(None if value is None else value if isinstance(value, str) else json.dumps(value))
        lines.append(number)
    return values, lines
