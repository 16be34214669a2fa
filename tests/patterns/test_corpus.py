"""Reading extra sentences for the pattern statistics from txt, csv, tsv and jsonl files."""

from __future__ import annotations

import csv
import os
import types

import pytest

from reportgen.config import CorpusFile
from reportgen.errors import DataError
from reportgen.patterns import corpus
from reportgen.patterns.corpus import iter_corpus, iter_corpus_file, read_corpus
from tests.helpers import data_error


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def texts(examples):
    return [(e.text, e.pair) for e in examples]


def test_txt_one_sentence_per_line_blank_lines_skipped(tmp_path):
    path = write(tmp_path, "a.txt", "\ufeffFirst one.\n\n  Second one.  \r\nThird\n")
    out = read_corpus([CorpusFile(path=path)])
    assert texts(out) == [("First one.", None), ("Second one.", None), ("Third", None)]
    assert out[1].name == "a.txt:3"


def test_csv_column_and_pair_column_with_quotes(tmp_path):
    path = write(tmp_path, "a.csv", 'id,query,title\n1,cheap flights,"Flights, cheap"\n2,"multi\nline",t\n3,,x\n')
    out = read_corpus([CorpusFile(path=path, column="query", pair_column="title")])
    assert texts(out) == [("cheap flights", "Flights, cheap"), ("multi\nline", "t")]  # empty text skipped
    assert [e.name for e in out] == ["a.csv:2", "a.csv:3"]  # the line a record starts on


def test_tsv_single_column_needs_no_name(tmp_path):
    path = write(tmp_path, "a.tsv", "sentence\nOne, two.\nThree\n")
    assert texts(read_corpus([CorpusFile(path=path)])) == [("One, two.", None), ("Three", None)]


def test_jsonl_objects_and_strings(tmp_path):
    objects = write(tmp_path, "a.jsonl", '{"q": "a b", "t": "c"}\n\n{"q": "d", "t": null}\n')
    assert texts(read_corpus([CorpusFile(path=objects, column="q", pair_column="t")])) == [("a b", "c"), ("d", None)]
    strings = write(tmp_path, "b.ndjson", '"one"\n"two"\n')
    assert texts(read_corpus([CorpusFile(path=strings)])) == [("one", None), ("two", None)]


def test_several_files_limit_and_relative_paths(tmp_path):
    write(tmp_path, "a.txt", "1\n2\n3\n")
    write(tmp_path, "b.txt", "4\n")
    files = [CorpusFile(path="a.txt", limit=2), CorpusFile(path="b.txt", format="txt")]
    assert [e.text for e in read_corpus(files, base_dir=tmp_path)] == ["1", "2", "4"]


def test_reading_is_lazy(tmp_path):
    path = write(tmp_path, "a.txt", "ok\n" + "x" * 10 + "\n")
    stream = iter_corpus([CorpusFile(path=path)])
    assert isinstance(stream, types.GeneratorType)
    assert next(stream).text == "ok"


