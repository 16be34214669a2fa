"""Site assembly: pages + assets + MkDocs, built in a staging directory and swapped in.

Nothing is written to the output directory until the whole site has been built, so
a failed or interrupted build leaves the previous site as it was.
"""

from __future__ import annotations

import csv
import html
import json
import logging
import math
import os
import re
import shutil
from pathlib import Path

import yaml

from markupsafe import Markup

from reportgen import charts, findings, output, pages, patterns, views
from reportgen.attention import ExampleRun
from reportgen.htmlsafe import chart_text
from reportgen.progress import Callback, silent

PACKAGE_DIR = Path(__file__).parent


def sources() -> tuple[Path, Path]:
    """(site_src directory, base mkdocs.yml): inside the wheel, or at the top of a checkout."""
    bundled = PACKAGE_DIR / "_site_src"
    if bundled.is_dir():
        return bundled, bundled / "mkdocs.yml"
    return PACKAGE_DIR.parent / "site_src", PACKAGE_DIR.parent / "mkdocs.yml"


def write_site(report: dict, runs: list[ExampleRun], out: output.Output,
               progress: Callback = silent, reproducible: bool = False) -> None:
    """Build the whole site in staging beside the output, then swap it in."""
    with output.staging(out) as staging:
        docs = staging / "docs"
        src, base_config = sources()
        shutil.copytree(src / "assets", docs / "assets")
        write_vega_bundle(docs / "assets" / "javascripts" / "vega-bundle.js")
        nav = write_pages(report, runs, src / "templates", docs, progress)
        write_json(docs / "report.json", report)
        write_json(docs / "manifest.json", report["manifest"])
        mkdocs_build(base_config, src / "overrides", report, docs, staging / "site", nav, reproducible)
        (staging / "site" / ".nojekyll").write_text("", encoding="utf-8")  # GitHub Pages: serve as is
        output.mark(staging / "site")
        output.swap(staging / "site", out)


def write_vega_bundle(target: Path) -> None:
    """Vega, Vega-Lite and vega-embed from vl-convert-python, so no page needs a CDN."""
    import vl_convert

    target.write_text(vl_convert.javascript_bundle(), encoding="utf-8")


# The pattern atlas, one section per statistic: (report key, anchor, title, what it measures, extra tooltips).
PATTERN_SECTIONS = [
    ("previous_token", "previous-token", "Previous token",
     "Mean attention on the token just before (Clark et al. 2019, over the queries that have one); "
     "the tooltip adds Voita et al.'s test, the share of queries whose largest weight is on that token.",
     {"previous_token_argmax": "argmax share (Voita)"}),
    ("next_token", "next-token", "Next token",
     "Mean attention on the token just after, with Voita et al.'s argmax share in the tooltip.",
     {"next_token_argmax": "argmax share (Voita)"}),
    ("same_token", "same-word", "Same word",
     "Attention to the token itself and to other occurrences of the same word in the same sentence.", {}),
    ("other_segment", "other-sentence", "Same word in the other sentence",
     "For sentence pairs: attention from a word to its occurrences in the other sentence "
     "(term-matching heads), over the tokens whose word occurs there.", {}),
    ("within_word", "within-word", "Pieces of the same word",
     "Attention from a word piece to the other pieces of its word (e.g. straw / ##berries): "
     "heads that learn word boundaries.", {}),
    ("cls", "cls", "[CLS]", "Share of attention on [CLS] (or <s>).", {}),
    ("sep", "sep", "[SEP]", "Share of attention on [SEP] (or </s>), often a no-op for the head (Clark et al. 2019).", {}),
    ("punctuation", "punctuation", "Punctuation", "Share of attention on '.' and ',' (Clark et al. 2019).", {}),
    ("entropy", "broad", "Broad attention",
     "Mean entropy of the attention rows in nats; high values mean the head spreads its attention.",
     {"effective_share": "exp(entropy) / n"}),
]
TOP_HEADS = 5  # rows of each top-heads table
MATRICES = 3  # top heads per pattern shown as an attention matrix
MATRIX_MAX_TOKENS = 64  # a longer example's matrix is unreadable as a chart (its views show it instead)


def head_link(example: int, layer: int, head: int, suffix: str = ".html") -> str:
    """Deep link into the head view of an example page (state in the hash, see views.js).

    Charts link to the built page (.html); Markdown links name the source page (.md),
    which MkDocs checks and rewrites.
    """
    return f"example-{example + 1}{suffix}#view=head&layer={layer}&head={head}"


