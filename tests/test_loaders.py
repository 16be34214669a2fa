"""Data loaders: CSV/TSV/JSONL, header or not, columns by name or index, and one-line errors."""

from __future__ import annotations

import pytest

from reportgen.errors import DataError
from reportgen.loaders import load_rows


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
    objects = _write(tmp_path, "o.jsonl", '{"s1": "x", "s2": "y", "score": 3}\n\n{"s1": "u", "s2": "v", "score": 2.5}\n')
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
    path = _write(tmp_path, "d.txt", "a\tb\n")
    with pytest.raises(DataError, match="set the format"):
        load_rows(path, {"a": 0})
    assert load_rows(path, {"a": 1}, fmt="tsv", header=False).texts("a") == ["b"]
