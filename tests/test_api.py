"""The Python API (issue 29): `reportgen.build` does what `reportgen build` does and returns the report;
`Report.load` reads a published report.json back (its schema version checked first); `heads_frame` lays
the per-head numbers out one row per head. `import reportgen` stays light: no torch until a build runs.

The fast tests check the errors and the import; the slow ones build one tiny site through the API.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import reportgen
from reportgen import api
from reportgen.errors import ConfigError, DataError, ReportgenError
from reportgen.report import SCHEMA_VERSION, MissingExtra, Report, head_statistics
from tests.helpers import ROOT, SINGLE_HEADS_ABLATION, TWO_EXAMPLES, check_report, pythonpath

ABLATION = {**SINGLE_HEADS_ABLATION, "importance": {"random_orders": 3},
            "experiments": {**SINGLE_HEADS_ABLATION["experiments"], "importance": True}}


# -- import ------------------------------------------------------------------------------------------
@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_import_reportgen_loads_no_torch():
    """`import reportgen`, and reaching its API names, imports neither torch nor the pipeline."""
    code = ("import sys, reportgen\nprint('torch' in sys.modules)\nreportgen.build, reportgen.Report\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'pandas') "
            "or m.startswith(('reportgen.pipeline', 'reportgen.model', 'reportgen.site'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.split("\n", 2)[:2] == ["False", "[]"]


# A mistake a build meets before its first stage's work: one line, its exit code, and nothing heavy imported by then.
BEFORE_TORCH = {
    "missing model": ("model: ./no-such-model\nexamples: [{text: hi}]\n", 3,
                      "no-such-model does not exist (config field 'model')"),
    "missing data": ("examples: [{text: hi}]\nablation: {data: missing.tsv}\n", 4, "missing.tsv: data file not found"),
    "no examples": ("examples: []\n", 4, "field 'examples': the list is empty"),
}


@pytest.mark.slow  # a subprocess: the fast tier stays under a minute
@pytest.mark.parametrize("case", list(BEFORE_TORCH))
def test_a_build_stopped_before_the_model_stage_imports_neither_torch_nor_the_site(tmp_path, case):
    """`reportgen build` on such a mistake answers in a fraction of a second, not after the 2 s of importing
    torch, Ray, Altair and MkDocs (issue 44; the ablation's data check lives in the torch-free
    reportgen.ablation.task_checks). Run as `python -m reportgen` runs it, the modules listed at exit."""
    config, code, words = BEFORE_TORCH[case]
    (tmp_path / "reportgen.yaml").write_text(config, encoding="utf-8")
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
              "('torch', 'ray', 'altair', 'mkdocs', 'transformers')} | {m for m in sys.modules if m in "
              "('reportgen.ablation.tasks', 'reportgen.ablation.engine', 'reportgen.site.writer')})))\n"
              "sys.argv = ['reportgen', 'build']\nimport runpy\nrunpy.run_module('reportgen', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": pythonpath(), "NO_COLOR": "1"}, timeout=120)
    assert done.returncode == code, done.stderr
    assert done.stderr.splitlines() == [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_the_api_names_are_the_modules_own():
    """(`reportgen.build` in a fresh process below: in this one, the pipeline module may be imported.)"""
    from reportgen import report

    assert reportgen.Report is report.Report
    with pytest.raises(AttributeError):
        reportgen.no_such_name  # noqa: B018 - the attribute access is the test


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_reportgen_build_stays_the_function_once_the_pipeline_is_imported():
    """A submodule named `build` (the pipeline was reportgen/build.py) would replace the package's attribute
    once imported, as the first build does, and a second `reportgen.build(...)` would call a module. The
    API name must not depend on what was imported: the pipeline is reportgen/pipeline/, whose driver is driver.py."""
    code = ("import reportgen\nfirst = reportgen.build\nimport reportgen.pipeline\n"
            "print(callable(reportgen.build), first is reportgen.build)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.split() == ["True", "True"]


# -- build: a config given as a dict is checked as a file is -----------------------------------------
def one_line(err: ReportgenError) -> str:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("config, kind, message", [
    ({"titel": "x"}, ConfigError, "config dict: unknown key 'titel'"),
    ({"ablation": {"enabeld": False}}, ConfigError, "config dict: unknown key 'ablation.enabeld'"),
    ({"max_length": "long"}, ConfigError, "config dict: field 'max_length': Input should be a valid integer"),
    ({"source": "x.yaml"}, ConfigError, "config dict: unknown key 'source'"),
    ({"ablation": {"task": "classification"}}, ConfigError,
     "config dict: field 'ablation.data': the builtin demo set is a similarity task"),
])
def test_a_config_dict_is_refused_in_one_line(tmp_path, monkeypatch, config, kind, message):
    """The loader of reportgen.yaml checks the dict: the same messages, the file named "config dict"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(kind) as err:
        api.build(config=config, out=tmp_path / "site")
    assert one_line(err.value).startswith(message) and err.value.exit_code == 2
    assert not (tmp_path / "site").exists()