def write_pages(report: dict, runs: list[ExampleRun], templates: Path, docs: Path,
                progress: Callback = silent) -> list:
    env = pages.environment(templates)
    recorder = pages.Charts()
    stats = report["statistics"]
    found = findings.pattern_findings(stats) + (findings.ablation_findings(report["ablation"])
                                                if report["ablation"] else [])
    pages.render(env, "home.md.j2", docs / "index.md", report=report, findings=found,
                 headline=findings.headline(report, found))
    pages.render(env, "statistics.md.j2", docs / "statistics.md", recorder, report=report, stats=stats, charts={
        "entropy": charts.head_heatmap(charts.head_rows(stats["entropy"]["mean"], std=stats["entropy"]["std"]),
                                       "Attention entropy (nats)", "entropy", {"std": "std over examples"}),
        "cls_sep": charts.head_heatmap(charts.head_rows(stats["cls_sep"]["mean"], std=stats["cls_sep"]["std"]),
                                       "Share of attention on [CLS]/[SEP]", "share", {"std": "std over examples"}),
    })
    pages.render(env, "patterns.md.j2", docs / "patterns.md", recorder, report=report, stats=stats,
                 sections=pattern_sections(stats, runs), similarity=similarity_chart(stats))
    if report["ablation"]:
        pages.render(env, "ablation.md.j2", docs / "ablation.md", recorder, report=report,
                     ab=report["ablation"], charts=ablation_charts(report["ablation"]))
    if report.get("comparison"):
        pages.render(env, "compare.md.j2", docs / "compare.md", recorder, report=report,
                     comparison=report["comparison"], sections=comparison_sections(report))
    pages.render(env, "examples.md.j2", docs / "examples.md", report=report)
    pages.render(env, "manifest.md.j2", docs / "manifest.md", manifest=report["manifest"],
                 config_yaml=Markup(html.escape(yaml.safe_dump(report["manifest"]["config"], sort_keys=True,
                                                               allow_unicode=True))))
    example_nav = [{"All examples": "examples.md"}]
    for done, (ex, run) in enumerate(zip(report["examples"], runs), 1):
        page = f"example-{ex['id']}.md"
        pages.render(env, "example.md.j2", docs / page, recorder, ex=ex, **example_context(run))
        if ex["qk_page"]:
            pages.render(env, "example_qk.md.j2", docs / f"example-{ex['id']}-qk.md", ex=ex,
                         qk=Markup(views.qk_html(views.qk_payload(run))))
        example_nav.append({f"Example {ex['id']}": page})
        progress("Writing pages", done, len(runs))
    export_charts(recorder.recorded, docs / "charts", progress)
    return [{"Findings": "index.md"}, {"Attention statistics": "statistics.md"},
            {"Attention patterns": "patterns.md"},
            *([{"Head ablation": "ablation.md"}] if report["ablation"] else []),
            *([{"Model comparison": "compare.md"}] if report.get("comparison") else []),
            {"Examples": example_nav}, {"Run manifest": "manifest.md"}]


def pattern_sections(stats: dict, runs: list[ExampleRun]) -> list[dict]:
    """Per pattern: heatmap spec, top heads, attention matrices of the strongest heads."""
    sections = []
    for key, anchor, title, description, extra in PATTERN_SECTIONS:
        stat = stats[key]
        rows = charts.head_rows(stat["mean"], std=stat["std"], example=stat["example"],
                                **{name: stats[name]["mean"] for name in extra})
        for row in rows:
            if row["example"] is not None and row["example"] >= 0:
                row["url"] = head_link(row["example"], row["layer"], row["head"])
        # The link is built here from numbers, so it is marked as markup on purpose (templates
        # print every plain string as inert text, which would break its '#' and '&').
        top = [dict(h, url=Markup(head_link(h["example"], h["layer"], h["head"], ".md")) if h["example"] >= 0
                    else None)
               for h in stats["top_heads"][key][:TOP_HEADS]]
        matrices = [charts.attention_matrix([chart_text(t) for t in runs[h["example"]].tokens],
                                            runs[h["example"]].attention[h["layer"], h["head"]].round(4).tolist(),
                                            f"Layer {h['layer']}, head {h['head']}, example {h['example'] + 1}")
                    for h in top[:MATRICES] if h["example"] >= 0 and key != "entropy"
                    and runs[h["example"]].n_tokens <= MATRIX_MAX_TOKENS]
        sections.append({"key": key, "id": anchor, "title": title, "description": description,
                         "count": stat["count"], "heatmap": charts.head_heatmap(
                             rows, title, "mean", {"std": "std over examples", **extra}),
                         "top": top, "matrices": matrices})
    return sections


