"""Reading extra sentences for the pattern statistics from txt, csv, tsv and jsonl files."""

from __future__ import annotations

import types

import pytest

from reportgen.config import CorpusFile
from reportgen.corpus import iter_corpus, iter_corpus_file, read_corpus
from reportgen.errors import DataError


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
    assert [e.name for e in out] == ["a.csv:2", "a.csv:4"]


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
])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, name, content, spec, message):
    path = tmp_path / name if content is None else write(tmp_path, name, content)
    with pytest.raises(DataError, match=message) as err:
        list(iter_corpus_file(CorpusFile(path=path, **spec)))
    assert "\n" not in str(err.value)
    assert err.value.exit_code == 4
