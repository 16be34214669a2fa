"""A Markdown extension (mkdocs.yml `reportgen.site.term_links`): every glossary term a page uses
becomes a link to its entry on the glossary page, with the definition as its title, which
Material shows as a tooltip (`content.tooltips`). Nothing remote is involved, so it works from file://.

It runs on the element tree after the inline patterns, so it sees only text the page put
there: raw HTML blocks (the views, the charts, example texts in <p> and <table> blocks) and
character references are stored aside as placeholders, and user text printed in Markdown is
shielded by pages.environment (glossary.shield). Links, code, headings and buttons are left as
they are, also when written as inline HTML (a link inside a link is invalid; a heading's text is
also its table-of-contents entry).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from markdown import Extension, Markdown
from markdown.treeprocessors import Treeprocessor
from markdown.util import HTML_PLACEHOLDER, AtomicString

from reportgen.site import glossary

SKIPPED = ("a", "abbr", "button", "code", "kbd", "pre", "script", "style", "h1", "h2", "h3", "h4", "h5", "h6")
SECTIONS = ("h1", "h2")  # a term is linked once after each of these
_STASHED = re.compile(re.escape(HTML_PLACEHOLDER).replace("%s", r"(\d+)"))
_OPENS = re.compile(rf"<({'|'.join(SKIPPED)})[\s>]", re.IGNORECASE)
_CLOSES = re.compile(rf"</({'|'.join(SKIPPED)})\s*>", re.IGNORECASE)


def _link(match: re.Match, tail: str) -> etree.Element:
    term = glossary.term_for(match.group())
    link = etree.Element("a", {"href": f"{glossary.PAGE}#{term.id}", "class": "rg-term", "title": term.definition})
    link.text = AtomicString(match.group())
    link.tail = tail
    return link


def _pieces(text: str, ranges: list[tuple[int, int]], seen: set[str]) -> tuple[str, list[etree.Element]]:
    """`text` split into what stays before the first term and a link per term (later text in its tail);
    only terms inside `ranges` (the parts outside inline <a>, <code>, ... tags) and not in `seen` (the ids
    of the terms its section has linked already, to which it adds) are linked."""
    matches = []
    for m in glossary.PATTERN.finditer(text):
        term = glossary.term_for(m.group()).id
        if term not in seen and any(a <= m.start() and m.end() <= b for a, b in ranges):
            seen.add(term)
            matches.append(m)
    if not matches:
        return text, []
    ends = [m.start() for m in matches[1:]] + [len(text)]
    links = [_link(match, text[match.end():end]) for match, end in zip(matches, ends, strict=True)]
    return text[:matches[0].start()], links


class TermLinks(Treeprocessor):
    """Walks the page in document order; `inside` counts the inline HTML tags of SKIPPED that are open.

    A term is linked at its first use in each section (what follows an h1 or h2) only: a page whose every
    "Spearman" was underlined read as a sea of links (issue 47)."""

    def run(self, root: etree.Element) -> None:
        self.inside = 0
        self.seen: set[str] = set()
        self._walk(root)

    def _walk(self, parent: etree.Element) -> None:
        children = list(parent)
        parent.text, links = self._linked(parent.text)
        parent[0:0] = links
        for child in children:
            if child.tag in SECTIONS:
                self.seen.clear()
            if child.tag not in SKIPPED:
                self._walk(child)
            child.tail, links = self._linked(child.tail)
            at = list(parent).index(child) + 1
            parent[at:at] = links

    def _linked(self, text: str | None) -> tuple[str | None, list[etree.Element]]:
        if not text or isinstance(text, AtomicString):
            return text, []
        return _pieces(text, self._open_ranges(text), self.seen)

    def _open_ranges(self, text: str) -> list[tuple[int, int]]:
        """The stretches of `text` outside inline <a>, <button>, <code>, ... (stored aside by Python-Markdown)."""
        ranges, start = [], 0
        for placeholder in _STASHED.finditer(text):
            stashed = self.md.htmlStash.rawHtmlBlocks[int(placeholder.group(1))]
            # An inline tag is stored alone ("<a href=...>", then "</a>"); a raw block whole, so its own
            # tags cancel out ("<script ...>...</script>") and change nothing.
            raw = stashed if isinstance(stashed, str) else ""
            change = len(_OPENS.findall(raw)) - len(_CLOSES.findall(raw))
            if change and self.inside == 0:
                ranges.append((start, placeholder.start()))
            self.inside = max(0, self.inside + change)
            if change and self.inside == 0:
                start = placeholder.end()
        if self.inside == 0:
            ranges.append((start, len(text)))
        return ranges


class TermLinksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # After the inline patterns (20) and attr_list (8), before the table of contents (5)
        # and MkDocs's link rewriting (0), which turns glossary.md into the built page's address.
        md.treeprocessors.register(TermLinks(md), "reportgen_term_links", 7)


def makeExtension(**kwargs) -> TermLinksExtension:  # noqa: N802 (the name Python-Markdown looks for)
    return TermLinksExtension(**kwargs)
