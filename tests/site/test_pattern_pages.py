"""The pages of a tiny build as HTML: scores with their nulls and conventions, the per-example pattern
list, the glossary and its links, the home page's task and grammar. One build for the module (slow:
a site build); the browser checks of the same sections on the default site are in
tests/site/browser/test_site_browser.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reportgen.findings import names
from reportgen.site import glossary
from reportgen.site.charts.chartdata import PATTERN_SECTIONS
from tests.helpers import SINGLE_HEADS_ABLATION, TWO_EXAMPLES, build_tiny_site, check_report, tiny_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory, tiny_model) -> Path:
    # The second example's name is user text holding glossary words: it must show as it is, with no term link.
    examples = [TWO_EXAMPLES[0], {**TWO_EXAMPLES[1], "name": "entropy in nats, a bootstrap CI"}]
    config = tiny_config(tiny_model, title="Tiny", examples=examples, ablation=SINGLE_HEADS_ABLATION)
    return build_tiny_site(tmp_path_factory.mktemp("pattern-pages"), config)


class Page(HTMLParser):
    """The article of a built page: its text per section (h2 id), links, term links and chart specs."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, str] = {"": ""}
        self.links: list[tuple[str, str | None]] = []  # (href, class)
        self.charts: dict[str, dict] = {}
        self._section, self._chart, self._heading = "", None, False
        self.feed(html[html.index("<article"):html.index("</article>")])

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2" and attrs.get("id"):
            self._section = attrs["id"]
            self.sections[self._section] = ""
        if tag == "a" and "href" in attrs:
            self.links.append((attrs["href"], attrs.get("class")))
        if tag == "script" and "data-rg-chart" in attrs:
            self._chart = attrs["data-rg-chart"]

    def handle_endtag(self, tag):
        if tag == "script":
            self._chart = None

    def handle_data(self, data):
        if self._chart:
            self.charts[self._chart] = json.loads(data)
        else:
            self.sections[self._section] += data

    def text(self, section: str | None = None) -> str:
        raw = self.sections[section] if section is not None else " ".join(self.sections.values())
        return " ".join(raw.split())


def page(site: Path, name: str) -> Page:
    return Page((site / name).read_text(encoding="utf-8"))


def test_every_pattern_score_is_shown_with_its_nulls(site):
    report = check_report(site)
    patterns = page(site, "patterns.html")
    for key, anchor, *_ in PATTERN_SECTIONS:
        text = patterns.text(anchor)
        null = report["statistics"]["nulls"][key]
        line = (f"Nulls on the same inputs: uniform head {null['uniform']:.2f}, pure previous-token head "
                f"{null['previous']:.2f}, pure next-token head {null['next']:.2f}.")
        assert line.replace("-0.00", "0.00") in text, (anchor, text)
        for name in names.NULL_HEADS.values():
            assert f"null: {name}" in text, (anchor, name)  # a row of the top-heads table
    # Every null line (after its section's chart) links "Nulls" to the glossary: no chart hides the terms after it.
    null_links = [href for href, cls in patterns.links if cls == "rg-term" and href == "glossary.html#null"]
    assert len(null_links) >= len(PATTERN_SECTIONS)


def test_positional_tables_give_the_argmax_share_and_clark_s_value(site):
    patterns = page(site, "patterns.html")
    for which in ("previous", "next"):
        text = patterns.text(f"{which}-token")
        assert names.name(f"{which}_token_argmax") in text and names.name(f"{which}_token_clark") in text
        assert "n-1 queries" in text and "Clark et al. (2019) divide by all n tokens" in text


def test_conventions_are_stated_where_they_apply(site):
    patterns = page(site, "patterns.html")
    assert "computed per input, then averaged" in patterns.text("")
    assert "0.9999 A + 0.0001/n" in patterns.text("broad")
    assert "only '.' and ','" in patterns.text("punctuation")
    assert "[CLS], [SEP] and punctuation are left out" in patterns.text("other-sentence")
    assert "boundary selectivity is above" in patterns.text("within-word")
    assert patterns.text("boundary-selectivity").startswith(names.name("boundary_selectivity"))


def test_share_heatmaps_use_one_fixed_scale_and_entropy_its_own(site):
    patterns = page(site, "patterns.html")
    scales = {chart: spec["encoding"]["color"]["scale"] for chart, spec in patterns.charts.items()
              if chart.startswith("chart-") and chart != "chart-similarity"}
    # Entropy: its own range, one over the weights and the contributions drawn beside them
    entropy = check_report(site)["statistics"]["entropy"]["mean"]
    broad = scales.pop("chart-broad")["domain"]
    assert broad == scales.pop("chart-broad-contribution")["domain"] and broad[0] <= min(map(min, entropy))
    assert scales.pop("chart-boundary-selectivity")["domain"] == [-1, 1]
    assert scales.pop("chart-boundary-selectivity-contribution")["domain"] == [-1, 1]
    assert len(scales) == 16 and all(scale["domain"] == [0, 1] for scale in scales.values()), scales
    statistics = page(site, "statistics.html")
    assert statistics.charts["chart-cls-sep"]["encoding"]["color"]["scale"]["domain"] == [0, 1]