@pytest.mark.parametrize("name, content, spec, message", [
    ("missing.txt", None, {}, r"missing.txt: corpus file not found"),
    ("a.dat", "x\n", {}, r"a.dat: cannot tell the corpus format"),
    ("a.txt", b"ok\n\xff\xfe bad\n", {}, r"a.txt:2: not UTF-8 text"),
    ("a.txt", "x\n", {"column": "text"}, r"a.txt: a txt corpus has no columns"),
    ("a.csv", "a,b\n1,2\n", {}, r"a.csv:1: the table has 2 columns \(a, b\); set column"),
    ("a.csv", "a,b\n1,2\n", {"column": "text"}, r"a.csv:1: no column 'text' \(columns: a, b\)"),
    ("a.csv", "a,b\n1,2\n3\n", {"column": "a"}, r"a.csv:3: 1 fields, the header has 2"),
    ("a.csv", "", {"column": "a"}, r"a.csv: the table is empty"),
    ("a.jsonl", '{"q": "a"}\n{"q": \n', {"column": "q"}, r"a.jsonl:2: invalid JSON"),
    ("a.jsonl", '{"q": "a"}\n{"r": "b"}\n', {"column": "q"}, r"a.jsonl:2: no key 'q'"),
    ("a.jsonl", '["a"]\n', {"column": "q"}, r"a.jsonl:1: expected a JSON object"),
    ("a.jsonl", '{"q": 3}\n', {"column": "q"}, r"a.jsonl:1: the text must be a string, got int"),
    ("a.jsonl", '{"q": "a"}\n', {}, r"a.jsonl:1: the text must be a string, got dict"),
    # hostile files (issue 10): these were tracebacks, a hang, or a misleading line
    ("a.jsonl", "[" * 100_000 + "\n", {}, r"a.jsonl:1: invalid JSON: nested too deeply$"),
    ("a.jsonl", '"ok"\n' + "7" * 5000 + "\n", {}, r"a.jsonl:2: invalid JSON: a number has more than 4,300 digits$"),
    ("a.csv", 'text,n\nok,1\n"open,2\nmore,3\n', {"column": "text"},
     r"a.csv:3: unterminated quote \(the quoted field runs to the end of the file\)$"),
    ("a.csv", 'text,n\n"two\nlines",1\nok,"opens on 4\nrest\n', {"column": "text"}, r"a.csv:4: unterminated quote"),
    ("a.csv", 'text,n\n"open,1\n' + "row,2\n" * 200_000, {"column": "text"},
     r"a.csv:2: a quoted field runs on for more than 1,048,576 characters; is its closing quote missing\?$"),
    ("a.csv", 'text,n\n"quoted"tail,1\n', {"column": "text"}, r"""a.csv:2: malformed CSV: ',' expected after '"'$"""),
    ("a.csv", "text,n\nbare\rreturn,1\n", {"column": "text"},
     r"a.csv:2: a carriage return \(\\r\) inside an unquoted field; quote the field"),
    ("a.txt", b"ok\nx\x00y\n", {}, r"a.txt:2: holds a NUL byte, so it is not a text file \(binary, or UTF-16\?\)"),
    ("a.txt", "one\ntwo\n".encode("utf-16"), {}, r"a.txt:1: holds a NUL byte"),
    ("a.txt", "ok\n" + "x" * (1 << 20) + "y\n", {},
     r"a.txt:2: the text holds 1,048,577 characters, more than the 1,048,576 reportgen takes for one text"),
    ("a.csv", "text\nok\n" + "x" * (1 + (1 << 20)) + "\n", {},
     r"a.csv:3: a cell is longer than the 1,048,576 reportgen takes for one text"),
    ("a.jsonl", '{"q": "a", "t": "' + "x" * (1 + (1 << 20)) + '"}\n', {"column": "q", "pair_column": "t"},
     r"a.jsonl:1: the pair holds 1,048,577 characters"),
    ("a.csv", "te\x1b[2Jxt,n\nok,1\n", {}, r"a.csv:1: the table has 2 columns \(te\\x1b\[2Jxt, n\)"),
])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, name, content, spec, message):
    path = tmp_path / name if content is None else write(tmp_path, name, content)
    with pytest.raises(DataError, match=message) as err:
        list(iter_corpus_file(CorpusFile(path=path, **spec)))
    assert "\n" not in str(err.value)
    assert err.value.exit_code == 4


def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert data_error(lambda: read_corpus([CorpusFile(path=fifo)])) == (
        f"{fifo}: is not a regular file but a named pipe (FIFO); reportgen reads data only from regular files")
    assert "a character device" in data_error(lambda: read_corpus([CorpusFile(path="/dev/zero", format="txt")]))
    folder = tmp_path / "sentences"  # no suffix: named as a directory, not as an unknown format
    folder.mkdir()
    assert data_error(lambda: read_corpus([CorpusFile(path=folder)])) == f"{folder}: is a directory, not a corpus file"


def test_long_texts_up_to_the_limit_are_read(tmp_path):
    long = "word " * 40_000  # 200,000 characters: over csv's default field limit (131,072)
    limit = csv.field_size_limit()
    for name, text in (("a.csv", f'text\n"{long}"\nshort\n'), ("a.tsv", f"text\n{long}\nshort\n"),
                       ("a.txt", f"{long}\nshort\n")):
        assert [e.text for e in read_corpus([CorpusFile(path=write(tmp_path, name, text))])] == [long.strip(), "short"]
    assert csv.field_size_limit() == limit  # the module-wide limit is put back


def test_tsv_quotes_are_ordinary_characters(tmp_path):
    # STS-B: a sentence may open with a quote it never closes; it must not swallow the next lines.
    path = write(tmp_path, "a.tsv", 'text\tpair\n"So it begins.\tok\nnext\t"quoted" pair\r\n')
    out = read_corpus([CorpusFile(path=path, column="text", pair_column="pair")])
    assert texts(out) == [('"So it begins.', "ok"), ("next", '"quoted" pair')]
    assert [e.name for e in out] == ["a.tsv:2", "a.tsv:3"]


def test_blank_lines_before_the_header_and_line_separators_in_cells(tmp_path):
    path = write(tmp_path, "a.csv", "\n\ntext\none\u2028two\n")
    out = read_corpus([CorpusFile(path=path)])
    assert texts(out) == [("one\u2028two", None)] and out[0].name == "a.csv:4"


def test_a_line_without_end_is_refused_before_it_fills_the_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "MAX_LINE_BYTES", 1000)  # the real bound is 64 MiB; same code path
    path = write(tmp_path, "a.txt", "short\n" + "x" * 5000)
    assert data_error(lambda: read_corpus([CorpusFile(path=path)])) == (
        f"{path}:2: the line is longer than 1,000 bytes; a corpus file holds one sentence or table row per line")
