"""The references page lists every work the pages cite by author and year (issue 47), with a full citation.

The citations are read from everything that writes page text: the templates, the glossary, the findings, the
pattern names and the chart descriptions; a citation a page gains without an entry fails here."""

from __future__ import annotations

import html
import re

import pytest

from reportgen.site import pages, references
from tests.helpers import ROOT

# "Clark et al. 2019", "Clark et al. (2019)", "Okabe and Ito 2008", "Holm 1979", "Maurer, Hothorn and Lehmacher 1995"
CITATION = re.compile(r"\b((?:de )?[A-Z][a-z]+(?:(?:, [A-Z][a-z]+)* and [A-Z][a-z]+| et al\.)?) \(?((?:19|20)\d\d)\b")
NOT_CITATIONS = {"In", "Since", "ACL", "Dec"}  # a year after an ordinary word
SOURCES = [*(ROOT / "site_src" / "templates").glob("*.j2"), ROOT / "reportgen" / "site" / "glossary.py",
           *(ROOT / "reportgen" / "findings").glob("*.py"), *(ROOT / "reportgen" / "site" / "charts").glob("*.py")]


def cited(text: str) -> set[str]:
    return {f"{who} {year}" for who, year in CITATION.findall(text) if who.split()[0] not in NOT_CITATIONS}


def test_the_pattern_finds_citations_in_their_forms():
    text = ("as Clark et al. (2019) read it; Holm 1979; Okabe and Ito 2008, and Maurer, Hothorn and Lehmacher 1995 "
            "(de Leeuw 1977). In 2023 nothing.")
    assert cited(text) == {"Clark et al. 2019", "Holm 1979", "Okabe and Ito 2008",
                           "Maurer, Hothorn and Lehmacher 1995", "de Leeuw 1977"}


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_every_work_a_page_cites_is_on_the_references_page(source):
    listed = {ref.cite for ref in references.REFERENCES}
    missing = cited(source.read_text(encoding="utf-8")) - listed
    assert not missing, f"{source.name} cites {sorted(missing)}, which references.REFERENCES does not list"


def test_each_entry_has_a_full_citation_an_anchor_and_a_use():
    ids = [ref.id for ref in references.REFERENCES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z0-9]+", i) for i in ids)
    for ref in references.REFERENCES:
        year = ref.cite[-4:]
        assert f"({year})" in ref.full and ref.used_for, ref
        assert ref.url is None or ref.url.startswith("https://"), ref


def test_the_page_lists_each_work_with_its_link(tmp_path):
    from reportgen.site.writer import write_references

    write_references(pages.environment(ROOT / "site_src" / "templates"), tmp_path)
    # user-proof printing writes some characters as references (&#72;olm: no glossary link inside a citation)
    page = html.unescape((tmp_path / references.PAGE).read_text(encoding="utf-8"))
    for ref in references.REFERENCES:
        assert f'<li id="{ref.id}"><strong>{ref.cite}</strong>' in page, ref.id
        if ref.url:
            assert f'<a href="{ref.url}">{ref.url}</a>' in page
