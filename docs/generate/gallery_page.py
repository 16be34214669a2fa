"""The gallery page: one card per report docs/gallery.py built (docs/gallery/built/gallery.json), each with what it
is, the model and what its findings page says first (reportgen.site.story's take-home sentence, from the report
itself), a link to the report and the report's findings page embedded below. With nothing built, the page says how
to build the gallery."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

from reportgen.report import Report
from reportgen.site.story import lead

BUILT = Path(__file__).resolve().parent.parent / "gallery" / "built"
GALLERY = "gallery"  # where the reports go in the built docs: gallery/NAME/index.html


def folder() -> Path:
    """Where docs/gallery.py put the reports: docs/gallery/built, or REPORTGEN_DOCS_GALLERY (the docs' tests)."""
    return Path(os.environ.get("REPORTGEN_DOCS_GALLERY") or BUILT)


def built(where: Path | None = None) -> list[dict]:
    """The entries of gallery.json whose report is there."""
    where = where or folder()
    listing = where / "gallery.json"
    if not listing.is_file():
        return []
    entries = json.loads(listing.read_text(encoding="utf-8"))
    return [entry for entry in entries if (where / entry["name"] / "report.json").is_file()]


def render() -> str:
    where = folder()
    entries = built(where)
    if not entries:
        return ("!!! note \"No reports built here\"\n    This copy of the docs was built without the gallery's "
                "reports. `python docs/gallery.py` builds them (a few minutes on two cores), then `mkdocs build -f "
                "docs/mkdocs.yml` puts them here.\n")
    return "\n".join(_card(entry, Report.load(where / entry["name"] / "report.json")) for entry in entries)


def _card(entry: dict, report: Report) -> str:
    href = f"{GALLERY}/{entry['name']}/index.html"
    name = html.escape(entry["name"])
    title = html.escape(entry["title"])
    shape = f"{report.layers} layers x {report.heads} heads" if report.groups is None else (
        f"{report.layers} attention layers (encoder, decoder and cross) of {report.heads} heads")
    facts = (f"{html.escape(report.model.name)} ({html.escape(report.model.model_type)}, {shape}), "
             f"{len(report.examples)} examples; config `{entry['config']}`.")
    return f"""## {entry['title']} {{#{name}}}

{entry['about']}

- **Model**: {facts}
- **What its findings page says first**: {html.escape(lead(report).take_home)}

[Open the report]({href}){{: .md-button }}

<iframe class="gallery-report" src="{href}" title="{title}: the findings page" loading="lazy"></iframe>
"""
