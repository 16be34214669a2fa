"""Running MkDocs (Material) on the rendered Markdown pages, and trimming what it writes."""

from __future__ import annotations

import html
import logging
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import jinja2
import yaml
from markupsafe import Markup

from reportgen.site import csp


def mkdocs_build(base_config: Path, overrides: Path, title: str, site_url: str | None, docs: Path,
                 site_dir: Path, nav: list, reproducible: bool = False) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    cfg = yaml.safe_load(base_config.read_text(encoding="utf-8"))
    # site_url was checked by the config (an http(s) URL without quotes, brackets or spaces);
    # MkDocs prints it unescaped in each page's canonical link.
    cfg["site_url"] = site_url
    cfg.update(docs_dir=str(docs), site_dir=str(site_dir), nav=nav, strict=False)
    cfg["theme"]["custom_dir"] = str(overrides)  # main.html: the Content-Security-Policy (csp.py)
    config_file = docs.parent / "mkdocs.yml"
    config_file.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    logging.getLogger("mkdocs").setLevel(logging.WARNING)
    with _source_date(reproducible):
        mkdocs_config = load_config(str(config_file))
        _keep_compiled_templates(mkdocs_config.theme)
        # The title is user text. Material prints site_name unescaped into <title>, the header and the
        # navigation, and through `|e` into the logo's title attribute: as Markup (escaped here, once),
        # it reads the same in all of them.
        mkdocs_config["site_name"] = Markup(html.escape(" ".join(title.split()), quote=True))
        build(mkdocs_config)
    theme_dirs = [Path(folder) for folder in mkdocs_config.theme.dirs if Path(folder).resolve() != overrides.resolve()]
    remove_unused_theme_files(site_dir, docs, theme_dirs, mkdocs_config.plugins["material/search"].config.lang)
    if not site_url:
        relative_error_page(site_dir / "404.html")
    csp.pin_site(site_dir)  # last: the hashes are of the pages' final scripts


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled Jinja templates kept in memory for the life of the process.

    MkDocs makes a new Jinja environment for every site it builds, so Material's templates were compiled
    again for each write: about a tenth of a small site's build, and a build writes its site twice (before
    the ablation and when finished), `serve --watch` and the Python API more often. Jinja checks each
    entry against the template's source before it uses it, so an edited template is compiled anew."""

    def __init__(self) -> None:
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if (code := self.code.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()


_COMPILED: dict[frozenset[str], _CompiledTemplates] = {}  # by the environment's extensions (i18n or not)


def _keep_compiled_templates(theme) -> None:
    """The theme's environments (Theme.get_env, which mkdocs.commands.build calls) share one cache."""
    make_env = theme.get_env

    def get_env() -> jinja2.Environment:
        env = make_env()
        env.bytecode_cache = _COMPILED.setdefault(frozenset(env.extensions), _CompiledTemplates())
        return env

    theme.get_env = get_env


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


SEARCH_SCRIPTS = Path("assets/javascripts/lunr")


def search_scripts(langs: list[str]) -> set[str]:
    """The files under assets/javascripts/lunr that Material's search worker imports for `langs`.

    Its loader (Material 9, workers/search.*.js) imports nothing for English alone; otherwise the
    stemmer support, lunr.<lang> for each language but English, the multi-language plugin for more
    than one, and a word segmenter for Japanese, Hindi and Thai.
    """
    files = {f"min/lunr.{lang}.min.js" for lang in langs if lang != "en"}
    if len(langs) > 1:
        files.add("min/lunr.multi.min.js")
    if "ja" in langs:
        files.add("tinyseg.js")
    if {"hi", "th"} & set(langs):
        files.add("wordcut.js")
    return files | {"min/lunr.stemmer.support.min.js"} if files else files


def remove_unused_theme_files(site_dir: Path, docs: Path, theme_dirs: list[Path], langs: list[str]) -> None:
    """Takes out of the site what the theme copied in and no page loads: the source maps of its
    JavaScript and CSS (1.3 MB) and the search language packs of languages the site is not searched
    in (964 KB for English, which needs none).

    Only a file that one of `theme_dirs` holds and the docs (reportgen's own files) do not is removed."""
    needed = {SEARCH_SCRIPTS / name for name in search_scripts(langs)}
    for path in sorted(site_dir.rglob("*"), reverse=True):  # a folder's files before the folder
        relative = path.relative_to(site_dir)
        in_search = relative.is_relative_to(SEARCH_SCRIPTS)
        if path.is_dir():
            if in_search and not any(path.iterdir()):
                path.rmdir()
            continue
        unused = relative.suffix == ".map" or (in_search and relative not in needed)
        if unused and not (docs / relative).exists() and any((theme / relative).is_file() for theme in theme_dirs):
            path.unlink()


# How MkDocs links the error page without a site_url: from the server root ("/assets/...").
_ROOT_LINK = re.compile(r'(\s(?:href|src)=")/(?!/)')
_ROOT_CONFIG = re.compile(r'("(?:base|search)":\s*")/')


def relative_error_page(page: Path) -> None:
    """404.html with links relative to the site's folder, as every other page has them.

    MkDocs links the error page from the server root unless site_url says where the site lives (a
    missing page may be asked for at any depth), so opened from file://, or served below a server's
    root, it loaded none of its styles and scripts. The site's pages all sit in one folder: relative
    links serve the error page for any missing page there. With a site_url, MkDocs' links stay."""
    text = _ROOT_LINK.sub(r"\1", page.read_text(encoding="utf-8"))
    text = _ROOT_CONFIG.sub(r"\1", text).replace('"base": ""', '"base": "."')
    page.write_text(text, encoding="utf-8")
