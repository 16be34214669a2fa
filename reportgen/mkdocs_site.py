"""Running MkDocs (Material) on the rendered Markdown pages."""

from __future__ import annotations

import html
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml


class ThemeTitle(str):
    """The site title (user text) as Material's templates need it.

    They print site_name unescaped into <title>, the header and the nav, so the value is the
    HTML-escaped title. The header logo's title attribute is printed through `|e`, and
    Material's tooltips copy that attribute's text into the page as HTML: there `__html__`
    (which `|e` calls) escapes once more, so the tooltip shows the title as text too.
    """

    def __html__(self) -> str:
        return html.escape(self, quote=True)


def mkdocs_build(base_config: Path, overrides: Path, title: str, site_url: str | None, docs: Path,
                 site_dir: Path, nav: list, reproducible: bool = False) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    cfg = yaml.safe_load(base_config.read_text(encoding="utf-8"))
    # site_url was checked by the config (an http(s) URL without quotes, brackets or spaces);
    # MkDocs prints it unescaped in each page's canonical link.
    cfg["site_url"] = site_url
    cfg.update(docs_dir=str(docs), site_dir=str(site_dir), nav=nav, strict=False)
    cfg["theme"]["custom_dir"] = str(overrides)  # main.html: the Content-Security-Policy
    config_file = docs.parent / "mkdocs.yml"
    config_file.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    logging.getLogger("mkdocs").setLevel(logging.WARNING)
    with _source_date(reproducible):
        mkdocs_config = load_config(str(config_file))
        mkdocs_config["site_name"] = ThemeTitle(html.escape(" ".join(title.split()), quote=True))
        build(mkdocs_config)


@contextmanager
def _source_date(reproducible: bool) -> Iterator[None]:
    """MkDocs dates the sitemap with SOURCE_DATE_EPOCH when set: fixed for reproducible builds."""
    previous = os.environ.get("SOURCE_DATE_EPOCH")
    if reproducible:
        os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        yield
    finally:
        if reproducible and previous is None:
            os.environ.pop("SOURCE_DATE_EPOCH")
        elif reproducible:
            os.environ["SOURCE_DATE_EPOCH"] = previous