def ablation_charts(ab: dict) -> dict:
    """Chart specs for each ablation experiment that ran; heads link to their view on example 1."""
    out = {}
    metric = ab["task"]["metric"]
    if "single_heads" in ab:
        sh = ab["single_heads"]
        rows = charts.head_rows(sh["delta"], metric=sh["value"], p_adjusted=sh["p_adjusted"],
                                significant=sh["significant"])
        for row in rows:
            row["url"] = head_link(0, row["layer"], row["head"])
        out["single_heads"] = charts.delta_heatmap(rows, f"Change in {metric} with one head masked", "change")
    if "whole_layers" in ab:
        wl = ab["whole_layers"]
        rows = [{"layer": layer, "value": wl["delta"][layer], "p_adjusted": wl["p_adjusted"][layer],
                 "significant": wl["significant"][layer], "url": f"example-1.html#view=model&layer={layer}"}
                for layer in wl["layers"]]
        out["whole_layers"] = charts.layer_bars(rows, f"Change in {metric} with a whole layer masked", "change")
    if "random_fraction" in ab:
        rf = ab["random_fraction"]
        out["random_fraction"] = charts.metric_curves(
            _curve_rows(rf, "random heads"), f"Relative change in {metric}, heads masked at random",
            "heads masked", "relative change")
    if "layer_halves" in ab:
        lh = ab["layer_halves"]
        rows = _curve_rows({"fractions": lh["fractions"], **lh["lower"]}, "lower layers")
        rows += _curve_rows({"fractions": lh["fractions"], **lh["upper"]}, "upper layers")
        out["layer_halves"] = charts.metric_curves(rows, f"Relative change in {metric}: lower vs upper layers",
                                                   "share of all heads masked", "relative change")
    if "importance" in ab:
        imp = ab["importance"]
        rows = charts.head_rows(imp["importance"])
        for row in rows:
            row["url"] = head_link(0, row["layer"], row["head"])
        out["importance"] = charts.head_heatmap(rows, "Head importance (Michel et al. 2019)", "importance")
        pr, ro = imp["pruning"], imp["random_order"]
        base = pr["baseline"]
        curve = [{"x": f, "mean": rel, "low": rel, "high": rel, "group": "least important first"}
                 for f, rel in zip(pr["fractions"], pr["relative"])]
        spread = [_relative(v, base) for v in zip(*ro["values"])]  # per fraction, over seeds
        curve += [{"x": f, "mean": ro["relative_mean"][i], "low": min(spread[i], default=None),
                   "high": max(spread[i], default=None), "group": "random order"}
                  for i, f in enumerate(pr["fractions"])]
        out["pruning"] = charts.metric_curves(curve, f"Pruning: relative change in {metric}",
                                              "heads pruned", "relative change")
    return out


def comparison_sections(report: dict) -> list[dict]:
    """Per pattern (and ablation result): both models' heatmaps and, when shapes agree, their difference."""
    other = report["comparison"]
    # User text (a directory name, compare.name) in chart and tooltip titles: one line, nothing Vega cannot show.
    names = tuple(chart_text(" ".join(info["name"].split()), tooltip_title=True)
                  for info in (report["model"], other["model"]))
    sections = []
    grids = [(key, anchor, title) for key, anchor, title, _, _ in PATTERN_SECTIONS]
    grids += [("delimiter", "delimiter", "[CLS], [SEP] and punctuation")]
    for key, anchor, title in grids:
        a, b = report["statistics"][key]["mean"], other["statistics"][key]["mean"]
        sections.append(_comparison(f"compare-{anchor}", title, a, b, names, other["same_shape"]))
    if report["ablation"] and other["ablation"] and "single_heads" in report["ablation"]:
        a, b = report["ablation"]["single_heads"]["delta"], other["ablation"]["single_heads"]["delta"]
        metric = report["ablation"]["task"]["metric"]
        sections.append(_comparison("compare-ablation-single-heads", f"Change in {metric}, one head masked",
                                    a, b, names, other["same_shape"]))
    if report["ablation"] and other["ablation"] and "whole_layers" in report["ablation"]:
        rows = [{"x": layer, "group": name, "value": value}
                for name, ab in zip(names, (report["ablation"], other["ablation"]))
                for layer, value in enumerate(ab["whole_layers"]["delta"])]
        sections.append({"id": "compare-ablation-whole-layers", "title": "Change with a whole layer masked",
                         "charts": [charts.grouped_bars(rows, "Change in the metric per masked layer",
                                                        "layer masked", "change")]})
    return sections


def _comparison(anchor: str, title: str, a: list, b: list, names: tuple[str, str], same_shape: bool) -> dict:
    specs = [charts.head_heatmap(charts.head_rows(grid), name, "mean") for grid, name in zip((a, b), names)]
    if same_shape:
        rows = [dict(row, a=row["value"], b=b[row["layer"]][row["head"]],
                     value=None if row["value"] is None or b[row["layer"]][row["head"]] is None
                     else b[row["layer"]][row["head"]] - row["value"])
                for row in charts.head_rows(a)]
        specs.append(charts.difference_heatmap(rows, "Difference", names))
    return {"id": anchor, "title": title, "charts": specs}


def _relative(values, base: float | None) -> list[float]:
    return [(v - base) / abs(base) for v in values if v is not None and base]


