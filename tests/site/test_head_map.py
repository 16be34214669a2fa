"""Issue 15, the head map: its data from a report, the labels on one example, the SVG and its PNG.

The report comes from the real pipeline on two tiny random models (no site is built); the drawing
checks use maps with known labels and masking results, so each mark can be checked where it must be.
"""

from __future__ import annotations

import io
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from reportgen.config import ExampleSpec
from reportgen.findings import names
from reportgen.patterns import statistics as patterns
from reportgen.patterns.decoder_atlas import DECODER_LABELS
from reportgen.patterns.per_example import patterns_and_labels
from reportgen.report import HeadTests, Report, head_link
from reportgen.runs import ExampleRun
from reportgen.site.charts import chartdata, head_map, head_map_svg, png_palette, vegalite
from reportgen.site.charts.head_map import Cell, HeadMap, Masking
from tests.helpers import SINGLE_HEADS_ABLATION, make_tiny_bert, tiny_config, write_config

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def report(tmp_path_factory, tiny_model) -> Report:
    """The report of a tiny build with a comparison model and single-head masking, without its site."""
    from reportgen.config import load_config
    from reportgen.pipeline import analyses, assemble, model_stage

    project = tmp_path_factory.mktemp("head-map")
    other = make_tiny_bert(project / "other", seed=1)
    write_config(project, tiny_config(tiny_model, title="Tiny", max_length=128,
                                      compare={"model": other, "name": "second"}, ablation=SINGLE_HEADS_ABLATION))
    config = load_config(project / "reportgen.yaml")
    stage = model_stage.run_model(config)
    atlas = analyses.run_patterns(config, stage)
    ablation = analyses.run_ablation(config, stage)
    comparison = analyses.run_comparison(config, stage)
    manifest = assemble.make_manifest(config, stage, assemble.data_files(config), {}, True)
    return assemble.make_report(config, stage, atlas, ablation, comparison, manifest, True)


# -- the colour table --------------------------------------------------------------------------------
def test_every_label_has_one_distinct_colour_and_no_pattern_is_grey():
    colours = names.label_colours()
    assert set(colours) == set(patterns.LABELS) | set(DECODER_LABELS)
    assert len(set(colours.values())) == len(colours)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", colour) for colour in colours.values())
    grey = colours["mixed"]
    assert grey[1:3] == grey[3:5] == grey[5:7]  # neutral: red = green = blue
    assert names.colour("entropy") == grey  # a statistic that is no label draws as no pattern


def test_the_similarity_map_colours_labels_from_the_same_table():
    points = [{"layer": 0, "head": head, "x": head, "y": 0, "label": names.name(label)}
              for head, label in enumerate(["delimiter", "previous_token", "mixed"])]
    scale = vegalite.head_scatter(points, "t")["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True)) == {
        names.name(key): names.colour(key) for key in ("previous_token", "delimiter", "mixed")}


# -- the labels on one example -----------------------------------------------------------------------
TOKENS = ["[CLS]", "straw", "##berries", "are", "good", ".", "[SEP]"]


def _rows_on(targets: list[int]) -> np.ndarray:
    attention = np.zeros((len(targets), len(targets)), dtype=np.float32)
    attention[np.arange(len(targets)), targets] = 1.0
    return attention


def _run(heads: list[np.ndarray]) -> ExampleRun:
    segments = np.array([-1, 0, 0, 0, 0, 0, -1])
    return ExampleRun(ExampleSpec(text="strawberries are good."), TOKENS, np.array([-1, 0, 0, 1, 2, 3, -1]),
                      segments, segments == -1, np.stack(heads)[None])


def test_an_examples_labels_are_the_label_rule_on_that_example_alone():
    length = len(TOKENS)
    previous = _rows_on([max(q - 1, 0) for q in range(length)])
    following = _rows_on([min(q + 1, length - 1) for q in range(length)])
    uniform = np.full((length, length), 1 / length, dtype=np.float32)
    on_cls = _rows_on([0] * length)
    run = _run([previous, following, uniform, on_cls])
    found, labels = patterns_and_labels(run)
    assert labels == [["previous_token", "next_token", "broad", "delimiter"]]
    assert [pattern.pattern for pattern in found] == ["previous_token", "next_token", "same_token", "other_segment",
                                                      "within_word", "delimiter"]
    expected, _ = patterns.label_heads(patterns.example_statistics(run), patterns.load_settings().thresholds)
    assert labels == expected.tolist()


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_every_example_of_a_build_carries_its_own_labels(report):
    for example in report.examples:
        assert np.shape(example.labels) == (report.layers, report.heads)
        assert {label for row in example.labels for label in row} <= set(patterns.LABELS)


# -- the maps' data ------------------------------------------------------------------------------------
def _tests(relative: list[list[float | None]], significant: list[list[bool]]) -> HeadTests:
    grid = [[0.5] * len(row) for row in relative]
    return HeadTests(test="paired permutation test", correction="holm", alpha=0.05, permutations=999, baseline=0.8,
                     value=grid, delta=grid, relative=relative, p_value=grid, p_adjusted=grid, significant=significant)


