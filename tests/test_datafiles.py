"""Data loaders: CSV/TSV/JSONL, header or not, columns by name or index, and one-line errors."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from reportgen.datafiles import MAX_CELL_CHARS, CsvProblem, csv_records, load_rows, open_data_file, tsv_records
from reportgen.errors import DataError
from tests.helpers import data_error


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_tsv_keeps_unbalanced_quotes_and_reads_by_index(tmp_path):
    # STS-B style: a lone quote must not swallow the following lines.
    path = _write(tmp_path, "d.tsv", 'g\tf\t2012\t1\t4.5\tHe said "hi.\tHe said hi.\ng\tf\t2012\t2\t1.0\tA "b" c\tX\n')
    rows = load_rows(path, {"a": 5, "b": 6, "score": 4}, header=False)
    assert rows.texts("a") == ['He said "hi.', 'A "b" c']
    assert rows.floats("score").tolist() == [4.5, 1.0]
    assert rows.lines == [1, 2]


def test_the_shared_parsers_number_records_by_their_first_line():
    # loaders and corpus both parse with these: the TSV one drops only the line break, quotes stay text
    limit = csv.field_size_limit()
    assert list(tsv_records([(3, 'a "b\tc\r\n'), (4, "d")])) == [(3, ['a "b', "c"]), (4, ["d"])]
    assert list(csv_records(['a,"b\n', 'c",d\n', "e,f\n"])) == [(1, ["a", "b\nc", "d"]), (3, ["e", "f"])]
    with pytest.raises(CsvProblem) as problem:
        list(csv_records(["a,b\n", 'c,"d\n', "e\n"]))
    assert problem.value.line == 2 and "unterminated quote" in str(problem.value)
    assert csv.field_size_limit() == limit  # raised only while a record is read


def test_csv_with_header_by_name_and_quoted_commas(tmp_path):
    path = _write(tmp_path, "d.csv", 'text,label\n"hello, world",pos\nbye,neg\n')
    rows = load_rows(path, {"text": "text", "label": "label"})
    assert rows.texts("text") == ["hello, world", "bye"]
    assert rows.texts("label") == ["pos", "neg"]
    assert rows.lines == [2, 3]


def test_csv_without_header_by_index_and_limit(tmp_path):
    path = _write(tmp_path, "d.csv", "a,1\nb,2\nc,3\n")
    rows = load_rows(path, {"text": 0, "label": 1}, header=False, limit=2)
    assert rows.texts("text") == ["a", "b"]


def test_jsonl_objects_and_arrays(tmp_path):
    objects = _write(tmp_path, "o.jsonl",
                     '{"s1": "x", "s2": "y", "score": 3}\n\n{"s1": "u", "s2": "v", "score": 2.5}\n')
    rows = load_rows(objects, {"a": "s1", "b": "s2", "score": "score"})
    assert rows.texts("b") == ["y", "v"] and rows.floats("score").tolist() == [3.0, 2.5]
    assert rows.lines == [1, 3]
    arrays = _write(tmp_path, "a.jsonl", '["x", "y", 1]\n')
    assert load_rows(arrays, {"a": 0, "score": 2}).floats("score").tolist() == [1.0]
    with pytest.raises(DataError, match=r"a\.jsonl: line 1: rows are JSON arrays"):
        load_rows(arrays, {"a": "s1"})


def test_comment_lines_are_skipped_when_asked(tmp_path):
    path = _write(tmp_path, "d.tsv", "# note\nq\tt\tg\nx\ty\t5\n")
    rows = load_rows(path, {"q": "q", "g": "g"}, comment="#")
    assert rows.texts("q") == ["x"] and rows.lines == [3]


def test_bad_encoding_names_file_and_line(tmp_path):
    path = _write(tmp_path, "d.tsv", "a\tb\n" + "ok\tfine\n" + "caf", "utf-8")
    path.write_bytes(path.read_bytes() + b"\xe9\tx\n")  # Latin-1 e-acute
    with pytest.raises(DataError) as err:
        load_rows(path, {"a": 0}, header=False)
    message = str(err.value)
    assert "d.tsv" in message and "line 3" in message and "UTF-8" in message and "\n" not in message


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_rows(tmp_path / "nope.csv", {"a": 0})
    empty = _write(tmp_path, "e.csv", "")
    with pytest.raises(DataError, match="e.csv: the file has no rows"):
        load_rows(empty, {"a": 0})
    only_header = _write(tmp_path, "h.csv", "a,b\n")
    with pytest.raises(DataError, match="header but no data rows"):
        load_rows(only_header, {"a": "a"})


def test_missing_columns(tmp_path):
    path = _write(tmp_path, "d.csv", "text,label\nx,1\ny\n")
    with pytest.raises(DataError, match=r"d\.csv: line 1: no column named 'score'.*columns: text, label"):
        load_rows(path, {"score": "score"})
    with pytest.raises(DataError, match=r"line 3: has 1 fields, no column 'label'"):
        load_rows(path, {"label": "label"})
    with pytest.raises(DataError, match="given by name but the file is read without a header"):
        load_rows(path, {"text": "text"}, header=False)
    with pytest.raises(DataError, match=r"o\.jsonl: line 1: no key 'label'"):
        load_rows(_write(tmp_path, "o.jsonl", '{"text": "x"}\n'), {"label": "label"})


@pytest.mark.parametrize("bad", ["nan", "NaN", "abc", "inf", ""])
def test_non_numeric_or_nan_scores_are_refused_by_line(tmp_path, bad):
    path = _write(tmp_path, "d.tsv", f"a\tscore\nx\t1\ny\t{bad}\n")
    rows = load_rows(path, {"a": "a", "score": "score"})
    with pytest.raises(DataError, match=r"d\.tsv: line 3: column 'score'"):
        rows.floats("score")


def test_json_nan_and_null_are_refused(tmp_path):
    rows = load_rows(_write(tmp_path, "n.jsonl", '{"s": NaN, "t": null}\n'), {"s": "s", "t": "t"})
    with pytest.raises(DataError, match="line 1: column 's'"):
        rows.floats("s")
    with pytest.raises(DataError, match="line 1: column 't' is empty"):
        rows.texts("t")


def test_unknown_extension_needs_a_format(tmp_path):
    path = _write(tmp_path, "d.dat", "a\tb\n")  # (.txt is one text per line: tests/test_txt_data.py)
    with pytest.raises(DataError, match="set the format"):
        load_rows(path, {"a": 0})
    assert load_rows(path, {"a": 1}, fmt="tsv", header=False).texts("a") == ["b"]


# -- hostile files (issue 10): every one ends in one line naming the file, never a traceback or a hang --
LONG = "word " * 40_000  # 200,000 characters: over csv's default field limit (131,072)


@pytest.mark.parametrize("name, text", [
    ("d.csv", f'text,score\n"{LONG}",1\nshort,2\n'),
    ("d.tsv", f"text\tscore\n{LONG}\t1\nshort\t2\n"),
    ("d.jsonl", json.dumps({"text": LONG, "score": 1}) + "\n" + json.dumps({"text": "short", "score": 2}) + "\n"),
])
def test_a_long_cell_is_read_in_every_format(tmp_path, name, text):
    limit = csv.field_size_limit()
    rows = load_rows(_write(tmp_path, name, text), {"text": "text", "score": "score"})
    assert rows.texts("text") == [LONG, "short"] and rows.floats("score").tolist() == [1.0, 2.0]
    assert csv.field_size_limit() == limit  # the module-wide limit is put back


@pytest.mark.parametrize("name, text, message", [
    ("d.csv", "text,score\nok,1\n" + "x" * (MAX_CELL_CHARS + 1) + ",2\n",
     r"d\.csv: line 3: a cell is longer than the 1,048,576 reportgen takes for one text"),
    ("d.tsv", "text\tscore\nok\t1\n" + "x" * (MAX_CELL_CHARS + 1) + "\t2\n",
     r"d\.tsv: line 3: column 'text': the cell holds 1,048,577 characters, more than the 1,048,576"),
    ("d.jsonl", '{"text": "ok"}\n' + json.dumps({"text": "x" * (MAX_CELL_CHARS + 1)}) + "\n",
     r"d\.jsonl: line 2: column 'text': the cell holds 1,048,577 characters"),
])
def test_a_cell_over_the_limit_is_refused_by_line(tmp_path, name, text, message):
    assert re.search(message, data_error(lambda: load_rows(_write(tmp_path, name, text), {"text": "text"})))


def test_an_exactly_full_cell_is_read(tmp_path):
    full = "x" * MAX_CELL_CHARS
    path = _write(tmp_path, "d.csv", f"text\n{full}\n")
    assert load_rows(path, {"text": "text"}).texts("text") == [full]


@pytest.mark.parametrize("text, line", [
    ('text,score\nok,1\n"never closed,2\nmore,3\n', 3),
    ('text,score\nok,"two\nlines"\n"opens here,2\nmore,3\n', 4),  # the record before spans lines 2-3
    ('text,score\nok,"closed\nacross lines","opens on line 3\nrest\n', 3),  # same record, second quote
])
def test_an_unterminated_quote_names_the_line_where_it_opened(tmp_path, text, line):
    message = data_error(lambda: load_rows(_write(tmp_path, "d.csv", text), {"text": "text"}))
    assert message.endswith(f"d.csv: line {line}: unterminated quote (the quoted field runs to the end of the file)")


def test_an_open_quote_in_a_big_file_is_named_before_the_memory_fills(tmp_path):
    path = _write(tmp_path, "d.csv", 'text,score\nok,1\n"open,2\n' + "row,3\n" * 200_000)
    assert data_error(lambda: load_rows(path, {"text": "text"})).endswith(
        "d.csv: line 3: a quoted field runs on for more than 1,048,576 characters; is its closing quote missing?")


def test_text_after_a_closing_quote_is_malformed_csv(tmp_path):
    path = _write(tmp_path, "d.csv", 'text,score\n"quoted"tail,1\n')
    assert data_error(lambda: load_rows(path, {"text": "text"})).endswith(
        """d.csv: line 2: malformed CSV: ',' expected after '"'""")


def test_records_are_numbered_by_the_line_they_start_on(tmp_path):
    path = _write(tmp_path, "d.csv", 'text,score\n"two\nlines",1\nnext,2\n')
    rows = load_rows(path, {"text": "text"})
    assert rows.texts("text") == ["two\nlines", "next"] and rows.lines == [2, 4]


def test_only_regular_files_are_opened(tmp_path):
    fifo = tmp_path / "pipe.tsv"
    os.mkfifo(fifo)
    assert data_error(lambda: load_rows(fifo, {"a": 0})) == (
        f"{fifo}: is not a regular file but a named pipe (FIFO); reportgen reads data only from regular files")
    link = tmp_path / "link.tsv"
    link.symlink_to(fifo)
    assert "is not a regular file but a named pipe" in data_error(lambda: load_rows(link, {"a": 0}))
    device = data_error(lambda: load_rows("/dev/null", {"a": 0}, fmt="tsv"))
    assert "is not a regular file but a character device" in device
    folder = tmp_path / "data.tsv"
    folder.mkdir()
    assert data_error(lambda: load_rows(folder, {"a": 0})) == f"{folder}: is a directory, not a data file"
    loop = tmp_path / "loop.tsv"
    loop.symlink_to(loop)
    assert data_error(lambda: load_rows(loop, {"a": 0})) == f"{loop}: the data file is a symlink loop"
    assert data_error(lambda: load_rows("a\x00b.tsv", {"a": 0})) == (
        "a\\x00b.tsv: the data file name holds a NUL character")


def test_open_data_file_reads_a_regular_file(tmp_path):
    path = _write(tmp_path, "d.bin", b"\x00\x01 bytes")
    with open_data_file(path) as handle:
        assert handle.read() == b"\x00\x01 bytes"
    assert data_error(lambda: open_data_file(tmp_path / "gone.bin")) == f"{tmp_path / 'gone.bin'}: file not found"


@pytest.mark.parametrize("content, line", [
    (b"a\tb\nok\tx\x00y\n", 2),  # a NUL byte in a text cell
    ("a\tb\n".encode("utf-16"), 1),  # UTF-16 with its BOM: NULs between the ASCII letters
    ("a\tb\nc\td\n".encode("utf-16-le"), 1),  # UTF-16 without a BOM: valid UTF-8, NULs only
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 3),  # binary junk (csv counts \r\n as one line break)
])
def test_nul_bytes_mean_not_a_text_file(tmp_path, content, line):
    assert data_error(lambda: load_rows(_write(tmp_path, "d.tsv", content), {"a": 0}, header=False)).endswith(
        f"d.tsv: line {line}: holds a NUL byte, so it is not a text file (binary, or UTF-16?); save it as UTF-8 text")


def test_invalid_utf8_junk_is_named_by_line(tmp_path):
    path = _write(tmp_path, "d.csv", b"text\nok\n\xff\xfe\xfa junk\n")
    assert data_error(lambda: load_rows(path, {"text": "text"})).endswith(
        "d.csv: line 3: not UTF-8 text (byte 0xff); re-save the file as UTF-8")


@pytest.mark.parametrize("name, text", [
    ("d.csv", "\ufefftext,score\r\nfirst,1\r\n\r\nsecond,2\r\n"),
    ("d.tsv", "\ufefftext\tscore\r\nfirst\t1\r\n\r\nsecond\t2\r\n"),
    ("d.jsonl", '\ufeff{"text": "first", "score": 1}\r\n\r\n{"text": "second", "score": 2}\r\n'),
])
def test_bom_crlf_and_blank_lines(tmp_path, name, text):
    rows = load_rows(_write(tmp_path, name, text), {"text": "text", "score": "score"})
    assert rows.texts("text") == ["first", "second"] and rows.floats("score").tolist() == [1.0, 2.0]
    assert rows.lines == ([2, 4] if name != "d.jsonl" else [1, 3])


def test_unicode_line_separators_stay_inside_their_cell(tmp_path):
    # str.splitlines would break these rows apart; csv and JSON do not.
    tsv = _write(tmp_path, "d.tsv", "text\tscore\none\u2028two\t1\npage\x0cbreak\t2\nlast\t3\n")
    rows = load_rows(tsv, {"text": "text", "score": "score"})
    assert rows.texts("text") == ["one\u2028two", "page\x0cbreak", "last"] and rows.lines == [2, 3, 4]
    jsonl = _write(tmp_path, "d.jsonl", '{"text": "one\u2028two"}\n{"text": "x"}\n')
    assert load_rows(jsonl, {"text": "text"}).lines == [1, 2]


@pytest.mark.parametrize("text, problem", [
    ("[" * 100_000 + "\n", "line 1: not valid JSON (nested too deeply)"),
    ('{"text": "a", "n": ' + "9" * 5000 + "}\n", "line 1: not valid JSON (a number has more than 4,300 digits)"),
    ('{"text": "a"}\n"just a string"\n', "line 2: expected a JSON object or array per line, got a string"),
    ('{"text": "a"}\n42\n', "line 2: expected a JSON object or array per line, got a number"),
    ('{"text": "a"}\n{"text": \n', "line 2: not valid JSON (Expecting value)"),
])
def test_json_python_cannot_read_is_one_line(tmp_path, text, problem):
    path = _write(tmp_path, "d.jsonl", text)
    assert data_error(lambda: load_rows(path, {"text": "text"})).endswith(f"d.jsonl: {problem}")


def test_control_characters_from_a_file_are_escaped_in_messages(tmp_path):
    path = _write(tmp_path, "d.tsv", "te\x1b[31mxt\tscore\nx\t\x1b]0;owned\x07\n")
    message = data_error(lambda: load_rows(path, {"score": "text"}))
    assert "\x1b" not in message and "columns: te\\x1b[31mxt, score" in message
    rows = load_rows(path, {"score": "score"})
    message = data_error(lambda: rows.floats("score"))
    assert "\x1b" not in message and "\x07" not in message and "'\\x1b]0;owned\\x07' is not a number" in message


def test_a_wide_header_is_listed_in_part(tmp_path):
    path = _write(tmp_path, "d.csv", ",".join(f"c{i}" for i in range(100)) + "\n" + ",".join("x" * 100) + "\n")
    message = data_error(lambda: load_rows(path, {"score": "score"}))
    assert message.endswith("(columns: " + ", ".join(f"c{i}" for i in range(30)) + ", ... (100 in all))")
