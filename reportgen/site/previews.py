"""Link previews: what a page shows when its address is pasted into a chat or an issue.

Open Graph (https://ogp.me) and Twitter cards ask each page for a title, a one-sentence
description and a picture, all with absolute URLs, so they need the site's public address
(the config's `site_url`). This module picks them from the report as plain data: the
sentence is the page's leading finding (the site's own words, report.findings) or one built
from the report, the picture the head map or the page's main chart, as PNG files the site
stage has already written. `add_to_pages` merges them into the front matter of the rendered
Markdown pages, where MkDocs reads them as `page.meta.preview`; site_src/overrides/main.html
prints the tags, escaped, from them and MkDocs' `config.site_url` and `page.canonical_url`.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from reportgen.report import Example, Finding, Report
from reportgen.site.exports import PNG_SIGNATURE

META_KEY = "preview"  # page.meta.preview in overrides/main.html
DESCRIPTION_CHARS = 200  # chat clients cut longer descriptions anyway, mid-word
NEEDS_SITE_URL = ("note: link previews (Open Graph and Twitter cards) need the site's public address; "
                  "set site_url in the config to add them to every page")

# The head map PNGs (written by reportgen.site.charts.head_map_svg through the site stage): the findings
# page's, which also stands for the pages without a chart of their own, and each example's.
HEAD_MAP = "charts/index--head-map.png"


def example_head_map(example_id: int) -> str:
    return f"charts/example-{example_id}--head-map.png"


# Each analysis page's lead, in order of preference: (main chart, the finding that says what it
# shows). The first chart the page drew is its preview's picture (charts/<page>--<chart>.png),
# and the finding's first sentence its description; an ablation experiment that was switched
# off draws no chart and is passed over. The compare page's difference map exists only for
# models of the same shape, else the first model's map stands for the page.
LEADS: dict[str, list[tuple[str, str | None]]] = {
    "statistics": [("chart-entropy", "patterns-broad")],
    "patterns": [("chart-previous-token", "patterns-previous-token")],
    "ablation": [("chart-single-heads", "ablation-single-heads"),
                 ("chart-random-fraction", "ablation-random-fraction"),
                 ("chart-layer-halves", "ablation-layer-halves"),
                 ("chart-whole-layers", "ablation-whole-layers"),
                 ("chart-importance", "ablation-importance")],
    "compare": [("compare-previous-token-3", None), ("compare-previous-token-1", None)],
}
# The picture's description where the chart's own title does not say enough alone.
CHART_ALT = {
    "compare-previous-token-3": "Previous-token attention per head: the second model minus the first",
    "compare-previous-token-1": "Previous-token attention per head of the first model",
}


@dataclass(frozen=True)
class Preview:
    """One page's preview, as its front matter holds it: plain text, escaped only where printed."""

    title: str
    description: str
    image: str  # relative to the site, e.g. charts/index--head-map.png
    image_alt: str
    site_name: str


def add_to_pages(report: Report, nav: list, docs: Path) -> None:
    """Puts each page's preview into its front matter, after every page and chart is written.

    A separate step rather than an argument of each page's render call: the previews need the
    finished pages (which charts each drew) and files (the PNGs), and the render calls stay
    about their pages. Without a site_url it does nothing: tags with relative URLs are ignored
    by every client that reads them. A picture that was not written is a bug and stops the build.
    """
    if not report.site_url:
        return
    for page, preview in page_previews(report, nav, docs).items():
        width, height = png_size(docs / preview.image, page)
        merge_front_matter(docs / page, {**asdict(preview), "image_width": width, "image_height": height})


def page_previews(report: Report, nav: list, docs: Path) -> dict[str, Preview]:
    """Every page (Markdown file name) with its preview; `nav` names the pages as the menu does."""
    labels = nav_labels(nav)
    model, site = one_line(report.model.name), one_line(report.title)
    findings = {finding.id: finding for finding in report.findings}
    previews = {}
    for page, label in labels.items():
        stem = page.removesuffix(".md")
        if stem.startswith("example-"):
            continue  # below, with the query/key pages
        title = site if stem == "index" else f"{label} · {site}"
        chart, finding, alt = lead(stem, docs / page) if stem in LEADS else (None, None, None)
        description = sentence_of(findings.get(finding)) or page_sentence(stem, report, findings)
        if chart and report.progress is None:  # a partial site draws no chart pictures (pages.Charts.pictures)
            image = (f"charts/{stem}--{chart}.png", alt or f"The main chart of the page {label}")
        else:
            image = (HEAD_MAP, f"Head map of {model}: each head coloured by its main attention pattern")
        previews[page] = Preview(title, trimmed(description), *image, site)
    for example in report.examples:
        previews.update(example_previews(example, labels, model, site))
    return previews


def lead(page: str, source: Path) -> tuple[str | None, str | None, str | None]:
    """(chart, finding, the picture's description: CHART_ALT's or the chart's title) of the first of
    LEADS[page] whose chart the page drew (pages.Charts places each chart's spec in a script element
    marked with its id)."""
    text = source.read_text(encoding="utf-8")
    for chart, finding in LEADS[page]:
        placed = re.search(f'data-rg-chart="{re.escape(chart)}">(.*?)</script>', text, re.DOTALL)
        if placed:
            return chart, finding, CHART_ALT.get(chart) or chart_title(json.loads(placed.group(1)))
    return None, None, None