@pytest.mark.slow  # imports transformers' model code (~5 s): out of the fast tier
def test_what_the_build_checks_is_said_as_for_a_file(tmp_path, monkeypatch):
    """Zero examples pass the config's schema and stop the build before any model is looked for."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as err:
        api.build(config={"examples": [], "model": str(tmp_path / "no-model")}, out=tmp_path / "site")
    assert one_line(err.value) == "config dict: field 'examples': the list is empty; give at least one example"
    assert err.value.exit_code == 4 and not (tmp_path / "site").exists()


def test_the_same_mistake_reads_the_same_from_a_file_and_a_dict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reportgen.yaml").write_text("max_length: long\n", encoding="utf-8")
    with pytest.raises(ConfigError) as from_file:
        api.build(config="reportgen.yaml")
    with pytest.raises(ConfigError) as from_none:  # None: ./reportgen.yaml, as `reportgen build` finds it
        api.build()
    with pytest.raises(ConfigError) as from_dict:
        api.build(config={"max_length": "long"})
    assert str(from_file.value) == str(from_none.value) == str(from_dict.value).replace("config dict", "reportgen.yaml")


def test_a_missing_config_file_and_a_wrong_kind_of_config(tmp_path):
    with pytest.raises(ConfigError) as err:
        api.build(config=tmp_path / "nope.yaml")
    assert one_line(err.value) == f"{tmp_path / 'nope.yaml'}: config file not found"
    with pytest.raises(TypeError, match="expected a path to a reportgen.yaml, a dict of config keys or None"):
        api.build(config=["model: x"])


def test_a_dict_takes_paths_relative_to_the_current_directory(tmp_path, monkeypatch):
    from reportgen.api import _config

    monkeypatch.chdir(tmp_path)
    config = _config({"output": "out", "cache_dir": Path("cache"), "ablation": {"data": "pairs.tsv"},
                      "patterns": {"corpus": [{"path": Path("corpus.txt")}]}, "examples": ("builtin",)})
    assert config.output == tmp_path / "out" and config.cache_dir == tmp_path / "cache"
    assert config.ablation.data == str(tmp_path / "pairs.tsv")
    assert config.patterns.corpus[0].path == tmp_path / "corpus.txt"
    assert config.base_dir == tmp_path and config.source == "config dict" and len(config.examples) > 1


# -- Report.load: one line for a file that is not this reportgen's report ------------------------------
def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize("content, problem", [
    ('{"schema_version": 1, "title": "old"}', "schema version 1, this reportgen reads 4; rebuild the site with "
                                              "this reportgen"),
    ('{"schema_version": 5}', "schema version 5, this reportgen reads 4; upgrade reportgen to read it"),
    ('{"schema_version": "4"}', 'schema version "4", this reportgen reads 4; rebuild the site with this reportgen'),
    ('{"title": "x"}', "not a reportgen report (no schema_version at the top level)"),
    ("[1, 2]", "not a reportgen report (no schema_version at the top level)"),
    ("<html></html>", "not valid JSON (Expecting value at line 1, column 1), so not a reportgen report.json"),
    ('{"schema_version": 3,', "not valid JSON (Expecting property name enclosed in double quotes at line 1, "
                              "column 22), so not a reportgen report.json"),
    (b'{"title": "\xe9"}', "not UTF-8 text (byte 0xe9 at offset 11), so not a reportgen report.json"),
    ("", "not valid JSON (Expecting value at line 1, column 1), so not a reportgen report.json"),
    ('{"schema_version": 4, "title": "x"}', "not a valid report of schema version 4: key 'site_url': Field required "
                                            "(and 12 more problems)"),
])
def test_load_refuses_what_is_not_a_report_of_this_version(tmp_path, content, problem):
    path = write(tmp_path / "report.json", content)
    with pytest.raises(DataError) as err:
        Report.load(path)
    assert one_line(err.value) == f"{path}: {problem}" and err.value.exit_code == 4


def test_the_version_is_checked_before_the_records(tmp_path):
    """A report of another version is named as one, however much of the rest differs."""
    path = write(tmp_path / "report.json", json.dumps({"schema_version": SCHEMA_VERSION - 1, "heads": "many"}))
    with pytest.raises(DataError, match=f"schema version {SCHEMA_VERSION - 1}, this reportgen reads {SCHEMA_VERSION}"):
        Report.load(str(path))


def test_load_of_a_missing_file_or_a_folder_without_a_report(tmp_path):
    with pytest.raises(DataError) as missing:
        Report.load(tmp_path / "site" / "report.json")
    assert one_line(missing.value) == (f"{tmp_path / 'site' / 'report.json'}: report file not found; "
                                       "build the site first (reportgen build)")
    with pytest.raises(DataError) as folder:
        Report.load(tmp_path)
    assert one_line(folder.value) == f"{tmp_path}: is a directory without a report.json, not a report file"


def test_heads_frame_without_pandas_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    with pytest.raises(MissingExtra) as err:
        Report.model_construct().heads_frame()
    assert isinstance(err.value, ReportgenError) and isinstance(err.value, ImportError)
    assert one_line(err.value) == 'Report.heads_frame needs pandas: pip install "reportgen[pandas]"'


# -- one tiny site built through the API ---------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_model) -> tuple[Report, Path]:
    """A tiny random BERT's site built by `reportgen.api.build(config=dict, out=...)` from a scratch directory
    (the dict's relative paths, the cache among them, are taken from the current directory)."""
    project = tmp_path_factory.mktemp("api-project")
    config = {"title": "Tiny API", "model": tiny_model, "device": "cpu", "max_length": 128, "examples": TWO_EXAMPLES,
              "ablation": ABLATION, "output": "unused"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        report = api.build(config=config, out=project / "site", reproducible=True)
    assert (project / ".reportgen-cache").is_dir() and not (project / "unused").exists()
    return report, project / "site"


@pytest.mark.slow
def test_a_dict_configs_cache_entries_are_kept_by_prune(built, tiny_model):
    """A dict names no config file: its build is recorded as the directory's (as the defaults are), so
    `cache prune` from that directory keeps what the build used instead of taking the name for a file."""
    from reportgen.cache.prune import plan_prune
    from reportgen.config import DICT_SOURCE, config_from_mapping

    project = built[1].parent
    config = config_from_mapping({"model": str(tiny_model)}, DICT_SOURCE, project)
    assert config.config_file is None
    plan = plan_prune(config)
    assert plan.keep and plan.remove == []


@pytest.mark.slow
@pytest.mark.parametrize("change, problem", [
    ({"heads": 1_000_000_000}, "2 layers x 1000000000 heads: a report holds 1 to 1,000,000 heads"),
    ({"layers": -3}, "-3 layers x 4 heads: a report holds 1 to 1,000,000 heads"),
    ({"heads": 5}, "'statistics.labels' is not a grid of at most 2 layers of 5 heads"),
    ({"layers": 1}, "'statistics.labels' is not a grid of at most 1 layers of 4 heads"),
    ({"groups": ["encoder"]}, "'groups' names 1 layers, the model has 2"),
])
def test_load_checks_the_sizes_a_report_states_before_making_anything_of_them(built, tmp_path, change, problem):
    """Issue 48: a report.json whose `heads` was 1,000,000,000 loaded, and `heads_frame()` grew to 21.7 GB until the
    kernel killed it. The model's size, its groups and each atlas's grid must agree, within MAX_HEADS."""
    data = json.loads((built[1] / "report.json").read_text(encoding="utf-8"))
    path = write(tmp_path / "report.json", json.dumps({**data, **change}))
    with pytest.raises(DataError) as err:
        Report.load(path)
    assert one_line(err.value) == (f"{path}: not a valid report of schema version {SCHEMA_VERSION}: "
                                   f"key '(top level)': Value error, {problem}")


@pytest.mark.slow
def test_build_returns_the_report_it_writes(built):
    report, site = built
    assert isinstance(report, Report)
    data = check_report(site)
    assert data == json.loads(report.to_json())
    assert [example.model_dump(mode="json") for example in report.examples] == data["examples"]
    assert [(e.text, e.pair) for e in report.examples] == [(e["text"], e.get("pair")) for e in TWO_EXAMPLES]
    assert report.title == "Tiny API" and report.built is None and (report.layers, report.heads) == (2, 4)


@pytest.mark.slow
def test_load_round_trips_a_built_report(built):
    report, site = built
    loaded = Report.load(site / "report.json")
    assert loaded == report and loaded.to_json() == (site / "report.json").read_text(encoding="utf-8")
    assert Report.load(str(site)) == report  # the site folder names its report.json


@pytest.mark.slow
def test_load_refuses_a_built_report_of_another_version(built, tmp_path):
    _, site = built
    data = json.loads((site / "report.json").read_text(encoding="utf-8"))
    path = write(tmp_path / "report.json", json.dumps({**data, "schema_version": 1}))
    with pytest.raises(DataError) as err:
        Report.load(path)
    assert one_line(err.value) == (f"{path}: schema version 1, this reportgen reads {SCHEMA_VERSION}; "
                                   "rebuild the site with this reportgen")


def same(value, expected) -> bool:
    return (expected is None and math.isnan(value)) or value == expected


@pytest.mark.slow
def test_heads_frame_has_one_row_per_head_with_the_reports_numbers(built):
    report, _ = built
    frame = report.heads_frame()
    statistics, single = report.statistics, report.ablation.single_heads
    assert len(frame) == report.layers * report.heads == 8
    assert not frame.duplicated(["layer", "head"]).any()
    pairs = [(layer, head) for layer in range(2) for head in range(4)]
    assert list(zip(frame["layer"], frame["head"], strict=True)) == pairs  # frame.head is DataFrame.head()
    expected = ["layer", "head", "label"]
    for name in head_statistics():
        expected += [name, f"{name}_null"]
    expected += ["ablation_value", "ablation_delta", "ablation_relative", "ablation_p_value", "ablation_p_adjusted",
                 "ablation_significant", "importance"]
    assert list(frame.columns) == expected
    assert {"previous_token", "entropy", "within_word", "cls_sep"} <= set(head_statistics())
    for row in frame.itertuples(index=False):
        layer, head = row.layer, row.head
        assert row.label == statistics.labels[layer][head]
        for name in head_statistics():
            assert same(getattr(row, name), getattr(statistics, name).mean[layer][head]), name
            assert same(getattr(row, f"{name}_null"), statistics.nulls[name].uniform), name
        for key in ("value", "delta", "relative", "p_value", "p_adjusted"):
            assert same(getattr(row, f"ablation_{key}"), getattr(single, key)[layer][head]), key
        assert row.ablation_significant == single.significant[layer][head]
        assert same(row.importance, report.ablation.importance.importance[layer][head])


@pytest.mark.slow
def test_heads_frame_without_an_ablation_has_no_ablation_columns(built):
    report, _ = built
    frame = report.model_copy(update={"ablation": None}).heads_frame()
    assert len(frame) == 8 and not [column for column in frame.columns if column.startswith(("ablation", "importance"))]


@pytest.mark.slow
def test_load_round_trips_the_default_sites_report(default_site):
    """The embedded model's site, as `reportgen build` writes it: read back record for record, and its heads
    as a frame of 6 x 12 rows."""
    report = Report.load(default_site / "report.json")
    assert json.loads(report.to_json()) == json.loads((default_site / "report.json").read_text(encoding="utf-8"))
    frame = report.heads_frame()
    assert len(frame) == 72 and not frame.duplicated(["layer", "head"]).any()
    assert frame["ablation_delta"].notna().all()
