"""Printing (issue 15): the findings page and each analysis page print to A4 and Letter with no navigation
or controls, every chart drawn as SVG inside the printed width (none clipped, none scrolled), tables that
fit, links as text, and a PDF of a sane number of pages.

Chromium with `emulate_media(media="print")` at the width the paper leaves for the text (the paper less
print.css's side margins), on the default site (findings, statistics, patterns, ablation) and a tiny
site with a second model (the comparison page).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT, BrowserPage, make_tiny_bert, wait_until, write_config

pytestmark = pytest.mark.slow

PAPERS = {"A4": (210.0, 297.0), "Letter": (215.9, 279.4)}  # mm
PX_PER_MM = 96 / 25.4
HIDDEN = [".md-header", ".md-tabs", ".md-sidebar--primary", ".md-sidebar--secondary", ".md-footer", ".md-search",
          ".rg-downloads", ".rg-copy-link", ".rg-finding-links"]
ALWAYS_THERE = [".md-header", ".md-sidebar--primary", ".md-footer", ".md-search"]  # so a hidden check can fail


def page_margins() -> tuple[float, float]:
    """(top and bottom, left and right) margin in mm, as print.css's @page rule sets them."""
    css = (ROOT / "site_src" / "assets" / "stylesheets" / "print.css").read_text(encoding="utf-8")
    found = re.search(r"@page\s*\{\s*margin:\s*([\d.]+)mm\s+([\d.]+)mm;", css)
    assert found, "print.css sets the page's margins as `@page { margin: <v>mm <h>mm; }`"
    return float(found.group(1)), float(found.group(2))


def printed_size(paper: str) -> tuple[int, int]:
    """The text area of a page of `paper`, in CSS pixels."""
    (width, height), (vertical, horizontal) = PAPERS[paper], page_margins()
    return int((width - 2 * horizontal) * PX_PER_MM), int((height - 2 * vertical) * PX_PER_MM)


ALL_DRAWN = "() => [...document.querySelectorAll('.rg-chart')].every(chart => chart.querySelector('svg'))"
MEASURE = """(hidden) => {
  const width = document.documentElement.clientWidth;
  const rendered = element => element.getClientRects().length > 0;
  const name = element => {
    const owner = element.closest('[id]');
    return element.tagName.toLowerCase() + (owner ? '#' + owner.id : '');
  };
  const content = [...document.querySelectorAll('.md-content *')];
  return {
    width,
    pageWidth: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    shown: hidden.filter(selector => [...document.querySelectorAll(selector)].some(rendered)),
    present: hidden.filter(selector => document.querySelector(selector)),
    charts: document.querySelectorAll('.rg-chart').length,
    drawn: document.querySelectorAll('.rg-chart svg').length,
    outside: [...document.querySelectorAll('.md-content svg, .md-content table, .md-content img, .md-content pre')]
      .filter(rendered).map(element => [name(element), element.getBoundingClientRect()])
      .filter(([, box]) => box.left < -0.5 || box.right > width + 0.5)
      .map(([label, box]) => [label, box.left, box.right]),
    clipped: content.filter(element => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(element).overflowX)
      && element.scrollWidth > element.clientWidth + 1 && element.clientWidth > 0).map(name),
  };
}"""


@pytest.fixture
def printed(new_tab):
    """printed(url, paper) -> (BrowserPage, measurements): the page laid out for print on `paper`."""

    def _open(url: str, paper: str):
        view = new_tab(printed_size(paper))
        view.page.emulate_media(media="print")
        view.page.goto(url)
        view.page.wait_for_load_state("load")
        wait_until(view.page, ALL_DRAWN, timeout=20_000)
        return view, view.page.evaluate(MEASURE, HIDDEN)

    return _open


def pdf_pages(view: BrowserPage, paper: str) -> int:
    pdf = view.page.pdf(format=paper)
    assert pdf.startswith(b"%PDF")
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", pdf))


def check_printed(view: BrowserPage, seen: dict, paper: str, charts: bool) -> None:
    assert seen["shown"] == [], seen["shown"]  # navigation, sidebars, footer, search and controls
    assert set(ALWAYS_THERE) <= set(seen["present"])
    assert seen["charts"] == seen["drawn"] and (seen["drawn"] > 0) == charts
    assert seen["outside"] == [], seen["outside"]  # no chart, table or picture wider than the paper
    assert seen["clipped"] == [], seen["clipped"]  # nothing scrolls sideways or is cut off
    assert seen["pageWidth"] <= seen["width"]
    pages = pdf_pages(view, paper)
    text_height = printed_size(paper)[1]
    # Keeping charts whole leaves space at the foot of some pages, never a page per chart.
    assert math.ceil(seen["height"] / text_height) <= pages <= 2 * math.ceil(seen["height"] / text_height) + 1
    assert view.errors == [] and view.remote_requests == []


@pytest.mark.parametrize("paper", PAPERS)
@pytest.mark.parametrize("page", ["index.html", "statistics.html", "patterns.html", "ablation.html"])
def test_the_findings_and_analysis_pages_print(default_site, printed, page, paper):
    view, seen = printed((default_site / page).as_uri(), paper)
    check_printed(view, seen, paper, charts=page != "index.html")


