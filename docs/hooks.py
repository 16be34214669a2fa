"""MkDocs hooks of reportgen's documentation (docs/mkdocs.yml): a page's line `<!-- generated: NAME -->` becomes
the Markdown docs/generate/ writes from the code (the configuration, report.json, Python API and command-line
references, the gallery), the gallery's built reports are copied under gallery/, and the reports' own
assets (site_src/) are added: search from file://, the same accessibility fixes and link style."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs.generate import api_page, cli_page, config_page, gallery_page, report_page  # noqa: E402 - after sys.path

PAGES = {
    "config-reference": config_page.render,
    "report-schema": report_page.render,
    "python-api": api_page.render,
    "cli": cli_page.render,
    "gallery": gallery_page.render,
}
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.M)
# What the docs take from the reports' own assets (site_src/): the iframe-worker shim lets search run from file://,
# a11y.js names the search dialog and puts wide tables in the tab order, reportgen.css underlines links in text.
FROM_SITE_SRC = ("assets/javascripts/iframe-worker-shim.js", "assets/javascripts/a11y.js",
                 "assets/stylesheets/reportgen.css")


def on_page_markdown(markdown: str, page, **_) -> str:
    def generated(match: re.Match) -> str:
        if match.group(1) not in PAGES:
            raise ValueError(f"{page.file.src_uri}: no generated part named {match.group(1)!r}")
        return PAGES[match.group(1)]()

    return MARKER.sub(generated, markdown)


def on_files(files, config):
    for uri in FROM_SITE_SRC:
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / "site_src" / uri)))
    for entry in gallery_page.built():
        report = gallery_page.folder() / entry["name"]
        for path in sorted(report.rglob("*")):
            if path.is_file():
                uri = f"{gallery_page.GALLERY}/{entry['name']}/{path.relative_to(report).as_posix()}"
                files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
