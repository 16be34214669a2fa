"""Issue 28, a report a newcomer understands in 30 seconds: the findings page opens with a real h1, one sentence
that says what the task and its metric are, and a short summary generated from the findings, each sentence with
its number, its test's verdict and a link to its finding; the patterns are called by the names of
reportgen.findings.names everywhere (summary, headline, tables), "mixed" included.

The home template is rendered as the site renders it (pages.environment, then Python-Markdown with the site's
extensions) on a small report written here as plain data, so these tests take milliseconds.
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

import markdown
import pytest

from reportgen.findings import names
from reportgen.report import Finding, Span
from reportgen.site import pages
from tests.helpers import ROOT

LABELS = {"previous_token": 2, "next_token": 0, "same_token": 0, "other_segment": 0, "within_word": 0,
          "delimiter": 28, "broad": 15, "mixed": 99}
HEADS = sum(LABELS.values())


def _finding(fid: str, group: str, supported: bool, lead: str, numbers: dict, **evidence) -> Finding:
    return Finding(id=fid, group=group, supported=supported, sentence=lead + " more.",
                   spans=[Span(text=lead, style="strong"), Span(text=" more.")], links=[], numbers=numbers,
                   **evidence)


def ablation_findings(metric: str = "spearman") -> list[Finding]:
    """The ablation findings the summary reads, with the numbers reportgen/findings/ablation.py gives them."""
    worst = {"layer": 3, "head": None, "delta": -0.0421, "relative": -0.0461, "significant": True, "p": 0.003,
             "raw": 0.002}
    return [
        _finding("ablation-baseline", "ablation", True, "The model scores", {"metric": metric, "value": 0.9131,
                                                                            "examples": 500}, ci=[0.901, 0.925]),
        _finding("ablation-single-heads", "ablation", True, "5 of 144 heads change", {
            "metric": metric, "count": 5, "total": HEADS, "alpha": 0.05, "correction": "holm",
            "worst": {"layer": 1, "head": 2, "delta": -0.01, "relative": -0.011}, "best": {}}),
        _finding("ablation-random-fraction", "ablation", True, "Up to", {
            "metric": metric, "up_to": 0.2, "margin": 0.01, "seeds": 3, "failing": 0.3, "ci": [-0.0049, 0.0021]}),
        _finding("ablation-whole-layers", "ablation", True, "Removing layer 3 costs most:", {
            "metric": metric, "worst": worst, "best": {**worst, "layer": 8, "delta": -0.0001, "relative": -0.0001},
            "improves": False, "permutations": 999, "alpha": 0.05}),
        _finding("ablation-importance", "ablation", False, "Pruning by importance is not shown", {"metric": metric}),
    ]


def pattern_findings() -> list[Finding]:
    return [
        _finding("patterns-previous-token", "patterns", True, "2 heads attend to the previous token", {}),
        _finding("patterns-next-token", "patterns", False, "No head attends mainly to the next token", {}),
        _finding("patterns-delimiter", "patterns", True,
                 "28 of 144 heads put more than 50% of their attention on [CLS], [SEP] or punctuation", {}),
        _finding("patterns-broad", "patterns", True, "15 heads attend broadly", {}),
    ]


def report(task: dict | None, found: list[Finding], title: str = "Attention report") -> dict:
    """The fields of a Report the findings page prints, as plain data (Jinja reads dicts and objects alike)."""
    ablation = None if task is None else {"task": {"type": "similarity", "data": "builtin", "examples": 500,
                                                   "method": "zero", "metric": "spearman", **task},
                                          "experiments": ["single_heads"]}
    return {"title": title, "model": {"name": "tiny-bert", "model_type": "bert", "parameters": 1000},
            "layers": 12, "heads": 12, "statistics": {"counts": {"examples": 40}}, "decoder": None,
            "ablation": ablation,
            "claims": None, "examples": [1, 2], "versions": {"torch": "2", "transformers": "4", "reportgen": "0",
                                                              "python": "3"}, "built": None, "warnings": [],
            "findings": found}


SIMILARITY: dict = {}  # the default task: similarity, Spearman, the built-in set


def home(task: dict | None = SIMILARITY, found: list[Finding] | None = None, title: str = "Attention report",
         **extra) -> str:
    found = ablation_findings() if found is None else found
    data = report(task, found, title)
    headline = {"heads": HEADS, "labels": LABELS, "baseline": None, "significant_heads": None}
    env = pages.environment(ROOT / "site_src" / "templates")
    source = env.get_template("home.md.j2").render(report=data, findings=found, headline=headline,
                                                   task_data=names.task_data("builtin"), head_maps=[], pictures={},
                                                   chart=None, **extra)
    extensions = ["admonition", "attr_list", "md_in_html", "tables", "toc", "reportgen.site.term_links"]
    return markdown.markdown(source, extensions=extensions)


class Outline(HTMLParser):
    """The headings (level, text) of a page, and the text of the summary's list items with their links."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.headings: list[tuple[int, str]] = []
        self.items: list[dict] = []
        self._heading: list | None = None
        self._depth = 0  # inside <div class="rg-summary">
        self._item: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = [int(tag[1]), ""]
        if tag == "div" and "rg-summary" in (attrs.get("class") or ""):
            self._depth = 1
        elif tag == "div" and self._depth:
            self._depth += 1
        if tag == "li" and self._depth:
            self._item = {"text": "", "links": []}
        if tag == "a" and self._item is not None:
            self._item["links"].append(attrs.get("href"))

    def handle_endtag(self, tag):
        if self._heading and tag == f"h{self._heading[0]}":
            self.headings.append((self._heading[0], self._heading[1].strip()))
            self._heading = None
        if tag == "div" and self._depth:
            self._depth -= 1
        if tag == "li" and self._item is not None:
            self.items.append(self._item)
            self._item = None

    def handle_data(self, data):
        if self._heading:
            self._heading[1] += data
        if self._item is not None:
            self._item["text"] += data


