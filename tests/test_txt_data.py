"""Task data as a .txt file (issue 29): one text per line, beside CSV/TSV/JSONL (reportgen/datafiles.py).

A txt file holds texts and nothing else, so it is the data of a task that reads only texts (mlm); a task
that needs pairs, scores or labels is told, in one line naming the file and the config field, which
columns it needs. The corpus reader (patterns/corpus.py) reads the same file to the same texts.
"""

from __future__ import annotations

import pytest

from reportgen.config import CorpusFile, load_config
from reportgen.datafiles import detect_format, load_rows
from reportgen.errors import ConfigError
from tests.helpers import TWO_EXAMPLES, data_error, make_ablation_bert, write_config

# Blank and whitespace-only lines, CRLF and LF, a BOM, text in several scripts, an emoji, a tab inside a
# line (a txt file has no columns) and U+2028 (a line separator to str.splitlines, not to a text file).
MESSY = ("\ufeffthe cat sat on the mat.\r\n"
         "\r\n"
         "   \t  \n"
         "  café au lait, naïve résumé  \r\n"
         "東京は大きい。\n"
         "\n"
         "emoji 🙂 and a\ttab\n"
         "one\u2028line\n"
         "   ")
MESSY_TEXTS = ["the cat sat on the mat.", "café au lait, naïve résumé", "東京は大きい。", "emoji 🙂 and a\ttab",
               "one\u2028line"]
MESSY_LINES = [1, 4, 5, 7, 8]


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


# -- the reader ------------------------------------------------------------------------------------------
def test_a_txt_file_is_one_text_per_line(tmp_path):
    rows = load_rows(write(tmp_path, "texts.txt", MESSY), {"text": "text"})
    assert rows.texts("text") == MESSY_TEXTS
    assert rows.lines == MESSY_LINES  # physical lines, for messages
    assert len(rows) == 5


def test_every_line_is_a_text_the_header_setting_does_not_apply(tmp_path):
    path = write(tmp_path, "texts.text", "text\nsecond\n")
    assert detect_format(path) == "txt"
    assert load_rows(path, {"text": "text"}, header=True).texts("text") == ["text", "second"]
    assert load_rows(path, {"text": 0}, header=False, limit=1).texts("text") == ["text"]


def test_lone_carriage_returns_end_lines_too(tmp_path):
    rows = load_rows(write(tmp_path, "old-mac.txt", "first\rsecond\r\rthird"), {"text": "text"})
    assert rows.texts("text") == ["first", "second", "third"] and rows.lines == [1, 2, 4]


def test_format_txt_reads_any_file_as_lines(tmp_path):
    path = write(tmp_path, "notes.tsv", "a\tb\nc\td\n")
    assert load_rows(path, {"text": "text"}, fmt="txt").texts("text") == ["a\tb", "c\td"]
    assert load_rows(path, {"text": 1}, header=False).texts("text") == ["b", "d"]  # as TSV, from its suffix


@pytest.mark.parametrize("content, problem", [
    ("", "the file has no rows"),
    ("\n  \r\n\t\n", "the file has no rows"),
    (b"fine\ncaf\xe9\n", "line 2: not UTF-8 text (byte 0xe9); re-save the file as UTF-8"),
    (b"fine\nx\x00y\n", "line 2: holds a NUL byte, so it is not a text file (binary, or UTF-16?); save it as UTF-8 "
                        "text"),
])
def test_an_empty_or_broken_txt_file_is_one_line(tmp_path, content, problem):
    path = write(tmp_path, "texts.txt", content)
    assert data_error(lambda: load_rows(path, {"text": "text"})) == f"{path}: {problem}"


def test_a_line_longer_than_a_cell_is_refused_by_line(tmp_path):
    from reportgen.datafiles import MAX_CELL_CHARS

    path = write(tmp_path, "texts.txt", "ok\n" + "x" * (MAX_CELL_CHARS + 1) + "\n")
    assert data_error(lambda: load_rows(path, {"text": "text"})).startswith(
        f"{path}: line 2: column 'text': the cell holds 1,048,577 characters, more than the 1,048,576")