def chart_title(spec: dict) -> str | None:
    """A Vega-Lite spec's title as one line (a string, a list of lines or {"text": ...}); a layered
    chart (a heatmap with its significance marks) has it on a layer."""
    title = spec.get("title") or next((layer["title"] for layer in spec.get("layer", []) if layer.get("title")), None)
    text = title.get("text") if isinstance(title, dict) else title
    lines = text if isinstance(text, list) else [text]
    joined = " ".join(str(line) for line in lines if line)
    return one_line(joined) or None


def example_previews(example: Example, labels: dict[str, str], model: str, site: str) -> dict[str, Preview]:
    """An example's page and its query/key page: its own head map, and its text (user text)."""
    text = one_line(example.text if example.pair is None else f"{example.text} / {example.pair}")
    image = (example_head_map(example.id), f"Head map of {model} on example {example.id}")
    page = f"example-{example.id}.md"
    previews = {page: Preview(f"{labels.get(page, f'Example {example.id}')} · {site}",
                              trimmed(f"Example {example.id} of {model}: {text}"), *image, site)}
    if example.qk_page:
        previews[f"example-{example.id}-qk.md"] = Preview(
            f"Example {example.id}: queries and keys · {site}",
            trimmed(f"Queries and keys of {model} on example {example.id}: {text}"), *image, site)
    return previews


def page_sentence(page: str, report: Report, findings: dict[str, Finding]) -> str:
    """The description of a page without a finding of its own (or whose finding is missing),
    built from the report; the findings page leads with the headline, the baseline's sentence."""
    model, heads = one_line(report.model.name), report.layers * report.heads
    if page == "index":
        headline = report.headline.baseline or (report.findings[0] if report.findings else None)
        return sentence_of(headline) or f"Findings about the {heads} attention heads of {model}."
    if page == "ablation":
        return sentence_of(findings.get("ablation-baseline")) or \
            f"Which of the {heads} heads of {model} the model can lose on its task."
    if page == "compare" and report.comparison:
        return (f"{model} and {one_line(report.comparison.model.name)} side by side, head by head: "
                "each attention pattern in both models and their difference.")
    sentences = {
        "statistics": f"Attention entropy and the share of attention on [CLS] and [SEP] of each of the {heads} "
                      f"heads of {model}.",
        "patterns": f"What each of the {heads} attention heads of {model} does, with the spread and the nulls.",
        "examples": f"The {len(report.examples)} examples of the report on {model}, each with its attention views.",
        "glossary": "The terms the report's pages use, each with its definition.",
        "manifest": f"How the report on {model} was made: the configuration as used, file hashes, versions, "
                    "device, seeds and the time each stage took.",
    }
    return sentences.get(page, f"A page of the report on the attention heads of {model}.")


# A sentence ends at . ! or ? before a capital letter, except after "et al." (the findings cite papers).
_SENTENCE_END = re.compile(r"(?<!\bal\.)(?<=[.!?])\s+(?=[A-Z\[])")


def sentence_of(finding: Finding | None) -> str | None:
    """The first sentence of a finding: a description is one sentence, a finding may be several."""
    if finding is None:
        return None
    return _SENTENCE_END.split(one_line(finding.sentence), maxsplit=1)[0]


_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f]")  # as htmlsafe: no printable text


def one_line(text: str) -> str:
    """User or site text as one line: control characters replaced, whitespace runs folded."""
    return " ".join(_CONTROL.sub("\ufffd", text).split())


def trimmed(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """`text` cut to at most `limit` characters at a word boundary, an ellipsis marking the cut."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:  # a very long word (a URL, a text without spaces) is cut where it is
        cut = cut[:space]
    return cut.rstrip(" ,;:-(") + "\u2026"


def nav_labels(nav: list) -> dict[str, str]:
    """{page file: its label} from MkDocs' nav (a list of one-entry dicts, sections nested)."""
    labels = {}
    for entry in nav:
        for label, target in entry.items():
            if isinstance(target, list):
                labels.update(nav_labels(target))
            else:
                labels[target] = label
    return labels


def png_size(path: Path, page: str) -> tuple[int, int]:
    """(width, height) of a PNG from its header (PNG spec 11.2.2: IHDR is the first chunk).

    Clients lay the card out before fetching the picture when they know its size; and a picture
    that is missing or not a PNG fails the build here, not silently on a reader's screen."""
    if not path.is_file():
        raise FileNotFoundError(f"link preview of {page}: its picture {path.name} was not written")
    with open(path, "rb") as handle:
        head = handle.read(24)
    if not head.startswith(PNG_SIGNATURE) or head[12:16] != b"IHDR":
        raise ValueError(f"link preview of {page}: {path.name} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def merge_front_matter(path: Path, preview: dict) -> None:
    """Adds `preview` under META_KEY to the page's YAML front matter (pages.render's format),
    keeping what is there (Material's `hide`). One line per value (no wrapping), so that no line
    of a value can start with the `---` or `...` that ends MkDocs' front matter."""
    text = path.read_text(encoding="utf-8")
    meta: dict = {}
    if text.startswith("---\n"):
        end = text.index("\n---\n", 3)
        meta = yaml.safe_load(text[4:end + 1]) or {}
        text = text[end + 5:].lstrip("\n")
    meta[META_KEY] = preview
    header = yaml.safe_dump(meta, sort_keys=True, width=float("inf"))
    path.write_text(f"---\n{header}---\n\n{text}", encoding="utf-8")