@pytest.fixture(scope="module")
def compare_site(tmp_path_factory) -> Path:
    from reportgen.config import load_config
    from reportgen.pipeline import build

    project = tmp_path_factory.mktemp("print-compare")
    first, second = (make_tiny_bert(project / name, layers=3, heads=8, seed=seed)
                     for seed, name in enumerate(("first", "second")))
    write_config(project, f"title: Printed comparison\nmodel: {first}\ndevice: cpu\nmax_length: 128\n"
                          f"examples: builtin\nablation: {{enabled: false}}\n"
                          f"compare: {{model: {second}, name: second}}\n")
    build(load_config(project / "reportgen.yaml"))
    return project / "site"


@pytest.mark.parametrize("paper", PAPERS)
def test_the_comparison_page_prints(compare_site, printed, paper):
    view, seen = printed((compare_site / "compare.html").as_uri(), paper)
    check_printed(view, seen, paper, charts=True)


def test_links_print_as_text_and_only_links_out_of_the_site_show_their_address(default_site, printed):
    view, _ = printed((default_site / "index.html").as_uri(), "A4")
    shown = view.page.evaluate("""() => {
      const article = document.querySelector('article');
      const out = document.createElement('a');
      out.href = 'https://example.org/paper.pdf';
      out.textContent = 'the paper';
      article.appendChild(out);
      const after = element => getComputedStyle(element, '::after').content;
      const term = article.querySelector('a.rg-term'), page = article.querySelector('a[href$=".html"]:not(.rg-term)');
      return {out: after(out), term: after(term), page: after(page), text: getComputedStyle(article).color,
              colours: [term, page, out].map(element => getComputedStyle(element).color)};
    }""")
    assert shown["out"] == '" (https://example.org/paper.pdf)"'
    assert shown["term"] in ("none", "normal") and shown["page"] in ("none", "normal")
    assert shown["colours"] == [shown["text"]] * 3


# -- issue 28: paper has no pointer, and page 1 is not a third blank ----------------------------------------
PRINTED_TEXT = """() => {
  const article = document.querySelector('article');
  const shown = element => element.getClientRects().length > 0;
  return {text: article.innerText,
          links: [...article.querySelectorAll('a')].filter(shown).map(a => a.textContent.trim())};
}"""


@pytest.mark.parametrize("page", ["index.html", "statistics.html", "patterns.html", "ablation.html"])
def test_print_has_no_pointer_instructions_and_no_bare_view_links(default_site, printed, page):
    view, _ = printed((default_site / page).as_uri(), "A4")
    seen = view.page.evaluate(PRINTED_TEXT)
    assert not re.findall(r"(?i)\b(?:point at|hover|click)\w*[^.]*", seen["text"])
    assert "(view)" not in seen["text"]
    assert not [text for text in seen["links"] if text.lower() in ("view", "finding")]  # words that need a click
    # a link left out of print takes its space with it (issue 47: "this score ." where "(finding)" was)
    assert not re.findall(r"[\w%)\]] [.,;:]", seen["text"]), re.findall(r".{30}[\w%)\]] [.,;:]", seen["text"])
    screen = printed_on_screen(view)
    assert re.search(r"(?i)\b(?:point at|click)", screen)  # the instructions are there on a screen: the check can fail


def printed_on_screen(view: BrowserPage) -> str:
    view.page.emulate_media(media="screen")
    text = view.page.evaluate("() => document.querySelector('article').innerText")
    view.page.emulate_media(media="print")
    return text


def test_the_head_map_fits_on_page_one_under_the_title_and_summary(default_site, printed):
    """The head map is kept whole (break-inside: avoid): if it did not fit under the summary, page 1 would end
    there, a third or more of it blank."""
    view, _ = printed((default_site / "index.html").as_uri(), "A4")
    bottom = view.page.evaluate("() => document.querySelector('#head-maps').getBoundingClientRect().bottom"
                                " + window.scrollY")
    summary = view.page.evaluate("() => document.querySelector('.rg-summary').getBoundingClientRect().bottom")
    text_height = printed_size("A4")[1]
    assert summary < bottom <= text_height, (summary, bottom, text_height)


def test_an_example_page_prints_its_drawn_view_and_text_not_its_controls(default_site, printed):
    """Issue 47: the view's tabs, menus, head toggles and weights box printed as dead controls. On paper: the
    head view's tokens and lines, the page's text, and none of the controls."""
    view, seen = printed((default_site / "example-1.html").as_uri(), "A4")
    page = view.page
    wait_until(page, "() => document.querySelector('.rgv[data-rgv-state]') !== null", timeout=20_000)
    shown = page.evaluate("""() => Object.fromEntries(['.rgv-toolbar', '.rgv-heads', '.rgv-weights', '.rgv button',
        '.rgv select', '.rgv input', '.rgv-head-panel svg line', '.rgv-tok', '#tokens']
        .map(s => [s, [...document.querySelectorAll(s)].filter(e => e.getClientRects().length > 0).length]))""")
    assert all(shown[selector] == 0 for selector in (".rgv-toolbar", ".rgv-heads", ".rgv-weights", ".rgv button",
                                                     ".rgv select", ".rgv input")), shown
    assert shown[".rgv-head-panel svg line"] > 0 and shown[".rgv-tok"] > 0 and shown["#tokens"] == 1, shown
    assert seen["outside"] == [] and seen["clipped"] == [], seen