def outline(html: str) -> Outline:
    parsed = Outline()
    parsed.feed(html)
    return parsed


def text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())


def test_the_title_is_the_one_h1_and_no_heading_level_is_skipped():
    parsed = outline(home())
    levels = [level for level, _ in parsed.headings]
    assert parsed.headings[0] == (1, "Attention report") and levels.count(1) == 1
    assert all(later - earlier <= 1 for earlier, later in zip(levels, levels[1:], strict=False)), parsed.headings
    assert parsed.headings[1] == (2, "In short")


def test_user_titles_stay_text_in_the_h1():
    html = home(title="<b>x</b> & *y*")
    assert "<b>x</b>" not in html and outline(html).headings[0] == (1, "<b>x</b> & *y*")


@pytest.mark.parametrize(("task", "said"), [
    ({}, "The model scores how similar two texts are; its quality here is the Spearman correlation between its "
         "scores and the gold grades of 500 pairs of the built-in query-title relevance set"),
    ({"type": "classification", "metric": "accuracy", "data": "dev.tsv"},
     "its quality here is its accuracy, the share of the 500 examples of dev.tsv it labels correctly"),
    ({"type": "classification", "metric": "macro_f1", "data": "dev.tsv"},
     "its quality here is its macro-F1 on 500 examples of dev.tsv: the F1 score of each label, averaged"),
    ({"type": "mlm", "metric": "accuracy", "data": "texts.txt"},
     "The model predicts hidden (masked) tokens of a text; its quality here is its accuracy, the share of the masked "
     "tokens in 500 texts of texts.txt that it predicts exactly"),
])
def test_one_sentence_says_what_the_task_and_its_metric_are(task, said):
    html = home(task, ablation_findings(task.get("metric", "spearman")))
    opening = text_of(html[html.index('id="summary"'):html.index("<ul>")])  # under the heading, before the list
    assert said in opening, opening


def test_the_summary_keeps_each_findings_number_verdict_and_link():
    items = outline(home()).items
    assert 3 <= len(items) <= 5
    texts = [item["text"] for item in items]
    assert texts[0].startswith(f"Of the {HEADS} heads, 45 pass the threshold of one pattern")
    assert "With all heads the model scores Spearman 0.913 (95% CI [0.901, 0.925])" in texts[1]
    assert "5 of 144 heads change Spearman significantly when masked alone" in texts[2]
    assert "supported" in texts[2] and items[2]["links"][-1] == "#finding-ablation-single-heads"
    assert texts[3].startswith("Up to 20% of the heads can be masked at random losing less than 1% of Spearman")
    assert "[-0.5%, +0.2%]" in texts[3] and items[3]["links"][-1] == "#finding-ablation-random-fraction"
    # relative change first, the absolute change beside it
    assert "Removing layer 3 costs most: -4.6% (-0.042 Spearman), significant (corrected p = 0.003)" in texts[4]
    assert items[4]["links"][-1] == "#finding-ablation-whole-layers"


def test_a_summary_sentence_says_not_supported_when_its_test_fails():
    found = ablation_findings()
    found[2] = found[2].model_copy(update={"supported": False, "numbers": {**found[2].numbers, "up_to": 0.0}})
    texts = [item["text"] for item in outline(home(found=found)).items]
    assert any(text.startswith("Masking heads at random is not shown to cost less than 1% of Spearman")
               and "not supported" in text for text in texts), texts