def test_contributions_sit_beside_the_weights_with_the_no_op_test(site):
    report = check_report(site)
    patterns = page(site, "patterns.html")
    for key, anchor, *_ in PATTERN_SECTIONS:
        rows = patterns.charts[f"chart-{anchor}-contribution"]["data"]["values"]
        means = report["statistics"]["contribution"]["statistics"][key]["mean"]
        assert [row["value"] for row in rows] == [value for layer in means for value in layer], anchor
    top = report["statistics"]["top_heads"]["cls"][0]
    contribution = report["statistics"]["contribution"]["statistics"]["cls"]["mean"][top["layer"]][top["head"]]
    assert f"layer {top['layer']} head {top['head']} {top['value']:.2f} {top['std']:.2f} {contribution:.2f}" in (
        patterns.text("cls"))
    test = report["statistics"]["contribution"]["delimiter"]
    text = patterns.text("delimiter-contribution")
    for head in test["heads"]:
        assert f"layer {head['layer']} head {head['head']} {head['weight']:.2f} {head['contribution']:.2f}" in text
    views = [href for href, _ in patterns.links if href.endswith("&mode=contributions")]
    assert len(views) == len(test["heads"])
    assert ("glossary.html#contribution", "rg-term") in patterns.links
    found = next(f for f in report["findings"] if f["id"] == "patterns-delimiter-contribution")
    assert found["numbers"] == test and found["links"] == [{"label": "table",
                                                            "href": "patterns.html#delimiter-contribution"}]


def test_labels_and_legends_use_the_pattern_names(site):
    html = (site / "patterns.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="rg-labels">(.*?)</table>', html, re.DOTALL).group(1)
    shown = [Page(f"<article>{cell}</article>").text() for cell in re.findall(r"<tr><td>(.*?)</td>", table)]
    assert sorted(shown) == sorted(names.name(key) for key in check_report(site)["statistics"]["label_counts"])
    patterns = page(site, "patterns.html")
    points = patterns.charts.get("chart-similarity", {}).get("data", {}).get("values", [])
    assert points and {p["label"] for p in points} <= {entry.name for entry in names.PATTERNS.values()}


def test_example_page_lists_the_six_patterns_with_links_into_the_head_view(site):
    report = check_report(site)
    example = page(site, "example-2.html")
    text = example.text("patterns")
    listed = report["examples"][1]["patterns"]
    assert [p["pattern"] for p in listed] == list(names.SEED_PATTERNS)
    for found in listed:
        assert names.name(found["pattern"]) + ":" in text
        if found["heads"] and found["weak"]:
            assert f"none above {found['threshold']}" in text
    links = [href for href, _ in example.links if href.startswith("#view=head")]
    cells = report["layers"] * report["heads"]  # the head map's cells come first (issue 15), in order
    grid = [f"#view=head&layer={layer}&head={head}"
            for layer in range(report["layers"]) for head in range(report["heads"])]
    # the head map's cells come first (issue 15), in order, and the entropy map's last (drawn at build time, issue 47)
    assert links[:cells] == grid and links[-cells:] == grid
    links = links[cells:-cells]
    expected = []
    for found in listed:
        for head in found["heads"][:1] if found["weak"] else found["heads"]:  # a weak pattern: only its best
            pinned = (f"&token={head['query']}" if head["query"] is not None
                      else f"&key={head['key']}" if head["key"] is not None else "")
            expected.append(f"#view=head&layer={head['layer']}&head={head['head']}{pinned}")
    assert links == expected and links
    other = next(p for p in listed if p["pattern"] == "other_segment")["heads"][0]  # the pair shares "store"
    assert f"({other['query_token']} \u2192 {other['key_token']}: {other['weight']:.2f})" in text
    assert other["query_token"] == other["key_token"] == "store"


def test_glossary_page_has_every_term_and_every_term_link_lands_there(site):
    glossary_page = (site / "glossary.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'\bid="([a-z0-9-]+)"', glossary_page))  # written as they are, no references
    assert {term.id for term in glossary.TERMS} <= anchors
    used = set()
    for built in site.glob("*.html"):
        for href, cls in page(site, built.name).links if built.name != "404.html" else []:
            if cls == "rg-term":
                target, _, anchor = href.partition("#")
                assert target in ("glossary.html", "") and anchor in anchors, (built.name, href)
                used.add(anchor)
    assert {"nats", "null", "boundary-selectivity", "permutation-test"} <= used
    assert 'href="glossary.html"' in (site / "index.html").read_text(encoding="utf-8")  # in the nav


def test_user_text_shows_as_written_without_term_links(site):
    example = (site / "example-2.html").read_text(encoding="utf-8")
    name = re.search(r'<p class="rg-example-name">(.*?)</p>', example).group(1)
    assert "rg-term" not in name and "entropy in nats, a bootstrap CI" in Page(
        f"<article>{name}</article>").text()
    listing = page(site, "examples.html")
    assert "entropy in nats, a bootstrap CI" in listing.text()
    assert not [href for href, cls in listing.links if cls == "rg-term"]


def test_home_names_the_task_and_counts_in_good_grammar(site):
    report = check_report(site)
    home = page(site, "index.html").text()
    assert "Spearman on the built-in query-title relevance set" in home
    significant = report["headline"]["significant_heads"]
    words = "single head matters" if significant == 1 else "single heads matter"
    assert f"{significant} {words} significantly" in home
    assert not re.search(r"\b1 (single )?heads\b|\b1 layers\b|\b1 examples\b|\b1 inputs\b", home), home
    baseline = report["ablation"]["baseline"]
    assert f"{baseline['value']:.3f} Spearman" in home
    assert f"[{baseline['ci']['spearman'][0]:.3f}, {baseline['ci']['spearman'][1]:.3f}]" in home
