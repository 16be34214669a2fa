"""The site stage: the report and the view payloads in, a finished site out.

Pages are rendered from templates into a staging directory beside the output, MkDocs turns
them into the site, and only then is the site swapped in (reportgen.site.output), so a failed or
interrupted build leaves the previous site as it was. Nothing here computes a number.
"""

from __future__ import annotations

import html
import math
import shutil
from pathlib import Path

import yaml
from markupsafe import Markup

from reportgen.findings import names
from reportgen.progress import Callback, silent
from reportgen.report import Example, ExampleHead, ExamplePattern, ExampleViews, Report, head_link
from reportgen.runs import LiveModel
from reportgen.site import (
    build_progress,
    exports,
    glossary,
    live_page,
    output,
    pages,
    previews,
    references,
    story,
    view_files,
    views,
)
from reportgen.site.charts import chartdata, finding_pictures, patching_charts
from reportgen.site.charts.head_map_svg import example_figure, findings_figures
from reportgen.site.charts.value_map_svg import value_map
from reportgen.site.export_cache import NO_CACHE, ExportCache
from reportgen.site.mkdocs_site import mkdocs_build
from reportgen.site.sources import site_sources
from reportgen.site.token_text import SPACE_MARK, shown_token


def write_site(report: Report, example_views: list[ExampleViews], out: output.Output,
               progress: Callback = silent, reproducible: bool = False, cache_dir: Path | None = None,
               live: LiveModel | None = None) -> None:
    """Build the whole site in staging beside the output, then swap it in.

    With a site_url, each page's link preview (reportgen.site.previews) goes into its front matter once
    every page and chart is written: a step of its own, so no page's render call carries it.
    With a `cache_dir` (the config's), every picture a build drew before is copied from it
    (reportgen.site.export_cache) instead of drawn again: the same bytes, in a fraction of the time.
    With `live` (config `views.live`), the "Your sentence" page and the model's weights beside it."""
    cache = ExportCache(cache_dir) if cache_dir is not None else NO_CACHE
    with output.staging(out) as staging:
        docs = staging / "docs"
        src, base_config = site_sources()
        # the in-browser model's scripts only where its page is: a site without it stays as light as before
        shutil.copytree(src / "assets", docs / "assets",
                        ignore=None if live else shutil.ignore_patterns(*live_page.SCRIPTS))
        exports.write_vega_bundle(docs / "assets" / "javascripts" / "vega-bundle.js", cache)
        live_fields = live_page.write_live_files(docs, live, report.examples[0]) if live else None
        nav = write_pages(report, example_views, src / "templates", docs, progress, cache, live_fields)
        previews.add_to_pages(report, nav, docs)
        (docs / "report.json").write_text(report.to_json(), encoding="utf-8")
        exports.write_json(docs / "manifest.json", report.manifest.model_dump(mode="json"))
        mkdocs_build(base_config, src / "overrides", report.title, report.site_url, docs, staging / "site",
                     menu(nav), reproducible)
        (staging / "site" / ".nojekyll").write_text("", encoding="utf-8")  # GitHub Pages: serve as is
        if report.progress is not None and not report.progress.interrupted:  # its note's live line, as masks finish
            build_progress.write_progress(staging / "site", report.progress)
        output.mark(staging / "site")
        output.swap(staging / "site", out, partial=report.progress is not None)


