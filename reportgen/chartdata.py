"""The report's numbers shaped into chart rows, one function per page section.

charts.py knows how a chart looks; this module knows which numbers go into which chart and
where a cell links to. Plain report records in, Vega-Lite specs out.
"""

from __future__ import annotations

from markupsafe import Markup

from reportgen import charts
from reportgen.htmlsafe import chart_text
from reportgen.report import (
    Ablation,
    ExampleViews,
    Importance,
    LayerHalves,
    PatternStatistics,
    Report,
    Sweep,
    head_link,
    model_link,
)

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
    ("sep", "sep", "[SEP]",
     "Share of attention on [SEP] (or </s>), often a no-op for the head (Clark et al. 2019).", {}),
    ("punctuation", "punctuation", "Punctuation", "Share of attention on '.' and ',' (Clark et al. 2019).", {}),
    ("entropy", "broad", "Broad attention",
     "Mean entropy of the attention rows in nats; high values mean the head spreads its attention.",
     {"effective_share": "exp(entropy) / n"}),
]
TOP_HEADS = 5  # rows of each top-heads table
MATRICES = 3  # top heads per pattern shown as an attention matrix


def statistics_charts(stats: PatternStatistics) -> dict:
    return {
        "entropy": charts.head_heatmap(charts.head_rows(stats.entropy.mean, std=stats.entropy.std),
                                       "Attention entropy (nats)", "entropy", {"std": "std over examples"}),
        "cls_sep": charts.head_heatmap(charts.head_rows(stats.cls_sep.mean, std=stats.cls_sep.std),
                                       "Share of attention on [CLS]/[SEP]", "share", {"std": "std over examples"}),
    }


def pattern_sections(stats: PatternStatistics, views: list[ExampleViews]) -> list[dict]:
    """Per pattern: heatmap spec, top heads, attention matrices of the strongest heads."""
    return [_pattern_section(stats, views, *section) for section in PATTERN_SECTIONS]


def _pattern_section(stats: PatternStatistics, views: list[ExampleViews], key: str, anchor: str, title: str,
                     description: str, extra: dict[str, str]) -> dict:
    statistic = stats[key]
    rows = charts.head_rows(statistic.mean, std=statistic.std, example=statistic.example,
                            **{name: stats[name].mean for name in extra})
    for row in rows:
        if row["example"] is not None and row["example"] >= 0:
            row["url"] = head_link(row["example"], row["layer"], row["head"])
    # The link is built here from numbers, so it is marked as markup on purpose (templates
    # print every plain string as inert text, which would break its '#' and '&').
    top = [dict(head.model_dump(), url=Markup(_source_link(head.example, head.layer, head.head))
                if head.example >= 0 else None)
           for head in stats.top_heads[key][:TOP_HEADS]]
    matrices = []
    if key != "entropy":
        for head in top[:MATRICES]:
            example = views[head["example"]] if head["example"] >= 0 else None
            weights = example.matrices.get((head["layer"], head["head"])) if example else None
            if weights is not None:
                matrices.append(charts.attention_matrix(
                    [chart_text(t) for t in example.tokens], weights,
                    f"Layer {head['layer']}, head {head['head']}, example {head['example'] + 1}"))
    return {"key": key, "id": anchor, "title": title, "description": description, "count": statistic.count,
            "heatmap": charts.head_heatmap(rows, title, "mean", {"std": "std over examples", **extra}),
            "top": top, "matrices": matrices}


def _source_link(example: int, layer: int, head: int) -> str:
    """A head link as Markdown names it: the source page (.md), which MkDocs checks and rewrites."""
    page, anchor = head_link(example, layer, head).split("#")
    return f"{page.removesuffix('.html')}.md#{anchor}"


def ablation_charts(ablation: Ablation) -> dict:
    """Chart specs for each ablation experiment that ran; heads link to their view on example 1."""
    out = {}
    metric = ablation.task.metric
    if ablation.single_heads:
        tests = ablation.single_heads
        rows = charts.head_rows(tests.delta, metric=tests.value, p_adjusted=tests.p_adjusted,
                                significant=tests.significant)
        for row in rows:
            row["url"] = head_link(0, row["layer"], row["head"])
        out["single_heads"] = charts.delta_heatmap(rows, f"Change in {metric} with one head masked", "change")
    if ablation.whole_layers:
        tests = ablation.whole_layers
        rows = [{"layer": layer, "value": tests.delta[layer], "p_adjusted": tests.p_adjusted[layer],
                 "significant": tests.significant[layer], "url": model_link(layer)}
                for layer in tests.layers]
        out["whole_layers"] = charts.layer_bars(rows, f"Change in {metric} with a whole layer masked", "change")
    if ablation.random_fraction:
        sweep = ablation.random_fraction
        out["random_fraction"] = charts.metric_curves(
            _curve_rows(sweep.fractions, sweep, "random heads"),
            f"Relative change in {metric}, heads masked at random", "heads masked", "relative change")
    if ablation.layer_halves:
        out["layer_halves"] = _layer_halves_chart(ablation.layer_halves, metric)
    if ablation.importance:
        out.update(_importance_charts(ablation.importance, metric))
    return out