# -- a task that needs more than text --------------------------------------------------------------------
@pytest.mark.parametrize("columns, needed", [
    ({"text_a": "sentence1", "text_b": "sentence2", "score": "score"},
     "3 columns: text_a ('sentence1'), text_b ('sentence2'), score ('score')"),
    ({"text": "text", "pair": None, "label": "label"}, "2 columns: text ('text'), label ('label')"),
    ({"text": 0, "label": 1}, "2 columns: text (#0), label (#1)"),
])
def test_a_task_that_needs_columns_is_told_which(tmp_path, columns, needed):
    path = write(tmp_path, "pairs.txt", "a sentence\nanother\n")
    assert data_error(lambda: load_rows(path, columns)) == (
        f"{path}: a .txt file gives only text, one per line, but the task needs {needed}; give a csv, tsv or jsonl "
        "file with them (config field 'ablation.data')")


def test_a_column_index_past_the_line_is_refused(tmp_path):
    path = write(tmp_path, "texts.txt", "a sentence\n")
    assert data_error(lambda: load_rows(path, {"text": 2})) == (
        f"{path}: a .txt file has one column (0), the line; column 2 for text is not in it "
        "(config field 'ablation.data')")


def test_other_extensions_still_need_a_format(tmp_path):
    path = write(tmp_path, "texts.dat", "a\n")
    assert data_error(lambda: load_rows(path, {"text": "text"})) == (
        f"{path}: cannot tell the format from the extension '.dat'; set the format (txt, csv, tsv or jsonl)")


# -- through the config and the task loader --------------------------------------------------------------
def test_the_config_takes_format_txt(tmp_path):
    write(tmp_path, "texts.txt", "a\n")
    config = load_config(write_config(tmp_path, "ablation: {task: mlm, data: texts.txt, format: txt}\n"))
    assert config.ablation.format == "txt" and config.ablation.data == str(tmp_path / "texts.txt")
    with pytest.raises(ConfigError, match="field 'ablation.format': Input should be 'auto', 'txt', 'csv', 'tsv' or "
                                          "'jsonl'"):
        load_config(write_config(tmp_path, "ablation: {task: mlm, data: texts.txt, format: text}\n"))


def test_the_task_loader_refuses_a_txt_file_before_loading_the_model(tmp_path):
    from reportgen.ablation.task_loading import load_task

    path = write(tmp_path, "pairs.txt", "a sentence\n")
    message = data_error(lambda: load_task("similarity", tmp_path / "no-model", path))
    assert message.startswith(f"{path}: a .txt file gives only text, one per line, but the task needs 3 columns")
    message = data_error(lambda: load_task("classification", tmp_path / "no-model", path))
    assert "but the task needs 2 columns: text ('text'), label ('label')" in message


def test_an_mlm_task_reads_its_texts_from_a_txt_file(tmp_path):
    from reportgen.ablation.task_loading import load_task

    model = make_ablation_bert(tmp_path / "mlm", "BertForMaskedLM")
    path = write(tmp_path, "texts.txt", MESSY)
    task = load_task("mlm", model, path, mlm_seed=1)
    assert task.n_examples == len(MESSY_TEXTS) and len(task.units) == len(MESSY_TEXTS)
    assert task.settings["data"] == str(path)


def test_the_corpus_reads_a_txt_file_to_the_same_texts(tmp_path):
    from reportgen.patterns.corpus import read_corpus

    path = write(tmp_path, "texts.txt", MESSY)
    examples = read_corpus([CorpusFile(path=path)])
    assert [example.text for example in examples] == MESSY_TEXTS
    assert [example.name for example in examples] == [f"texts.txt:{line}" for line in MESSY_LINES]


@pytest.mark.slow
def test_a_site_with_an_mlm_task_on_txt_data(tmp_path):
    from reportgen.pipeline import build

    model = make_ablation_bert(tmp_path / "mlm-model", "BertForMaskedLM")
    write(tmp_path, "texts.txt", MESSY)
    text = (f"model: {model}\ndevice: cpu\nexamples: {list(TWO_EXAMPLES)!r}\n"
            "ablation: {task: mlm, data: texts.txt, seeds: [0], fractions: [0.0, 0.5], bootstrap_samples: 100, "
            "permutations: 100, experiments: {random_fraction: false, layer_halves: false, importance: false}}\n")
    report = build(load_config(write_config(tmp_path, text)), reproducible=True).report
    assert report.ablation.task.type == "mlm" and report.ablation.task.data == "texts.txt"
    assert report.ablation.task.examples == len(MESSY_TEXTS)