def write_pages(report: Report, example_views: list[ExampleViews], templates: Path, docs: Path,
                progress: Callback = silent, cache: ExportCache = NO_CACHE, live: dict | None = None) -> list:
    """Every Markdown page and chart export (pictures from `cache` when it has them); returns the MkDocs nav.
    `live`: the "Your sentence" page's fields (reportgen.site.live_page), or None for no such page."""
    env = pages.environment(templates)
    recorder = pages.Charts(pictures=report.progress is None)  # a partial site: its charts' data only
    stats = report.statistics
    pages.render(env, "home.md.j2", docs / "index.md", report=report, findings=report.findings,
                 headline=report.headline, lead=story.lead(report),
                 task_data=names.task_data(report.ablation.task.data) if report.ablation else None,
                 head_maps=findings_figures(report, docs / "charts", cache),  # the head map(s), the first's PNG
                 pictures=finding_pictures.rendered(report, cache, example_views))  # finding id -> its pictures
    seq2seq = report.groups is not None  # an encoder-decoder's decoder atlas is a page beside its encoder's
    if report.decoder is not None:  # a decoder's own atlas: its patterns and their causal nulls
        # an encoder-decoder's decoder self-attention: a page beside its encoder's (and links opening its group)
        pages.render(env, "decoder_patterns.md.j2", docs / ("decoder-patterns.md" if seq2seq else "patterns.md"),
                     recorder, report=report, stats=report.decoder, group="decoder" if seq2seq else None,
                     sections=chartdata.decoder_sections(report.decoder, "decoder" if seq2seq else None))
    if report.cross is not None:
        pages.render(env, "cross_attention.md.j2", docs / "cross-attention.md", recorder, report=report,
                     stats=report.cross, sections=chartdata.cross_sections(report.cross))
    if report.statistics is not None:
        pages.render(env, "statistics.md.j2", docs / "statistics.md", recorder, report=report, stats=stats,
                     charts=chartdata.statistics_charts(stats))
        pages.render(env, "patterns.md.j2", docs / "patterns.md", recorder, report=report, stats=stats,
                     sections=chartdata.pattern_sections(stats, example_views),
                     conventions=chartdata.conventions(stats), similarity=chartdata.similarity_chart(stats))
    write_glossary(env, docs, report.atlases)
    write_references(env, docs)
    if report.ablation or report.progress:  # a build still running has the page, saying where it stands
        pages.render(env, "ablation.md.j2", docs / "ablation.md", recorder, report=report, ablation=report.ablation,
                     charts=chartdata.ablation_charts(report.ablation) if report.ablation else {})
    if report.patching:
        pages.render(env, "patching.md.j2", docs / "patching.md", recorder, report=report, patching=report.patching,
                     charts=patching_charts.patching_charts(report.patching, report.groups),
                     significant=patching_charts.significant_rows(report.patching, report.groups),
                     agreement=patching_charts.agreement_rows(report.patching, report.groups))
    if report.comparison:
        pages.render(env, "compare.md.j2", docs / "compare.md", recorder, report=report,
                     comparison=report.comparison, sections=chartdata.comparison_sections(report))
    pages.render(env, "examples.md.j2", docs / "examples.md", report=report)
    if live is not None:
        pages.render(env, "your_sentence.md.j2", docs / live_page.PAGE, report=report, live=live)
    manifest = report.manifest.model_dump(mode="json")
    pages.render(env, "manifest.md.j2", docs / "manifest.md", manifest=manifest,
                 config_yaml=Markup(html.escape(yaml.safe_dump(manifest["config"], sort_keys=True,
                                                               allow_unicode=True))))
    example_nav = [{"All examples": "examples.md"}]
    selectivity = stats.settings["thresholds"].get("boundary_selectivity") if stats else None
    for done, (example, example_view) in enumerate(zip(report.examples, example_views, strict=True), 1):
        example_nav.append({nav_label(example): write_example(env, recorder, docs, example, example_view,
                                                              selectivity, report, cache)})
        progress("Writing pages", done, len(example_views))
    exports.export_charts(recorder.recorded, docs / "charts", progress, cache)
    patterns_nav = ([{"Encoder patterns": "patterns.md"}, {"Decoder patterns": "decoder-patterns.md"},
                     {"Cross-attention": "cross-attention.md"}] if seq2seq else [{"Attention patterns": "patterns.md"}])
    return [{"Findings": "index.md"}, *([{"Attention statistics": "statistics.md"}] if stats else []),
            *patterns_nav,
            *([{"Head ablation": "ablation.md"}] if report.ablation or report.progress else []),
            *([{"Activation patching": "patching.md"}] if report.patching else []),
            *([{"Model comparison": "compare.md"}] if report.comparison else []),
            {"Examples": example_nav}, *([{"Your sentence": live_page.PAGE}] if live is not None else []),
            {"Glossary": glossary.PAGE}, {"References": references.PAGE}, {"Run manifest": "manifest.md"}]


def one_line(text: str) -> str:
    """User text for a one-line label: its runs of whitespace (newlines too) as single spaces."""
    return " ".join(text.split())


def nav_label(example: Example) -> str:
    """An example's entry in the menu, by its name where it has one ("3. Negation"), so a reader can find
    an example without opening each (issue 28); plain text: menu() escapes it for Material."""
    name = one_line(example.name or "")
    return f"{example.id}. {name}" if name else f"Example {example.id}"


def menu(nav: list) -> list:
    """The nav as MkDocs gets it: every label HTML-escaped once, since Material prints nav titles
    unescaped (example names are user text). The unescaped nav stays for the link previews, whose
    template escapes what it prints."""
    return [{html.escape(label, quote=True): menu(target) if isinstance(target, list) else target
             for label, target in entry.items()} for entry in nav]


def page_title(example: Example) -> str:
    """The example page's title in the browser's tab and the header ("Example 3: Negation"): Material prints
    a page's front-matter title unescaped, so it is HTML-escaped here (the name is user text)."""
    name = one_line(example.name or "")
    return html.escape(f"Example {example.id}: {name}" if name else f"Example {example.id}", quote=True)


def example_pager(examples: list[Example], index: int) -> dict:
    """The previous and next example of examples[index] ({"id", "name"}, or None at either end), for the
    links at the foot of its page."""
    def entry(at: int) -> dict | None:
        if not 0 <= at < len(examples):
            return None
        return {"id": examples[at].id, "name": one_line(examples[at].name or "") or None}
    return {"previous": entry(index - 1), "next": entry(index + 1)}


def write_references(env, docs: Path) -> None:
    """The references page (reportgen.site.references): each work's full citation and its link."""
    def link(url: str | None) -> Markup | None:
        return Markup(f'<a href="{html.escape(url)}">{html.escape(url)}</a>') if url else None

    entries = [{"ref": ref, "link": link(ref.url)} for ref in references.REFERENCES]
    pages.render(env, "references.md.j2", docs / references.PAGE, references=entries)