def test_masking_gives_the_sign_of_the_change_and_its_test():
    tests = _tests([[-0.031, 0.02, 0.0, None]], [[True, True, False, False]])
    found = [head_map.masking(tests, 0, head) for head in range(4)]
    assert [(m.sign, m.significant) for m in found] == [(-1, True), (1, True), (0, False), (0, False)]
    assert found[0].relative == -0.031 and found[0].permutations == 999
    assert head_map.masking(None, 0, 0) is None


def test_the_findings_maps_have_one_cell_per_head_linked_to_its_strongest_example(report):
    first, second = head_map.findings_maps(report)
    stats, tests = report.statistics, report.ablation.single_heads
    assert (first.id, second.id) == ("head-map", "head-map-compare")
    assert (first.model, second.model) == (report.model.name, "second")
    assert [(cell.layer, cell.head) for cell in first.cells] == [
        (layer, head) for layer in range(report.layers) for head in range(report.heads)]
    pages = {example.page for example in report.examples}
    for cell in first.cells:
        assert cell.label == stats.labels[cell.layer][cell.head]
        statistic = stats.label_stats.get(cell.label, "entropy")
        example = stats[statistic].example[cell.layer][cell.head]
        assert cell.link == head_link(max(example, 0), cell.layer, cell.head)
        assert cell.link.split("#")[0] in pages
        assert cell.value == (stats[statistic].mean[cell.layer][cell.head] if cell.label != "mixed" else None)
        assert cell.masking.relative == tests.relative[cell.layer][cell.head]
        assert cell.masking.significant == tests.significant[cell.layer][cell.head]
    assert first.metric == report.ablation.task.metric and first.scope == "inputs"


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_the_second_models_cells_open_its_section_of_the_comparison_page(report):
    second = head_map.findings_maps(report)[1]
    sections = {section["id"] for section in chartdata.comparison_sections(report)}
    assert set(head_map.COMPARE_SECTIONS.values()) <= sections  # every label's section is on the page
    assert set(head_map.COMPARE_SECTIONS) == set(patterns.LABELS)
    for cell in second.cells:
        assert cell.label == report.comparison.statistics.labels[cell.layer][cell.head]
        assert cell.link == f"compare.html#{head_map.COMPARE_SECTIONS[cell.label]}"
        assert cell.masking.relative == report.comparison.ablation.single_heads.relative[cell.layer][cell.head]


def test_an_examples_map_shows_its_labels_and_links_on_the_same_page(report):
    example = report.examples[1]
    drawn = head_map.example_map(report, example)
    assert drawn.scope == "example" and drawn.id == "head-map-example"
    for cell in drawn.cells:
        assert cell.label == example.labels[cell.layer][cell.head]
        assert cell.entropy == example.entropy[cell.layer][cell.head]
        assert cell.link == f"#view=head&layer={cell.layer}&head={cell.head}"
    assert head_map.findings_maps(report)[0].to_dict()["cells"][0]["layer"] == 0  # plain data


def test_without_ablation_the_map_has_no_marks(report):
    drawn = head_map.model_map(report.statistics, None, "m", "x", head_map.strongest_view(report.statistics))
    assert drawn.metric is None and all(cell.masking is None for cell in drawn.cells)
    tree = ET.fromstring(str(head_map_svg.svg(drawn)))
    assert "masking" not in "".join(tree.itertext())


# -- the drawing ---------------------------------------------------------------------------------------
HOSTILE = 'evil <script>alert(1)</script> & "model"\x01'


def _drawn(scope: str = "inputs") -> HeadMap:
    """2 x 3 heads with known labels; masking (0, 1) lowers the metric significantly, masking (1, 2) raises it."""
    labels = [["previous_token", "delimiter", "mixed"], ["other_segment", "broad", "delimiter"]]
    marks = {(0, 1): (-0.031, -1), (1, 2): (0.012, 1)}
    cells = []
    for layer, row in enumerate(labels):
        for head, label in enumerate(row):
            relative, sign = marks.get((layer, head), (0.001, 1))
            floor = (layer, head) == (1, 2)  # its raw p-value is the test's floor 1/(999 + 1): a bound
            masked = Masking(relative=relative, p_adjusted=0.004 if (layer, head) in marks else 1.0,
                             p_value=0.001 if floor else 0.002, permutations=999, significant=(layer, head) in marks,
                             sign=sign)
            statistic = patterns.LABEL_STATS.get(label)
            cells.append(Cell(layer=layer, head=head, label=label, statistic=statistic,
                              value=0.67 if statistic else None, entropy=1.5, effective_share=0.4, masking=masked,
                              link=f"example-1.html#view=head&layer={layer}&head={head}"))
    return HeadMap(id="head-map", model=HOSTILE, scope=scope, layers=2, heads=3, metric="accuracy", cells=cells)


