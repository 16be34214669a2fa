"""Link previews (issue 15): with a site_url every page carries Open Graph and Twitter card tags with
absolute URLs, a one-sentence description and a picture the site holds; without one, `reportgen build`
says once that previews need it, and no page has the tags.

The fast tests check reportgen/previews.py's pieces; the slow ones build tiny sites with `reportgen build`
(a subprocess, as a user runs it) and read every page's tags.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from reportgen.site import previews
from tests.helpers import is_progress, make_tiny_bert

SITE_URL_GIVEN = "https://example.org/team/report"  # without the final slash, which MkDocs adds
SITE_URL = SITE_URL_GIVEN + "/"
HOSTILE_TITLE = 'Tiny "<b>report</b>" & <img src=x onerror=alert(1)>'
HOSTILE_TEXT = "the cat sat on the mat. \"'><svg onload=alert(2)> & **bold** [x](javascript:alert(3))"
OG = ["og:type", "og:site_name", "og:title", "og:description", "og:url", "og:image"]
TWITTER = ["twitter:card", "twitter:title", "twitter:description", "twitter:image"]


# -- the pieces -----------------------------------------------------------------------------------

def test_descriptions_are_cut_at_a_word_and_marked():
    text = "word " * 100
    cut = previews.trimmed(text)
    assert len(cut) <= previews.DESCRIPTION_CHARS and cut.endswith("word\u2026")
    assert previews.trimmed("short  text\n\nhere\x00\x1b!") == "short text here\ufffd\ufffd!"
    # One long word (a URL, a text without spaces) is cut where it is, not emptied.
    assert previews.trimmed("x" * 500) == "x" * (previews.DESCRIPTION_CHARS - 1) + "\u2026"


def test_a_description_is_the_first_sentence_of_a_finding():
    from reportgen.report import Finding

    finding = Finding(id="patterns-x", group="patterns", supported=True, spans=[], links=[], numbers={},
                      sentence="1 head passes Clark et al.'s test (mean 0.5) or Voita et al. 2019's. "
                               "Layer 0 head 2 puts 0.99 on it. [CLS] gets the rest.")
    assert previews.sentence_of(finding) == "1 head passes Clark et al.'s test (mean 0.5) or Voita et al. 2019's."
    assert previews.sentence_of(None) is None


def test_nav_labels_name_every_page_the_menu_lists():
    nav = [{"Findings": "index.md"}, {"Examples": [{"All examples": "examples.md"}, {"Example 1": "example-1.md"}]},
           {"Glossary": "glossary.md"}]
    assert previews.nav_labels(nav) == {"index.md": "Findings", "examples.md": "All examples",
                                        "example-1.md": "Example 1", "glossary.md": "Glossary"}


def test_the_preview_joins_the_front_matter_as_mkdocs_reads_it(tmp_path):
    from mkdocs.utils.meta import get_data

    page = tmp_path / "example-1.md"
    page.write_text("---\nhide:\n- toc\n---\n\n# Example 1\n\n---\n\ntext\n", encoding="utf-8")
    # A value that would end the front matter if it were written on a line of its own.
    preview = {"description": "a\n---\n... " + HOSTILE_TEXT * 3, "title": HOSTILE_TITLE}
    previews.merge_front_matter(page, preview)
    body, meta = get_data(page.read_text(encoding="utf-8"))
    assert meta == {"hide": ["toc"], previews.META_KEY: preview}
    assert body.startswith("# Example 1\n\n---\n\ntext")
    bare = tmp_path / "glossary.md"
    bare.write_text("# Glossary\n", encoding="utf-8")
    previews.merge_front_matter(bare, {"title": "Glossary"})
    assert get_data(bare.read_text(encoding="utf-8")) == ("# Glossary\n", {previews.META_KEY: {"title": "Glossary"}})


def test_a_page_leads_with_the_first_chart_it_drew(tmp_path):
    page = tmp_path / "ablation.md"
    page.write_text('<div class="rg-chart" id="chart-whole-layers"></div>\n<script type="application/json" '
                    'data-rg-chart="chart-whole-layers">{"layer":[{"title":"Change \\u003cin\\u003e x"}]}</script>\n',
                    encoding="utf-8")
    assert previews.lead("ablation", page) == ("chart-whole-layers", "ablation-whole-layers", "Change <in> x")
    page.write_text("No experiment ran.\n", encoding="utf-8")
    assert previews.lead("ablation", page) == (None, None, None)


def test_a_missing_or_broken_picture_stops_the_build(tmp_path):
    with pytest.raises(FileNotFoundError, match="link preview of index.md: its picture index--head-map.png"):
        previews.png_size(tmp_path / previews.HEAD_MAP, "index.md")
    fake = tmp_path / "fake.png"
    fake.write_bytes(b"GIF89a" + bytes(30))
    with pytest.raises(ValueError, match="is not a PNG"):
        previews.png_size(fake, "index.md")
    png = tmp_path / "one.png"
    png.write_bytes(previews.PNG_SIGNATURE + b"\x00\x00\x00\x0dIHDR" + (1200).to_bytes(4, "big")
                    + (630).to_bytes(4, "big") + bytes(17))
    assert previews.png_size(png, "index.md") == (1200, 630)


# -- built sites ----------------------------------------------------------------------------------

class MetaTags(HTMLParser):
    """Every <meta property|name=...> of a page: {key: [content, ...]}, attribute values unescaped."""

    def __init__(self):
        super().__init__()
        self.tags: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        key = attributes.get("property") or attributes.get("name")
        if tag == "meta" and key and key.startswith(("og:", "twitter:")):
            assert set(attributes) == {"property" if key.startswith("og:") else "name", "content"}, attrs
            self.tags.setdefault(key, []).append(attributes["content"])


def meta_tags(page: Path) -> dict[str, str]:
    parser = MetaTags()
    parser.feed(page.read_text(encoding="utf-8"))
    assert all(len(values) == 1 for values in parser.tags.values()), (page.name, parser.tags)
    return {key: values[0] for key, values in parser.tags.items()}


def reportgen_build(project: Path, config: dict) -> subprocess.CompletedProcess:
    (project / "reportgen.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "reportgen", "build"], cwd=project, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def said(done: subprocess.CompletedProcess) -> list[str]:
    """The lines `reportgen build` printed on stdout, less the progress bars."""
    return [line for line in done.stdout.splitlines() if line.strip() and not is_progress(line)]


def tiny_config(model: Path, **extra) -> dict:
    return {"title": HOSTILE_TITLE, "model": str(model), "device": "cpu", "max_length": 64,
            "examples": [{"text": HOSTILE_TEXT}, {"text": "i went to the store.", "pair": "the dog sat."}],
            "patterns": {"similarity": False}, **extra}


@pytest.fixture(scope="module")
def previewed_site(tmp_path_factory, tiny_model) -> tuple[Path, subprocess.CompletedProcess]:
    """Every kind of page (ablation and comparison included), with a site_url and hostile user text."""
    project = tmp_path_factory.mktemp("previews")
    other = make_tiny_bert(project / "other-model", seed=1)
    done = reportgen_build(project, tiny_config(
        tiny_model, site_url=SITE_URL_GIVEN, compare={"model": str(other), "name": "other <i>model</i>"},
        ablation={"limit": 24, "seeds": [0], "fractions": [0.0, 0.5], "bootstrap_samples": 100, "permutations": 100}))
    return project / "site", done


@pytest.mark.slow
def test_every_page_has_its_preview_with_absolute_urls_and_a_picture_it_holds(previewed_site):
    site, _ = previewed_site
    pages = sorted(path.name for path in site.glob("*.html") if path.name != "404.html")
    assert {"index.html", "statistics.html", "patterns.html", "ablation.html", "compare.html", "examples.html",
            "glossary.html", "manifest.html", "example-1.html", "example-1-qk.html", "example-2.html"} <= set(pages)
    for name in pages:
        tags = meta_tags(site / name)
        assert set(OG + TWITTER) <= set(tags), (name, sorted(tags))
        assert tags["og:url"] == SITE_URL + name
        assert tags["og:image"] == tags["twitter:image"] and tags["og:image"].startswith(SITE_URL + "charts/")
        picture = site / tags["og:image"].removeprefix(SITE_URL)
        assert picture.is_file() and picture.read_bytes().startswith(previews.PNG_SIGNATURE), name
        assert (int(tags["og:image:width"]), int(tags["og:image:height"])) == previews.png_size(picture, name)
        assert tags["twitter:card"] == "summary_large_image" and tags["og:type"] == "website"
        assert tags["og:site_name"] == " ".join(HOSTILE_TITLE.split())
        assert tags["og:title"] == tags["twitter:title"] and tags["og:title"].endswith(tags["og:site_name"])
        assert tags["og:description"] == tags["twitter:description"]
        assert 20 < len(tags["og:description"]) <= previews.DESCRIPTION_CHARS and "\n" not in tags["og:description"]
    assert "404.html" in {path.name for path in site.glob("*.html")}


@pytest.mark.slow
def test_each_page_shows_its_own_picture_and_sentence(previewed_site):
    import json

    site, _ = previewed_site
    report = json.loads((site / "report.json").read_text(encoding="utf-8"))
    tags = {name: meta_tags(site / name) for name in ("index.html", "statistics.html", "patterns.html",
                                                      "ablation.html", "compare.html", "glossary.html",
                                                      "example-2.html", "example-2-qk.html")}
    image = {name: tag["og:image"].removeprefix(SITE_URL) for name, tag in tags.items()}
    assert image["index.html"] == image["glossary.html"] == previews.HEAD_MAP
    assert image["statistics.html"] == "charts/statistics--chart-entropy.png"
    assert image["patterns.html"] == "charts/patterns--chart-previous-token.png"
    assert image["ablation.html"] == "charts/ablation--chart-single-heads.png"
    assert image["compare.html"] == "charts/compare--compare-previous-token-3.png"
    assert image["example-2.html"] == image["example-2-qk.html"] == previews.example_head_map(2)
    assert tags["ablation.html"]["og:image:alt"] == "Change in Spearman with one head masked"  # the chart's title
    assert tags["compare.html"]["og:image:alt"] == previews.CHART_ALT["compare-previous-token-3"]
    findings = {finding["id"]: finding["sentence"] for finding in report["findings"]}
    said = {name: tag["og:description"].removesuffix("\u2026") for name, tag in tags.items()}
    assert report["headline"]["baseline"]["sentence"].startswith(said["index.html"])
    assert findings["patterns-previous-token"].startswith(said["patterns.html"])
    assert findings["ablation-single-heads"].startswith(said["ablation.html"])
    assert tags["example-2.html"]["og:description"].startswith("Example 2 of ")
    assert tags["example-2.html"]["og:description"].endswith("i went to the store. / the dog sat.")
    assert "other <i>model</i>" in tags["compare.html"]["og:description"]


@pytest.mark.slow
def test_user_text_in_the_tags_stays_text(previewed_site):
    site, _ = previewed_site
    tags = meta_tags(site / "example-1.html")
    assert tags["og:description"].endswith(": " + " ".join(HOSTILE_TEXT.split()))  # read back as written
    for name in ("index.html", "example-1.html", "example-1-qk.html", "compare.html"):
        html = (site / name).read_text(encoding="utf-8")
        head = html[:html.index("</head>")]
        for payload in ("<img src=x", "<svg onload", "<b>report", "<i>model"):
            assert payload not in head, (name, payload)
        assert "&lt;img src=x onerror=alert(1)&gt;" in head and "&#34;&lt;b&gt;report&lt;/b&gt;&#34;" in head


@pytest.mark.slow
def test_with_a_site_url_the_build_says_nothing_about_previews(previewed_site):
    _, done = previewed_site
    lines = said(done)
    assert len(lines) == 1 and lines[0].startswith("Built ")
    assert previews.NEEDS_SITE_URL not in done.stderr


@pytest.mark.slow
def test_without_a_site_url_no_tags_and_the_build_says_so_once(default_site):
    """The embedded default's `reportgen build` (no config, so no site_url; tests/conftest.py keeps what it printed
    on stdout and on stderr): the note once on stdout, nothing on stderr about it, no preview tag on any page."""
    printed = (default_site.parent / "build.log").read_text(encoding="utf-8")
    errors = (default_site.parent / "build.err").read_text(encoding="utf-8")
    lines = [line for line in printed.splitlines() if line.strip() and not is_progress(line)]
    assert lines[0].startswith("Built ") and lines[1:] == [previews.NEEDS_SITE_URL], lines
    assert previews.NEEDS_SITE_URL not in errors and "warning" not in errors
    for page in default_site.glob("*.html"):
        assert meta_tags(page) == {}, page.name