def test_without_a_task_the_summary_quotes_the_pattern_findings_with_their_verdicts():
    items = outline(home(None, pattern_findings())).items
    texts = [item["text"] for item in items]
    assert 3 <= len(texts) <= 5
    assert any(text.startswith("28 of 144 heads put more than 50% of their attention on [CLS], [SEP] or "
                               "punctuation — supported") for text in texts), texts
    assert any(text.startswith("No head attends mainly to the next token — not supported") for text in texts)
    assert all(item["links"] and item["links"][-1].startswith("#finding-patterns-") for item in items[1:])


def test_every_pattern_group_is_named_as_the_names_table_names_it_mixed_included():
    html = home()
    summary = text_of(html[html.index('class="rg-summary"'):html.index('id="at-a-glance"')])
    headline = text_of(html[html.index('id="headline"'):])
    for label, count in LABELS.items():
        if count and label != "mixed":
            assert f"{names.name(label)} {count}" in summary, label
        if count:
            assert f"{count} {names.name(label)}" in headline, label
    assert f"the other {LABELS['mixed']} are {names.name('mixed')}" in summary
    for old in (" positional,", " delimiter,", " broad ("):
        assert old not in headline


def test_interactive_instructions_are_marked_for_print():
    """Every sentence that asks to point, hover or click is inside an element print.css hides."""
    env = pages.environment(ROOT / "site_src" / "templates")
    for template in ("home.md.j2", "ablation.md.j2", "patterns.md.j2", "statistics.md.j2", "glossary.md.j2"):
        source = env.loader.get_source(env, template)[0]
        for match in re.finditer(r"(?i)\b(point at|hover|click)\b", source):
            opened = source.rfind('<span class="rg-interactive">', 0, match.start())
            assert opened >= 0 and source.find("</span>", opened) > match.start(), (template, match.group())
    css = (ROOT / "site_src" / "assets" / "stylesheets" / "print.css").read_text(encoding="utf-8")
    assert re.search(r"\.rg-interactive[^{]*\{\s*display:\s*none", css)


def test_the_first_screen_names_the_model_links_the_terms_and_gives_the_take_home():
    """Issue 47: the model's name, its shape counted from 0 and one take-home sentence open the page, "transformer
    layers", "attention heads" and "masking" linked to the glossary at their first use; a label counted in a few
    heads names them, the patterns no head shows are named too, and so is a count of significant single heads."""
    from reportgen.site.story import Lead

    lead = Lead(model="tiny *bert*", kind="an encoder", layers=12, heads=12,
                take_home="Most of its attention heads (99 of 144) look around; masking one head alone changes",
                unseen=["Same word", "Next token", "Other pieces"],
                named={"previous_token": "layer 0 head 1 and layer 2 head 3"}, significant="layer 4 head 5")
    html = home(lead=lead)
    lead_html = html[html.index('class="rg-lead">') + len('class="rg-lead">'):]
    lead_html = lead_html[:lead_html.index("</p>")]
    opening = text_of(lead_html)
    assert opening.startswith("tiny *bert* is an encoder with 12 transformer layers of 12 attention heads each, "
                              "counted from 0. In one sentence: Most of its attention heads (99 of 144) look "
                              "around"), opening
    assert "<strong>tiny &#42;bert&#42;</strong>" in lead_html  # the name is text, bold, not Markdown
    for term in ("layer", "head", "masking"):
        assert f'href="glossary.md#{term}"' in lead_html, term
    texts = [item["text"] for item in outline(html).items]
    assert "Previous token 2 (layer 0 head 1 and layer 2 head 3)" in texts[0]
    assert "none shows Same word, Next token or Other pieces; the other 99 are" in texts[0], texts[0]
    assert "5 of 144 heads (layer 4 head 5) change Spearman significantly" in texts[2]


@pytest.mark.parametrize("method", ["zero", "uniform", "mean", "resample"])
def test_the_findings_page_names_the_masking_method_beside_the_ablation_findings(method):
    """Each ablation method is named where its findings are, and in the limitations as what it does to a head."""
    from reportgen.ablation.experiment_context import METHOD_NOTES

    page = text_of(home({"method": method, "method_note": METHOD_NOTES[method]}))
    needs = page.split("What the model needs", 1)[1]
    assert f"A masked head here: {METHOD_NOTES[method]} (ablation.method: {method})" in needs
    limits = page.split("Limitations", 1)[1]
    said = {"zero": "output set to zero", "uniform": "attention made uniform", "mean": "replaced by its mean",
            "resample": "taken from another input"}
    assert said[method] in limits and all(other not in limits for key, other in said.items() if key != method)
