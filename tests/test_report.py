"""The report contract: report.json against its published schema, and findings as data (the stage
boundaries are tests/test_layout.py)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import jsonschema
import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from reportgen import findings
from reportgen.commands.cli import app
from reportgen.config import ExampleSpec, load_config
from reportgen.model.loading import load
from reportgen.model.run import run_example
from reportgen.patterns.statistics import PatternAccumulator, load_settings
from reportgen.pipeline import build
from reportgen.report import SCHEMA_VERSION, Finding, PatternStatistics, Report, head_link, report_schema
from reportgen.site.charts import attention_picture
from tests.helpers import DOCS, ROOT, check_report, tiny_config, write_config

PACKAGE = ROOT / "reportgen"



@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_the_report_schema_is_a_valid_json_schema():
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"]["const"] == SCHEMA_VERSION == 4
    assert "findings" in schema["required"] and "statistics" in schema["required"]


def test_schema_command_prints_the_report_schema_and_the_config_schema_stays():
    runner = CliRunner()
    printed = runner.invoke(app, ["schema", "--report"])
    assert printed.exit_code == 0 and json.loads(printed.output) == report_schema()
    config = json.loads(runner.invoke(app, ["schema"]).output)
    assert "examples" in config["properties"] and "findings" not in config["properties"]


def test_docs_document_every_top_level_key():
    """docs/pages/reference/report-json.md's table of top-level keys names every key of the schema, and no other
    (the schema reference below it is generated at build time, so the page's own text holds only that table)."""
    page = (DOCS / "reference" / "report-json.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.M))
    assert documented == set(report_schema()["properties"])


@pytest.fixture(scope="module")
def tiny_statistics(tiny_model) -> PatternStatistics:
    net, tokenizer = load(tiny_model, "cpu")
    specs = [ExampleSpec(text="the cat sat on the mat."),
             ExampleSpec(text="i went to the store.", pair="at the store, i bought fresh strawberries.")]
    accumulator = PatternAccumulator(load_settings())
    for spec in specs:
        accumulator.add(run_example(net, tokenizer, spec, 64))
    return PatternStatistics.model_validate(accumulator.result())


def test_pattern_findings_are_sentences_built_from_the_statistics(tiny_statistics):
    found = findings.pattern_findings(tiny_statistics)
    ids = [fid for fid, *_ in findings.PATTERN_FINDINGS]
    ids.insert(ids.index("patterns-delimiter") + 1, "patterns-delimiter-contribution")  # the no-op test beside it
    assert [f.id for f in found] == ids + ["patterns-broad"]
    for finding in found:
        assert finding.sentence == "".join(span.text for span in finding.spans)
        assert finding.links and all(link.href.startswith("patterns.html#") for link in finding.links)
    previous = found[0]
    mean = np.array(tiny_statistics.previous_token.mean, dtype=float)
    over = int((mean > tiny_statistics.settings["thresholds"]["positional"]).sum())
    assert previous.numbers["count"] == over and previous.supported == (over > 0)
    shown = previous.numbers["heads"][0] if over else previous.numbers["strongest"]
    assert f"layer {shown['layer']} head {shown['head']}" in previous.sentence.lower()
    assert f"{shown['value']:.2f} ± " in previous.sentence


def test_records_refuse_unknown_keys_and_wrong_types(tiny_statistics):
    data = tiny_statistics.model_dump(mode="json")
    with pytest.raises(ValidationError):
        PatternStatistics.model_validate({**data, "surprise": 1})
    with pytest.raises(ValidationError):
        PatternStatistics.model_validate({**data, "labels": "not a grid"})


class _Findings(HTMLParser):
    """The text and links of each finding block (div.rg-finding) of the findings page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: dict[str, dict] = {}
        self._current: str | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "div" and "rg-finding" in (attrs.get("class") or "").split():
            self._current, self._depth = attrs["id"].removeprefix("finding-"), 0
            self.blocks[self._current] = {"text": "", "links": []}
        if self._current is not None:
            self._depth += tag == "div"
            classes = (attrs.get("class") or "").split()
            if tag == "a" and "rg-attention-link" in classes:  # its picture of the head it names
                self.blocks[self._current]["pictured"] = attrs["href"]
            elif tag == "a" and "rg-term" not in classes:  # glossary terms are not its links
                self.blocks[self._current]["links"].append(attrs["href"])

    def handle_endtag(self, tag):
        if self._current is not None and tag == "div":
            self._depth -= 1
            if self._depth == 0:
                self._current = None

    def handle_data(self, data):
        if self._current is not None:
            self.blocks[self._current]["text"] += data


@pytest.mark.slow
def test_built_report_matches_its_schema_and_the_findings_page_prints_its_findings(tmp_path, tiny_model):
    write_config(tmp_path, tiny_config(tiny_model))
    built = build(load_config(tmp_path / "reportgen.yaml"), reproducible=True)
    data = check_report(tmp_path / "site")
    assert Report.model_validate(data) == built.report
    assert data["schema_version"] == 4 and {f["group"] for f in data["findings"]} == {"patterns", "ablation"}
    parser = _Findings()
    parser.feed((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))
    assert list(parser.blocks) == [f["id"] for f in data["findings"]]
    for finding in data["findings"]:
        block = parser.blocks[finding["id"]]
        assert " ".join(finding["sentence"].split()) in " ".join(block["text"].split())
        hrefs = [span["link"] for span in finding["spans"] if span["link"]] + [x["href"] for x in finding["links"]]
        assert block["links"] == hrefs
        if "pictured" in block:  # the picture beside it is of the head it names, on its example
            named = attention_picture.named_head(Finding.model_validate(finding))
            assert block["pictured"] == head_link(named["example"], named["layer"], named["head"])
    assert any("pictured" in block for block in parser.blocks.values())
    text = (tmp_path / "site" / "report.json").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(-?[0-9]|null|true|false)", text, re.M), "a plain value alone on a line"
    assert re.search(r'^ {3}"[a-z_]+": \[-?[0-9][^\n]*, -?[0-9][^\n]*\],?$', text, re.M), "no number list inline"
    hostile = built.report.model_copy(update={"title": '"], [1,\n2]}\u2028</script>'})
    assert Report.model_validate(json.loads(hostile.to_json())) == hostile