def _curve_rows(sweep: dict, group: str) -> list[dict]:
    """Mean relative change per fraction with the min-max over seeds as the band."""
    rows = []
    for i, fraction in enumerate(sweep["fractions"]):
        values = [v for v in sweep["relative"][i] if v is not None]
        rows.append({"x": fraction, "mean": sweep["relative_mean"][i], "low": min(values, default=None),
                     "high": max(values, default=None), "group": group})
    return rows


def similarity_chart(stats: dict) -> dict | None:
    similarity = stats.get("similarity")
    if not similarity:
        return None
    points = []
    for point in similarity["points"]:
        source = stats[stats["label_stats"].get(point["label"], "entropy")]
        example = source["example"][point["layer"]][point["head"]]
        points.append(dict(point, url=head_link(max(example, 0), point["layer"], point["head"])))
    return charts.head_scatter(points, "Heads placed by the similarity of their attention")


def export_charts(recorded: list[tuple[str, str, dict]], target: Path, progress: Callback = silent) -> None:
    """Each chart as PNG and SVG (rendered here by vl-convert, no browser) and its data as CSV and JSON."""
    import vl_convert

    target.mkdir(parents=True, exist_ok=True)
    for done, (page, chart_id, spec) in enumerate(recorded, 1):
        stem = target / f"{page}--{chart_id}"
        stem.with_suffix(".svg").write_text(_number_ids(vl_convert.vegalite_to_svg(spec)), encoding="utf-8")
        stem.with_suffix(".png").write_bytes(vl_convert.vegalite_to_png(spec, scale=2))
        rows = spec["data"]["values"]
        with open(stem.with_suffix(".csv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            writer.writeheader()
            writer.writerows(rows)
        write_json(stem.with_suffix(".json"), rows)
        progress("Exporting charts", done, len(recorded))


def example_context(run: ExampleRun) -> dict:
    segment = {0: "a", 1: "b", -1: "special"}
    return {
        "views": Markup(views.views_html(views.example_payload(run))),
        "tokens": [{"text": t, "segment": segment[int(s)]} for t, s in zip(run.tokens, run.segment_ids)],
        "ln_n": math.log(run.n_tokens),
        "summary_chart": charts.head_heatmap(charts.head_rows(patterns.entropy(run.attention).round(4).tolist()),
                                     "Attention entropy on this example (nats)", "entropy"),
    }


class ThemeTitle(str):
    """The site title (user text) as Material's templates need it.

    They print site_name unescaped into <title>, the header and the nav, so the value is the
    HTML-escaped title. The header logo's title attribute is printed through `|e`, and
    Material's tooltips copy that attribute's text into the page as HTML: there `__html__`
    (which `|e` calls) escapes once more, so the tooltip shows the title as text too.
    """

    def __html__(self) -> str:
        return html.escape(self, quote=True)


def mkdocs_build(base_config: Path, overrides: Path, report: dict, docs: Path, site_dir: Path, nav: list,
                 reproducible: bool = False) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    cfg = yaml.safe_load(base_config.read_text(encoding="utf-8"))
    # site_url was checked by the config (an http(s) URL without quotes, brackets or spaces);
    # MkDocs prints it unescaped in each page's canonical link.
    cfg["site_url"] = report["site_url"]
    cfg.update(docs_dir=str(docs), site_dir=str(site_dir), nav=nav, strict=False)
    cfg["theme"]["custom_dir"] = str(overrides)  # main.html: the Content-Security-Policy
    config_file = docs.parent / "mkdocs.yml"
    config_file.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    logging.getLogger("mkdocs").setLevel(logging.WARNING)
    # MkDocs dates the sitemap with SOURCE_DATE_EPOCH when set: fixed for reproducible builds.
    previous = os.environ.get("SOURCE_DATE_EPOCH")
    if reproducible:
        os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        mkdocs_config = load_config(str(config_file))
        mkdocs_config["site_name"] = ThemeTitle(html.escape(" ".join(report["title"].split()), quote=True))
        build(mkdocs_config)
    finally:
        if reproducible and previous is None:
            os.environ.pop("SOURCE_DATE_EPOCH")
        elif reproducible:
            os.environ["SOURCE_DATE_EPOCH"] = previous


def _number_ids(svg: str) -> str:
    """Vega numbers gradient/clip ids with a process-wide counter; renumber them per file so
    that identical charts give identical files (reproducible builds)."""
    ids: dict[str, str] = {}
    return re.sub(r"\b(gradient|clip)(_?\d+)\b",
                  lambda m: ids.setdefault(m.group(0), f"{m.group(1)}_rg{len(ids) + 1}"), svg)


def write_json(target: Path, data) -> None:
    target.write_text(json.dumps(data, indent=1, sort_keys=True, allow_nan=False), encoding="utf-8")
