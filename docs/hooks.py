"""MkDocs hooks of reportgen's documentation (docs/mkdocs.yml): a page's line `<!-- generated: NAME -->` becomes
the Markdown docs/generate/ writes from the code (the configuration, report.json, Python API and command-line
references, the gallery), the gallery's built reports are copied under gallery/, and the reports' own
iframe-worker shim (site_src/) lets search run from file://."""

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
SHIM = "assets/javascripts/iframe-worker-shim.js"


def on_page_markdown(markdown: str, page, **_) -> str:
    def generated(match: re.Match) -> str:
        if match.group(1) not in PAGES:
            raise ValueError(f"{page.file.src_uri}: no generated part named {match.group(1)!r}")
        return PAGES[match.group(1)]()

    return MARKER.sub(generated, markdown)


def on_files(files, config):
    files.append(File.generated(config, SHIM, abs_src_path=str(ROOT / "site_src" / SHIM)))
    for entry in gallery_page.built():
        report = gallery_page.folder() / entry["name"]
        for path in sorted(report.rglob("*")):
            if path.is_file():
                uri = f"{gallery_page.GALLERY}/{entry['name']}/{path.relative_to(report).as_posix()}"
                files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