def write_glossary(env, docs: Path, atlases: tuple[str, ...] = ("encoder",)) -> None:
    """The glossary page: every term the pages link to (reportgen.site.glossary), then the names of the
    patterns this site measures (a decoder's, an encoder's, or an encoder-decoder's both: names.on_site)."""
    terms = [{"id": term.id, "name": term.name, "definition": pages.prose(term.definition)}
             for term in glossary.TERMS]
    patterns = [{"key": key, "name": entry.name, "short": pages.prose(entry.short),
                 "term": glossary.BY_ID[entry.term] if entry.term else None}
                for key, entry in names.PATTERNS.items() if names.on_site(key, atlases)]
    pages.render(env, "glossary.md.j2", docs / glossary.PAGE, terms=terms, patterns=patterns)


SEGMENT_CLASS = {0: "a", 1: "b", -1: "special"}
# Example and query/key pages: no table of contents, so the views get the page's width, and the
# navigation in the header's menu on a desktop too (reportgen.css).
WIDE = {"hide": ["toc"]}


def write_example(env, recorder: pages.Charts, docs: Path, example: Example, example_view: ExampleViews,
                  selectivity: float | None, report: Report, cache: ExportCache = NO_CACHE) -> str:
    """An example's page (and its query/key page); returns the page's name for the nav.

    `selectivity`: the boundary-selectivity threshold a head must pass to be listed for "other
    pieces of the same word" (the page says why the list can be empty). `report`: for the page's
    head map, which marks the heads whose masking matters on the task (and writes its PNG, from `cache`
    when a build drew it before)."""
    page = f"example-{example.id}.md"
    index = next(at for at, other in enumerate(report.examples) if other.id == example.id)
    tokens = [{"text": text, "segment": SEGMENT_CLASS[segment]}
              for text, segment in zip(example_view.tokens, example_view.segments, strict=True)]
    spaced = any(SPACE_MARK in token["text"] for token in tokens)  # the page says what ␣ means
    views_html, qk_html = view_files.example_pages(docs, example.id, example_view.payload,
                                                   example_view.qk_payload if example.qk_page else None,
                                                   qk_href=example.qk_page)
    pages.render(env, "example.md.j2", docs / page, recorder, front_matter={**WIDE, "title": page_title(example)},
                 ex=example, tokens=tokens, spaced=spaced, pager=example_pager(report.examples, index),
                 views=Markup(views_html),
                 contributions="contributions" in example_view.payload,
                 ln_n=uniform_entropy(example.n_tokens, report.causal_examples),
                 decoder=report.causal_examples,
                 patterns=[example_pattern(example.id - 1, found) for found in example.patterns],
                 selectivity=selectivity, summary_chart=chartdata.example_entropy_chart(example.entropy),
                 summary_picture=value_map(example.entropy, "Attention entropy on this example",
                                           "entropy (nats)", _same_page, " nats"),
                 head_map=example_figure(report, example, docs / "charts", cache))
    if example.qk_page:
        pages.render(env, "example_qk.md.j2", docs / f"example-{example.id}-qk.md", front_matter=WIDE, ex=example,
                     check=example_view.qk_payload["check"], terms=example_view.qk_payload.get("terms", []),
                     masks=views.qk_masks(example_view.qk_payload),
                     qk=Markup(qk_html))
    return page


def uniform_entropy(tokens: int, causal: bool) -> float:
    """A uniform head's entropy, the example page's reference: ln n, or for a decoder's head, which sees
    q + 1 tokens at token q, the mean of ln(q + 1) over the tokens after the first."""
    if not causal:
        return math.log(tokens)
    return sum(math.log(seen) for seen in range(2, tokens + 1)) / max(tokens - 1, 1)


def example_pattern(index: int, found: ExamplePattern) -> dict:
    """One seed pattern on one example as its page lists it: the pattern's name, whether it is weak,
    and each head with a link that opens the head view there (0-based example `index`)."""
    return {"key": found.pattern, "name": pages.prose(names.name(found.pattern)), "threshold": found.threshold,
            "weak": found.weak, "heads": [_example_head(index, head) for head in found.heads]}


def _same_page(layer: int, head: int) -> str:
    """The head view of `layer` and `head` on the page it is on: the views' own state as an anchor."""
    return "#" + head_link(0, layer, head).partition("#")[2]


def _example_head(index: int, head: ExampleHead) -> dict:
    """A head of an example's pattern list, linked to the head view with the token that shows it pinned:
    the query when there is one, else the key (e.g. [CLS] for the delimiter pattern)."""
    # Built here from numbers, so marked as markup on purpose: an anchor on the same page (MkDocs
    # leaves it as it is), the views' own state (views-core.js parseHash), which a click applies.
    _, anchor = head_link(index, head.layer, head.head, head.query, head.key).split("#")
    return {"layer": head.layer, "head": head.head, "value": head.value, "url": Markup("#" + anchor),
            "query_token": _shown(head.query_token), "key_token": _shown(head.key_token), "weight": head.weight}


def _shown(token: str | None) -> str | None:
    return None if token is None else shown_token(token)
