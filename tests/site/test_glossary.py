"""The glossary's term links, the shield that keeps them out of user text, and the one table of pattern names."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
import yaml

from reportgen.findings import names
from reportgen.report import PatternStatistics, head_link
from reportgen.site import glossary, pages
from tests.helpers import ROOT


def site_markdown():
    """Python-Markdown with the extensions of the site's mkdocs.yml (term links included), as MkDocs runs it."""
    import markdown

    extensions = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["markdown_extensions"]
    listed = [e if isinstance(e, str) else next(iter(e)) for e in extensions]
    assert "reportgen.site.term_links" in listed
    return markdown.Markdown(extensions=listed)


class Links(HTMLParser):
    """The term links of a page (href, title, text) and all of its text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.terms: list[list[str]] = []
        self.text: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("class") == "rg-term":
            self._open = [attrs["href"], attrs["title"], ""]

    def handle_endtag(self, tag):
        if tag == "a" and self._open is not None:
            self.terms.append(self._open)
            self._open = None

    def handle_data(self, data):
        self.text.append(data)
        if self._open is not None:
            self._open[2] += data


def parse(html: str) -> Links:
    parsed = Links()
    parsed.feed(html)
    return parsed


def render(source: str, **values) -> str:
    env = pages.environment(ROOT / "site_src" / "templates")
    return site_markdown().convert(env.from_string(source).render(**values))


# -- term links -------------------------------------------------------------------------------------
def test_each_use_of_a_term_links_to_its_entry_with_the_definition_as_title():
    links = parse(render("The Holm-corrected p-values, in nats, with a bootstrap CI and the entropy.\n")).terms
    assert [(href, text) for href, _, text in links] == [
        ("glossary.md#holm", "Holm"), ("glossary.md#p-value", "p-values"), ("glossary.md#nats", "nats"),
        ("glossary.md#bootstrap-ci", "bootstrap CI"), ("glossary.md#entropy", "entropy")]
    assert links[0][1] == glossary.BY_ID["holm"].definition


def test_terms_are_whole_words_in_any_case_and_the_longest_form_wins():
    links = parse(render("Entropy; entropyx, subnats and nonnull are not terms; bootstrap CI.\n\n"
                         "## Next { #next }\n\nENTROPY\n")).terms
    assert [text for _, _, text in links] == ["Entropy", "bootstrap CI", "ENTROPY"]


def test_a_term_is_linked_at_its_first_use_in_each_section_only():
    """Every later "entropy" of a section is plain text (issue 47: a page of underlined repeats); an h1 or h2
    starts a section where the term is linked again, an h3 does not."""
    source = ("The entropy, in nats; again entropy and nats.\n\nA new paragraph: entropy.\n\n"
              "### Sub { #sub }\n\nentropy\n\n## Second { #second }\n\nThe entropies and nats.\n")
    links = parse(render(source)).terms
    assert [text for _, _, text in links] == ["entropy", "nats", "entropies", "nats"]


@pytest.mark.parametrize("source", [
    "[a link about entropy](page.md)\n",
    "`entropy` in code\n",
    "## Entropy heading { #h }\n",
    '<p class="x">entropy in a raw HTML block</p>\n',
    '<table class="t">\n<tr><td>entropy in a raw table</td></tr>\n</table>\n',
    '<button class="rg-copy-link" type="button">entropy</button>\n',
    'Inline <a href="page.html">the entropy</a> link\n',
    'Inline <a href="page.html">**the** *entropy* `x`</a> link across elements\n',
])
def test_no_term_link_inside_links_code_headings_or_raw_html(source):
    html = render(source)
    assert parse(html).terms == [], html
    assert "entropy" in "".join(parse(html).text).lower()


def test_terms_after_an_inline_link_are_linked_again():
    links = parse(render('The <a href="p.html">nats</a> and <code>nats</code> but then entropy.\n')).terms
    assert [text for _, _, text in links] == ["entropy"]


def test_a_whole_raw_block_of_a_skipped_tag_does_not_hide_the_rest_of_the_page():
    """A chart is a raw <div>, <script> and <p> with a <button>: complete elements, stored whole."""
    source = ('<div class="rg-chart" id="c"></div>\n<script type="application/json" data-rg-chart="c">{}</script>\n'
              '<p class="rg-downloads"><a href="x.png">PNG</a> <button type="button">Copy link</button></p>\n\n'
              '<pre><code>entropy</code></pre>\n\nThe entropy after them.\n')
    assert [text for _, _, text in parse(render(source)).terms] == ["entropy"]


def test_findings_blocks_get_term_links_and_text_around_a_link_keeps_its_place():
    html = render('<div class="rg-finding" markdown>\n\n**Holm** tests, [view](page.md) then a margin.\n\n</div>\n')
    parsed = parse(html)
    assert [text for _, _, text in parsed.terms] == ["Holm", "margin"]
    assert "".join(parsed.text).strip() == "Holm tests, view then a margin."


# -- user text ---------------------------------------------------------------------------------------
CONTEXTS = [
    "{{ x }}\n",
    "| a | b |\n|---|---|\n| {{ x }} | {{ x }} |\n",
    "- {{ x }}\n",
    '<div class="t" markdown>\n\n**{{ x }}** [link](page.md)\n\n</div>\n',
    '<p class="t" title="{{ x }}">{{ x }}</p>\n',
]
PAYLOADS = ["entropy nats CI and the Holm margin", "NULL importance, MDS; no-op", "p-values *[entropy]: <b>x</b>",
            "x&#39;entropy (bootstrap CI)", "  permutation \n\n  test  "]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_user_text_gets_no_term_link_and_shows_as_it_is(context, payload):
    """A plain string printed by a template (user text) is shielded: the same words, no link, no tooltip."""
    html = render(context, x=payload)
    parsed = parse(html)
    assert parsed.terms == [], html
    assert " ".join(payload.split()) in " ".join("".join(parsed.text).split()), html
    assert "<abbr" not in html and "<b>" not in html


def test_the_site_s_own_sentences_keep_their_term_links():
    html = render("{{ ours }} / {{ theirs }}\n", ours=pages.prose("the entropy in nats"), theirs="the entropy in nats")
    assert [text for _, _, text in parse(html).terms] == ["entropy", "nats"]


def test_shield_changes_only_the_first_letter_of_each_term_into_a_reference():
    assert glossary.shield("an entropy of 2 nats") == "an &#101;ntropy of 2 &#110;ats"
    assert glossary.shield("no terms here") == "no terms here"
    assert glossary.shield("a bootstrap CI") == "a &#98;ootstrap &#67;I"  # a term inside a term is broken too


# -- the glossary itself -------------------------------------------------------------------------------
def test_every_term_has_one_anchor_and_every_form_one_term():
    ids = [term.id for term in glossary.TERMS]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z0-9-]+", i) for i in ids)
    forms = [form.lower() for term in glossary.TERMS for form in term.forms]
    assert len(forms) == len(set(forms))
    for term in glossary.TERMS:
        assert term.definition.endswith(".") and "\n" not in term.definition, term.id
        for form in term.forms:
            assert glossary.term_for(glossary.PATTERN.fullmatch(form).group()) is term


def test_the_glossary_has_the_terms_the_pages_use():
    required = ["nats", "entropy", "holm", "argmax-test", "no-op", "importance", "mds", "margin", "permutation-test",
                "non-inferiority", "boundary-selectivity", "null", "effective-share", "bootstrap-ci"]
    assert set(required) <= set(glossary.BY_ID)


# -- pattern names ---------------------------------------------------------------------------------
def test_every_statistic_and_label_has_a_name_and_every_named_term_exists():
    from reportgen.patterns.per_example import SEED_PATTERNS
    from reportgen.patterns.statistics import LABELS, STATS

    assert set(STATS) | set(LABELS) <= set(names.PATTERNS)
    assert names.SEED_PATTERNS == SEED_PATTERNS
    grids = {key for key, field in PatternStatistics.model_fields.items() if "HeadStatistic" in str(field.annotation)}
    assert grids <= set(names.PATTERNS)
    for key, entry in names.PATTERNS.items():
        assert entry.term is None or entry.term in glossary.BY_ID, key
        assert "_" not in entry.name, key
    assert len({entry.name for entry in names.PATTERNS.values()}) == len(names.PATTERNS)  # one name, one pattern


def test_pages_and_charts_name_patterns_from_the_table():
    from reportgen.site.charts import chartdata

    for key, _anchor, title, _description, extra in chartdata.PATTERN_SECTIONS:
        assert title in (names.name(key), names.name("broad"))
        assert all(label == names.name(stat) for stat, label in extra.items())
    for template in (ROOT / "site_src" / "templates").glob("*.j2"):
        source = template.read_text(encoding="utf-8")
        assert 'replace("_"' not in source and "replace('_'" not in source, template.name


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_share_statistics_are_drawn_on_the_fixed_0_1_scale():
    from reportgen.site.charts import vegalite

    rows = vegalite.head_rows([[0.2, 0.4]])
    for key, entry in names.PATTERNS.items():
        spec = vegalite.head_heatmap(rows, "t", "share", domain=names.domain(key))
        scale = spec["encoding"]["color"]["scale"]
        if entry.scale == "share":
            assert scale["domain"] == [0.0, 1.0] and scale["clamp"] is True, key
        elif entry.scale == "difference":
            assert scale["domain"] == [-1.0, 1.0] and scale["scheme"] == "redblue", key
        else:
            assert "domain" not in scale, key
    assert names.pattern("entropy").scale == "nats" and names.pattern("boundary_selectivity").scale == "difference"


def test_task_and_metric_names():
    assert f"{names.metric('spearman')} on {names.task_data('builtin')}" == (
        "Spearman on the built-in query-title relevance set")
    assert names.task_data("data/dev.tsv") == "data/dev.tsv"


# -- links from the example pages ------------------------------------------------------------------
def test_head_links_pin_a_query_or_a_key_token_as_the_views_read_them():
    """The same strings tests/js/pinned-token.test.js parses with views-core.js."""
    assert head_link(0, 0, 4, token=12) == "example-1.html#view=head&layer=0&head=4&token=12"
    assert head_link(2, 2, 7, key=0) == "example-3.html#view=head&layer=2&head=7&key=0"
    assert head_link(0, 1, 8) == "example-1.html#view=head&layer=1&head=8"
    assert head_link(0, 1, 8, token=3, key=5).endswith("&token=3")  # the query wins, as in the views


def test_plural_and_rounding_filters():
    source = ("{{ 1 }} single {{ 1|plural('head matters', 'heads matter') }}; {{ 2 }} {{ 2|plural('head', 'heads') }}; "
              "{{ -0.001|fixed }} {{ none|fixed }} {{ 0.5555|fixed }}\n")
    assert render(source) == "<p>1 single head matters; 2 heads; 0.00 \u2013 0.56</p>"


def test_anchors_print_as_they_are_and_only_slugs_pass():
    """An id holding a glossary word is not shielded (ids are compared as text); anything else is refused."""
    assert render('<div id="finding-{{ fid|anchor }}"></div>\n', fid="ablation-importance") == (
        '<div id="finding-ablation-importance"></div>')
    for bad in ("a b", "x\"y", "<b>", "", "Upper"):
        with pytest.raises(ValueError):
            render("{{ x|anchor }}\n", x=bad)


def test_the_glossary_defines_every_metric_the_tasks_print_and_a_newcomers_words():
    """Issue 28: every metric a task reports (reportgen/ablation/tasks.py), by its key, and the words a newcomer
    meets first: head, layer, masking, [CLS]/[SEP], relative change, significant."""
    from reportgen.ablation.tasks import ClassificationTask, MaskedLMTask, SimilarityTask

    metrics = {key for task in (SimilarityTask, ClassificationTask, MaskedLMTask) for key in task.metric_names}
    assert metrics == {"spearman", "pearson", "accuracy", "macro_f1", "mcc", "loss"}
    for key in metrics:
        term = glossary.BY_ID[key.replace("_", "-")]
        assert names.metric(key).lower() in (term.name.lower() + " " + term.definition.lower()), key
    assert {"head", "layer", "masking", "cls-sep", "relative-change", "significant"} <= set(glossary.BY_ID)
    links = parse(render("Spearman and accuracy, a relative change, macro-F1, not significant.\n")).terms
    assert [href for href, _, _ in links] == ["glossary.md#spearman", "glossary.md#accuracy",
                                              "glossary.md#relative-change", "glossary.md#macro-f1",
                                              "glossary.md#significant"]


@pytest.mark.parametrize("architecture", ["encoder", "decoder", "encoder-decoder"])
def test_the_glossary_names_the_patterns_of_its_sites_architecture(tmp_path, architecture):
    """An encoder's glossary does not name induction heads, nor a decoder's the word-piece patterns; an
    encoder-decoder's names both (its encoder's and its decoder's) and its cross-attention's; all name the
    previous token and "mixed"."""
    from reportgen.site import writer

    atlases = {"encoder": ("encoder",), "decoder": ("decoder",), "encoder-decoder": ("encoder", "decoder", "cross")}
    writer.write_glossary(pages.environment(ROOT / "site_src" / "templates"), tmp_path, atlases[architecture])
    table = (tmp_path / glossary.PAGE).read_text(encoding="utf-8").split("{ #pattern-names }", 1)[1]
    shown = {key for key, entry in names.PATTERNS.items() if f"| {entry.name} |" in table}
    assert {"previous_token", "mixed"} <= shown
    for key in ("induction", "sink", "duplicate_token"):
        assert (key in shown) == (architecture != "encoder"), key
    for key in ("within_word", "same_token", "next_token", "broad"):
        assert (key in shown) == (architecture != "decoder"), key
    assert ("source_special" in shown) == (architecture == "encoder-decoder")