def test_the_svg_has_a_linked_cell_per_head_with_its_colour_mark_and_tooltip():
    drawn = _drawn()
    text = str(head_map_svg.svg(drawn))
    root = ET.fromstring(text)  # well-formed XML
    assert root.get("role") == "group" and root.get("width") == "100%" and root.get("viewBox")
    assert " id=" not in text  # several maps share a page: no ids to clash
    links = root.findall(f"{SVG}a")
    assert len(links) == 6
    for link, cell in zip(links, drawn.cells, strict=True):
        assert link.get("href") == cell.link
        rects = link.findall(f"{SVG}rect")
        assert rects[0].get("fill") == names.colour(cell.label)
        tooltip = link.find(f"{SVG}title").text
        assert tooltip.startswith(f"Layer {cell.layer}, head {cell.head}: ")
        glyphs = [path.get("d") for path in link.findall(f"{SVG}path")]
        if cell.masking.significant:
            assert len(rects) == 2 and rects[1].get("fill") == "none"  # the outline
            assert len(glyphs) == 1 and ("v" in glyphs[0]) == (cell.masking.sign > 0)  # + has a vertical stroke
        else:
            assert len(rects) == 1 and glyphs == []
    tooltips = [link.find(f"{SVG}title").text for link in links]
    assert tooltips[1] == ("Layer 0, head 1: [CLS], [SEP] and punctuation 0.67; entropy 1.50 nats; "
                           "masking it alone: -3.1% accuracy, significant (p = 0.004)")
    assert tooltips[5].endswith("masking it alone: +1.2% accuracy, significant (p ≤ 0.004)")
    assert tooltips[4].startswith("Layer 1, head 1: Broad attention (effective share 0.67)")
    assert "Mixed: no pattern passes its threshold" in tooltips[2] and "(p = 1)" in tooltips[2]
    texts = [text.text for text in root.findall(f"{SVG}text")]
    assert texts[:7] == ["head", "layer", "0", "1", "2", "0", "1"]  # the axes
    # the legend: the labels the map has, in the table's order, then the two marks
    assert texts[7:] == ["Previous token", "Same word in the other sentence", "[CLS], [SEP] and punctuation",
                         "Broad attention", "Mixed (no pattern)", "masking it alone raises accuracy significantly",
                         "masking it alone lowers accuracy significantly"]


def test_user_text_reaches_the_svg_only_escaped():
    text = str(head_map_svg.svg(_drawn()))
    assert "<script>" not in text and "\x01" not in text
    label = ET.fromstring(text).get("aria-label")
    assert label.startswith('Head map of evil <script>alert(1)</script> & "model"\ufffd')  # as text, unharmed


def test_an_examples_tooltips_give_the_masking_result_only_where_it_is_significant():
    root = ET.fromstring(str(head_map_svg.svg(_drawn("example"))))
    tooltips = [link.find(f"{SVG}title").text for link in root.findall(f"{SVG}a")]
    assert "masking" in tooltips[1] and "masking" in tooltips[5]
    assert all("masking" not in tooltip for number, tooltip in enumerate(tooltips) if number not in (1, 5))


def _png_header(data: bytes) -> tuple[int, int, int]:
    assert data.startswith(png_palette.PNG_SIGNATURE)
    width, height, _, colour_type = struct.unpack(">IIBB", data[16:26])
    return width, height, colour_type


def test_the_preview_png_is_small_indexed_and_pixel_for_pixel_the_drawing():
    import vl_convert
    from PIL import Image

    drawn = _drawn()
    data = head_map_svg.png(drawn)
    assert _png_header(data) == (1200, 630, 3)  # the 1.91:1 shape of link previews, a palette
    assert len(data) < 20_000
    drawing, width = head_map_svg.preview_svg(drawn)
    original = vl_convert.svg_to_png(drawing, scale=1200 / width)
    with Image.open(io.BytesIO(data)) as ours, Image.open(io.BytesIO(original)) as theirs:
        assert np.array_equal(np.asarray(ours.convert("RGBA")), np.asarray(theirs.convert("RGBA")))
        corner = ours.convert("RGB").getpixel((0, 0))
    assert corner == (255, 255, 255)  # on white


def test_a_png_the_palette_cannot_keep_exactly_comes_back_as_it_was():
    import vl_convert
    from PIL import Image

    # transparent (no background), so it is left as RGBA, only recompressed
    original = vl_convert.svg_to_png('<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10">'
                                     '<rect width="10" height="10" fill="#0072b2"/></svg>')
    kept = png_palette.indexed(original)
    assert _png_header(kept)[2] == 6
    with Image.open(io.BytesIO(kept)) as ours, Image.open(io.BytesIO(original)) as theirs:
        assert np.array_equal(np.asarray(ours), np.asarray(theirs))


def test_the_pages_get_the_maps_and_the_pngs_are_written(report, tmp_path):
    figures = head_map_svg.findings_figures(report, tmp_path / "charts")
    assert [figure["id"] for figure in figures] == ["head-map", "head-map-compare"]
    assert figures[0]["metric"] == names.metric(report.ablation.task.metric)
    example = head_map_svg.example_figure(report, report.examples[0], tmp_path / "charts")
    assert example["svg"].count("<a ") == report.layers * report.heads
    written = sorted(path.name for path in Path(tmp_path / "charts").iterdir())
    assert written == ["example-1--head-map.png", "index--head-map.png"]