def _layer_halves_chart(halves: LayerHalves, metric: str) -> dict:
    rows = (_curve_rows(halves.fractions, halves.lower, "lower layers")
            + _curve_rows(halves.fractions, halves.upper, "upper layers"))
    return charts.metric_curves(rows, f"Relative change in {metric}: lower vs upper layers",
                                "share of all heads masked", "relative change")


def _importance_charts(importance: Importance, metric: str) -> dict:
    rows = charts.head_rows(importance.importance)
    for row in rows:
        row["url"] = head_link(0, row["layer"], row["head"])
    pruning, random_order = importance.pruning, importance.random_order
    curve = [{"x": f, "mean": rel, "low": rel, "high": rel, "group": "least important first"}
             for f, rel in zip(pruning.fractions, pruning.relative, strict=True)]
    spread = [[v for v in column if v is not None]  # per fraction, over the orders
              for column in zip(*random_order.relative, strict=True)]
    curve += [{"x": f, "mean": random_order.relative_mean[i], "low": min(spread[i], default=None),
               "high": max(spread[i], default=None), "group": "random order"}
              for i, f in enumerate(pruning.fractions)]
    return {"importance": charts.head_heatmap(rows, "Head importance (Michel et al. 2019)", "importance"),
            "pruning": charts.metric_curves(curve, f"Pruning: relative change in {metric}",
                                            "heads pruned", "relative change")}


def _curve_rows(fractions: list[float], sweep: Sweep, group: str) -> list[dict]:
    """Mean relative change per fraction with the min-max over seeds as the band."""
    rows = []
    for i, fraction in enumerate(fractions):
        values = [v for v in sweep.relative[i] if v is not None]
        rows.append({"x": fraction, "mean": sweep.relative_mean[i], "low": min(values, default=None),
                     "high": max(values, default=None), "group": group})
    return rows


def comparison_sections(report: Report) -> list[dict]:
    """Per pattern (and ablation result): both models' heatmaps and, when shapes agree, their difference."""
    other = report.comparison
    # User text (a directory name, compare.name) in chart and tooltip titles: one line, nothing Vega cannot show.
    names = tuple(chart_text(" ".join(info.name.split()), tooltip_title=True)
                  for info in (report.model, other.model))
    sections = []
    grids = [(key, anchor, title) for key, anchor, title, _, _ in PATTERN_SECTIONS]
    grids += [("delimiter", "delimiter", "[CLS], [SEP] and punctuation")]
    for key, anchor, title in grids:
        first, second = report.statistics[key].mean, other.statistics[key].mean
        sections.append(_comparison(f"compare-{anchor}", title, first, second, names, other.same_shape))
    both = report.ablation and other.ablation
    if both and report.ablation.single_heads and other.ablation.single_heads:
        first, second = report.ablation.single_heads.delta, other.ablation.single_heads.delta
        metric = report.ablation.task.metric
        sections.append(_comparison("compare-ablation-single-heads", f"Change in {metric}, one head masked",
                                    first, second, names, other.same_shape))
    if both and report.ablation.whole_layers and other.ablation.whole_layers:
        rows = [{"x": layer, "group": name, "value": value}
                for name, ablation in zip(names, (report.ablation, other.ablation), strict=True)
                for layer, value in enumerate(ablation.whole_layers.delta)]
        sections.append({"id": "compare-ablation-whole-layers", "title": "Change with a whole layer masked",
                         "charts": [charts.grouped_bars(rows, "Change in the metric per masked layer",
                                                        "layer masked", "change")]})
    return sections


def _comparison(anchor: str, title: str, first: list, second: list, names: tuple[str, str],
                same_shape: bool) -> dict:
    specs = [charts.head_heatmap(charts.head_rows(grid), name, "mean")
             for grid, name in zip((first, second), names, strict=True)]
    if same_shape:
        rows = []
        for row in charts.head_rows(first):
            other = second[row["layer"]][row["head"]]
            difference = None if row["value"] is None or other is None else other - row["value"]
            rows.append(dict(row, a=row["value"], b=other, value=difference))
        specs.append(charts.difference_heatmap(rows, "Difference", names))
    return {"id": anchor, "title": title, "charts": specs}


def similarity_chart(stats: PatternStatistics) -> dict | None:
    if not stats.similarity:
        return None
    points = []
    for point in stats.similarity.points:
        source = stats[stats.label_stats.get(point.label, "entropy")]
        example = source.example[point.layer][point.head]
        points.append(dict(point.model_dump(), url=head_link(max(example, 0), point.layer, point.head)))
    return charts.head_scatter(points, "Heads placed by the similarity of their attention")


def example_entropy_chart(entropy: list[list[float | None]]) -> dict:
    return charts.head_heatmap(charts.head_rows(entropy), "Attention entropy on this example (nats)", "entropy")
