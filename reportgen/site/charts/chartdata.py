"""The report's numbers shaped into chart rows, one function per page section.

charts.py knows how a chart looks; this module knows which numbers go into which chart and
where a cell links to. Plain report records in, Vega-Lite specs out.
"""

from __future__ import annotations

from markupsafe import Markup

from reportgen.findings import formatting, names
from reportgen.report import (
    Ablation,
    CrossStatistics,
    DecoderStatistics,
    DelimiterContribution,
    ExampleViews,
    HeadPairs,
    Importance,
    LayerHalves,
    NonInferiority,
    PatternStatistics,
    Report,
    Sweep,
    flat_head_link,
    flat_model_link,
    head_link,
    head_link_expression,
)
from reportgen.site.charts import vegalite
from reportgen.site.htmlsafe import chart_text
from reportgen.site.pages import prose


def _extra(*keys: str) -> dict[str, str]:
    """Statistics shown beside a section's own, by their names: tooltip fields and table columns."""
    return {key: names.name(key) for key in keys}


# The pattern atlas, one section per statistic: (report key, anchor, title, what it measures, statistics
# shown beside it). Titles are the names in reportgen.findings.names.
PATTERN_SECTIONS = [
    ("previous_token", "previous-token", names.name("previous_token"),
     "Mean attention on the token just before, over the tokens that have one. Beside it: Voita et al.'s "
     "argmax share (the share of tokens whose largest weight is on that token) and Clark's /n value.",
     _extra("previous_token_argmax", "previous_token_clark")),
    ("next_token", "next-token", names.name("next_token"),
     "Mean attention on the token just after, over the tokens that have one, with the argmax share and "
     "Clark's /n value beside it.",
     _extra("next_token_argmax", "next_token_clark")),
    ("same_token", "same-word", names.name("same_token"),
     "Attention on the token itself and on other occurrences of the same word in the same sentence.", {}),
    ("other_segment", "other-sentence", names.name("other_segment"),
     "For sentence pairs: attention from a word on its occurrences in the other sentence "
     "(term-matching heads), over the tokens whose word occurs there.", {}),
    ("within_word", "within-word", names.name("within_word"),
     "Attention from a word piece on the other pieces of its word (e.g. straw and ##berries). On short "
     "words the other piece is a neighbour, so a positional head scores high here too: read it with the "
     "boundary selectivity beside it.",
     _extra("boundary_selectivity", "distant_within_word")),
    ("boundary_selectivity", "boundary-selectivity", names.name("boundary_selectivity"),
     "Word structure beyond position: the mean weight on a neighbouring token in the same word minus the "
     "mean weight on a neighbouring token across a word boundary. 0 for any purely positional head; above 0 "
     "for a head that keeps to the pieces of a word.",
     _extra("adjacent_same_word", "adjacent_boundary")),
    ("cls", "cls", names.name("cls"), "Share of attention on [CLS] (or <s>).", {}),
    ("sep", "sep", names.name("sep"),
     "Share of attention on [SEP] (or </s>), often a no-op for the head (Clark et al. 2019).", {}),
    ("punctuation", "punctuation", names.name("punctuation"),
     "Share of attention on '.' and ',' (Clark et al. 2019).", {}),
    ("entropy", "broad", names.name("broad"),
     "Mean entropy of the attention rows in nats; high values mean the head spreads its attention.",
     _extra("effective_share")),
]
# Where each of the report's conventions (PatternStatistics.conventions) is stated: the sections (anchors)
# it applies to, "intro" for the page's introduction and "labels" for the head labels. A convention not
# listed here goes to the introduction; word_level is stated by the template itself.
CONVENTIONS_AT = {"averaging": ("intro",), "segmentation": ("intro",), "nulls": ("intro",), "word_level": (),
                  "positional": ("labels",), "broad": ("labels", "broad"),
                  "denominator": ("previous-token", "next-token"), "entropy_smoothing": ("broad",),
                  "punctuation": ("same-word", "punctuation"), "other_sentence": ("other-sentence",),
                  "within_word": ("labels", "within-word", "boundary-selectivity")}
NULLS = ("uniform", "previous", "next")  # the fields of PatternNull, in the order shown
LEGEND = {"share": "share", "nats": "entropy (nats)", "difference": "difference"}  # per names.Scale
TOP_HEADS = 5  # rows of each top-heads table
DELIMITER_TEST_AFTER = "sep"  # the section after which the patterns page gives the [CLS]/[SEP] no-op test
MATRICES = 3  # top heads per pattern shown as an attention matrix


def strongest_links(rows: list[dict], examples: list[list[int]], mode: str | None = None,
                    group: str | None = None) -> tuple[list[dict], str]:
    """Gives each head's row the example where it shows the statistic most (HeadStatistic.example; None where
    no example does, -1), and the Vega expression of the link to its head view there (head_link_expression),
    in the view's `mode` (contributions for a contribution heatmap) and an encoder-decoder's `group`: the
    heatmap computes each cell's address, and a head without an example gets no link and no pointer."""
    for row in rows:
        example = examples[row["layer"]][row["head"]]
        row["example"] = example if example is not None and example >= 0 else None
    return rows, head_link_expression(mode=mode, group=group)


# A decoder's patterns page, one section per statistic: (report key, anchor, what it measures).
DECODER_SECTIONS = [
    ("induction", "induction",
     "Olsson et al. (2022)'s induction test: the model reads a start token and {n} random tokens twice; at each "
     "token of the second copy, the weight on the token that followed the same token in the first copy. "
     "Random tokens leave a head nothing to go on but the repeat. Spread over the test's {sequences} sequences."),
    ("previous_token", "previous-token", "Mean attention on the token just before, over every token but the first."),
    ("duplicate_token", "duplicate-token",
     "Attention from a token on its own earlier occurrences, over the tokens that occurred before in the same input."),
    ("sink", "sink", "Attention on the first token, whatever it is: an attention sink (Xiao et al. 2023) when large."),
    ("bos_delimiter", "delimiter",
     "Attention on the special tokens ([BOS], [EOS]) and on '.' and ',', over the tokens that see one: the decoder's "
     "side of the [CLS]/[SEP] and punctuation attention Clark et al. (2019) found in BERT."),
    ("causal_entropy", "entropy",
     "Mean entropy of the attention rows over the tokens each one sees, in nats (no smoothing); a uniform causal "
     "head's is the mean of ln(q+1)."),
]


def decoder_sections(stats: DecoderStatistics, group: str | None = None) -> list[dict]:
    """The decoder atlas per statistic that was measured: heatmap, top heads with their strongest example, null;
    an encoder-decoder's decoder self-attention (`group` "decoder") links to that group of the views."""
    out = []
    for key, anchor, description in DECODER_SECTIONS:
        statistic = stats[key]
        if statistic is None:
            continue
        test = stats.induction_test
        scale = names.pattern(key).scale
        linked = strongest_links(vegalite.head_rows(statistic.mean, std=statistic.std), statistic.example,
                                 group=group)
        spread = "std over sequences" if key == "induction" else "std over inputs"
        top = [dict(head.model_dump(), url=Markup(_source_link(head.example, head.layer, head.head, group=group))
                    if head.example >= 0 else None) for head in stats.top_heads.get(key, [])[:TOP_HEADS]]
        out.append({"key": key, "id": anchor, "title": names.name(key),
                    "description": prose(description.format(n=test.n if test else 0,
                                                            sequences=test.sequences if test else 0)),
                    "heatmap": _linked_heatmap(linked, names.name(key), LEGEND[scale], {"std": spread},
                                               names.domain(key)),
                    "null": statistic.null, "queries": statistic.queries, "top": top, "scale": scale})
    return out


# An encoder-decoder's cross-attention page, one section per statistic: (report key, anchor, what it measures).
CROSS_SECTIONS = [
    ("source_special", "source-special",
     "Mean cross-attention on the source's special tokens (its </s>), over every decoder token: where a head with "
     "nothing to take from the source parks its weight, as Clark et al. (2019) read BERT's attention to [SEP]. "
     "A uniform head over the source puts the special tokens' share of the source there."),
    ("entropy", "entropy",
     "Mean entropy of the cross-attention rows over the source, in nats (no smoothing): low when a decoder token "
     "looks at a few source tokens, ln S (S source tokens) for a uniform head."),
]


def cross_sections(stats: CrossStatistics) -> list[dict]:
    """The cross-attention statistics: heatmap, top heads with their strongest example (links open the Cross
    group of the views), null."""
    out = []
    for key, anchor, description in CROSS_SECTIONS:
        statistic, scale = stats[key], names.pattern(key).scale
        linked = strongest_links(vegalite.head_rows(statistic.mean, std=statistic.std), statistic.example,
                                 group="cross")
        top = [dict(head.model_dump(), url=Markup(_source_link(head.example, head.layer, head.head, group="cross")))
               for head in stats.top_heads.get(key, [])[:TOP_HEADS] if head.example >= 0]
        out.append({"key": key, "id": anchor, "title": names.name(key), "description": prose(description),
                    "heatmap": _linked_heatmap(linked, names.name(key), LEGEND[scale], {"std": "std over examples"},
                                               names.domain(key)),
                    "null": statistic.null, "queries": statistic.queries, "top": top, "scale": scale})
    return out


def statistics_charts(stats: PatternStatistics) -> dict:
    """The statistics page's heatmaps; a cell opens that head on the example where it shows the value most."""
    entropy, cls_sep = stats.entropy, stats.cls_sep
    return {
        "entropy": _linked_heatmap(
            strongest_links(vegalite.head_rows(entropy.mean, std=entropy.std), entropy.example),
            "Attention entropy (nats)", "entropy", {"std": "std over examples"}, names.domain("entropy")),
        "cls_sep": _linked_heatmap(
            strongest_links(vegalite.head_rows(cls_sep.mean, std=cls_sep.std), cls_sep.example),
            f"Share of attention on {names.name('cls_sep')}", "share", {"std": "std over examples"},
            names.domain("cls_sep")),
    }


def conventions(stats: PatternStatistics) -> dict[str, list[Markup]]:
    """The conventions as sentences grouped by where the patterns page states them (CONVENTIONS_AT)."""
    placed: dict[str, list[Markup]] = {}
    for key, sentence in stats.conventions.items():
        for where in CONVENTIONS_AT.get(key, ("intro",)):
            placed.setdefault(where, []).append(prose(sentence))
    return placed


def pattern_sections(stats: PatternStatistics, views: list[ExampleViews]) -> list[dict]:
    """Per pattern: heatmap spec, top heads, their nulls, attention matrices of the strongest heads."""
    placed = conventions(stats)
    return [dict(_pattern_section(stats, views, *section), conventions=placed.get(section[1], []))
            for section in PATTERN_SECTIONS]


def _pattern_section(stats: PatternStatistics, views: list[ExampleViews], key: str, anchor: str, title: str,
                     description: str, extra: dict[str, str]) -> dict:
    statistic = stats[key]
    linked = strongest_links(vegalite.head_rows(statistic.mean, std=statistic.std,
                                              **{name: stats[name].mean for name in extra}), statistic.example)
    top = _top_heads(stats, key, extra)
    scale = names.pattern(key).scale
    domain = _domain(stats, key)
    return {"key": key, "id": anchor, "title": title, "description": prose(description), "count": statistic.count,
            "heatmap": _linked_heatmap(linked, title, LEGEND[scale], {"std": "std over examples", **extra}, domain),
            "contribution": _contribution_heatmap(stats, key, title, domain),
            "scale": scale, "columns": [prose(column) for column in extra.values()], "top": top,
            "nulls": _null_rows(stats, key, extra), "matrices": _matrices(views, top) if key != "entropy" else [],
            "delimiter_test": _delimiter_test(stats.contribution.delimiter)
            if key == DELIMITER_TEST_AFTER and stats.contribution and stats.contribution.delimiter else None}


def _domain(stats: PatternStatistics, key: str) -> tuple[float, float] | None:
    """The colour scale of a statistic's heatmaps: the fixed one of its kind (0-1 for shares), else, where
    contributions are drawn beside the weights (entropy), one range over both so that a colour is one value."""
    fixed = names.domain(key)
    if fixed is not None or stats.contribution is None:
        return fixed
    values = [value for grid in (stats[key].mean, stats.contribution.statistics[key].mean)
              for row in grid for value in row if value is not None]
    return (min(values), max(values)) if values else None


def _contribution_heatmap(stats: PatternStatistics, key: str, title: str,
                          domain: tuple[float, float] | None) -> dict | None:
    """The statistic on contribution shares (Kobayashi et al. 2020), on the weights' colour scale; a cell
    opens that head's view in contributions mode on the example where its contributions show the
    statistic most. None when the report has no contributions."""
    if stats.contribution is None:
        return None
    contribution = stats.contribution.statistics[key]
    return _linked_heatmap(strongest_links(vegalite.head_rows(contribution.mean, std=contribution.std,
                                                              weight=stats[key].mean),
                                           contribution.example, mode="contributions"),
                           f"{title}: contributions", LEGEND[names.pattern(key).scale],
                           {"std": "std over examples", "weight": "weight-based value"}, domain)


def _linked_heatmap(linked: tuple[list[dict], str], *args, **kwargs) -> dict:
    """vegalite.head_heatmap of strongest_links' rows, each cell computing its link."""
    rows, url = linked
    return vegalite.head_heatmap(rows, *args, url=url, **kwargs)


def _delimiter_test(test: DelimiterContribution) -> dict:
    """The no-op test's table: per head its two shares, the difference and the corrected p-value, with a
    link to its view in contributions mode on the example where it passes on least of what it looks at."""
    heads = [dict(head.model_dump(), p_text=formatting.p_text(head.p_adjusted, head.p_value, test.permutations),
                  url=Markup(_source_link(head.example, head.layer, head.head, mode="contributions")))
             for head in test.heads]
    return {"test": test, "heads": heads}


def _top_heads(stats: PatternStatistics, key: str, extra: dict[str, str]) -> list[dict]:
    """The strongest heads of a statistic, with the statistics beside it and a link to their strongest example."""
    # The link is built here from numbers, so it is marked as markup on purpose (templates
    # print every plain string as inert text, which would break its '#' and '&').
    contribution = stats.contribution.statistics[key].mean if stats.contribution else None
    return [dict(head.model_dump(), extra=[stats[name].mean[head.layer][head.head] for name in extra],
                 contribution=contribution[head.layer][head.head] if contribution else None,
                 url=Markup(_source_link(head.example, head.layer, head.head)) if head.example >= 0 else None)
            for head in stats.top_heads[key][:TOP_HEADS]]


def _null_rows(stats: PatternStatistics, key: str, extra: dict[str, str]) -> list[dict]:
    """What a uniform, a pure previous-token and a pure next-token head score on the same inputs, in the
    columns of the top-heads table; empty when the report has no null for the statistic."""
    if key not in stats.nulls:
        return []
    return [{"name": prose(names.NULL_HEADS[null]), "value": stats.nulls[key][null],
             "extra": [stats.nulls[name][null] if name in stats.nulls else None for name in extra]}
            for null in NULLS]


def _matrices(views: list[ExampleViews], top: list[dict]) -> list[dict]:
    """The attention matrices of the strongest heads, each on the example where it shows the pattern most."""
    matrices = []
    for head in top[:MATRICES]:
        example = views[head["example"]] if head["example"] >= 0 else None
        weights = example.matrices.get((head["layer"], head["head"])) if example else None
        if weights is not None:
            matrices.append(vegalite.attention_matrix(
                [chart_text(t) for t in example.tokens], weights,
                f"Layer {head['layer']}, head {head['head']}, example {head['example'] + 1}",
                head_link(head["example"], head["layer"], head["head"])))
    return matrices


def _source_link(example: int, layer: int, head: int, token: int | None = None, key: int | None = None,
                 mode: str | None = None, group: str | None = None) -> str:
    """A head link as Markdown names it: the source page (.md), which MkDocs checks and rewrites."""
    page, anchor = head_link(example, layer, head, token, key, mode, group).split("#")
    return f"{page.removesuffix('.html')}.md#{anchor}"


def _layer_names(rows: list[dict], groups: list[str] | None) -> list[dict]:
    """Gives each row of an encoder-decoder's ablation chart its flat layer's name, "cross-attention layer 1"
    (names.layer_name), which the tooltip and the text alternative show; other models' rows stay as they are."""
    if groups:
        for row in rows:
            row["layer_name"] = names.layer_name(row["layer"], groups)
    return rows


def p_fields(adjusted: float | None, raw: float | None, permutations: int, alpha: float) -> dict:
    """A corrected permutation p-value's text as the sentences write it ("≤ 0.025" at the test's floor, else
    "0.31"; formatting.p_text) for the tooltip, and `p_at_floor` for the downloaded table: a bound there
    is a bound everywhere (issue 47: a sentence said "p ≤ 0.025" where the tooltip said 0.0250)."""
    text = formatting.p_text(adjusted, raw, permutations, alpha)
    return {"p_text": text.removeprefix("p ").removeprefix("= "), "p_at_floor": text.startswith("p ≤")}


def layer_labels(ablation: Ablation) -> list[str] | None:
    """An encoder-decoder's axis label of each flat layer ("enc 0", "dec 1", "cross 1": names.layer_label);
    None for every other model, whose axis shows the layer number."""
    groups = ablation.groups
    return [names.layer_label(layer, groups) for layer in range(ablation.layers)] if groups else None


def ablation_charts(ablation: Ablation) -> dict:
    """Chart specs for each ablation experiment that ran; heads link to their view on example 1. An
    encoder-decoder's flat layers are labelled by their group and their layer within it (layer_labels), and
    its "layer_names" (not a chart) name each flat layer for the page's text ("cross-attention layer 1")."""
    out = {}
    metric = names.metric(ablation.task.metric)  # as the pages write it
    higher = ablation.task.higher_is_better[ablation.task.metric]
    groups, labels = ablation.groups, layer_labels(ablation)
    if ablation.single_heads:
        tests = ablation.single_heads
        rows = vegalite.head_rows(tests.relative, delta=tests.delta, metric=tests.value, p_adjusted=tests.p_adjusted,
                                significant=tests.significant)
        for row in _layer_names(rows, groups):
            row["url"] = flat_head_link(row["layer"], row["head"], groups)
            row.update(p_fields(row["p_adjusted"], tests.p_value[row["layer"]][row["head"]], tests.permutations,
                                tests.alpha))
        out["single_heads"] = vegalite.delta_heatmap(rows, f"Change in {metric} with one head masked",
                                                     f"change in {metric}", higher, layer_labels=labels)
    if ablation.whole_layers:
        tests = ablation.whole_layers
        rows = _layer_names([{"layer": layer, "value": tests.relative[index], "delta": tests.delta[index],
                              "p_adjusted": tests.p_adjusted[index],
                              **p_fields(tests.p_adjusted[index], tests.p_value[index], tests.permutations,
                                         tests.alpha),
                              "significant": tests.significant[index], "url": flat_model_link(layer, groups)}
                             for index, layer in enumerate(tests.layers)], groups)
        out["whole_layers"] = vegalite.layer_bars(rows, f"Change in {metric} with a whole layer masked",
                                                  f"change in {metric}", higher, layer_labels=labels)
    if ablation.random_fraction:
        sweep = ablation.random_fraction
        out["random_fraction"] = vegalite.metric_curves(
            _curve_rows(sweep.fractions, sweep, "random heads", sweep.baseline),
            f"Change in {metric}, heads masked at random", "heads masked", f"change in {metric}",
            **_reference_lines(ablation))
    if ablation.layer_halves:
        out["layer_halves"] = _layer_halves_chart(ablation.layer_halves, metric, bool(groups))
    if ablation.importance:
        out.update(_importance_charts(ablation.importance, metric, higher, groups))
    if ablation.head_pairs:
        out["head_pairs"] = _head_pairs_chart(ablation.head_pairs, metric, higher, groups)
    if groups:  # not a chart: the name of each flat layer, for the page's text (only an encoder-decoder's)
        out["layer_names"] = [names.layer_name(layer, groups) for layer in range(ablation.layers)]
    return out


def _head_pairs_chart(pairs: HeadPairs, metric: str, higher: bool, groups: list[str] | None = None) -> dict:
    """The interaction of every masked pair; a cell opens the first head's view on example 1, where a
    single-head cell opens its head. An encoder-decoder's heads are labelled "cross 1 H0" (names.layer_label)."""
    def label(head: list[int]) -> str:
        return f"{names.layer_label(head[0], groups)} H{head[1]}" if groups else f"L{head[0]} H{head[1]}"

    def relative(value: float | None) -> float | None:  # metric units -> relative to the unmasked model
        return None if value is None or not pairs.baseline else value / abs(pairs.baseline)

    rows = [{"first": label(pair.first), "second": label(pair.second), "value": pair.interaction_relative,
             "interaction": pair.interaction, "relative": pair.relative, "change": pair.change,
             "ci_low": relative(pair.ci[0]), "ci_high": relative(pair.ci[1]),
             "p_value": pair.p_value, "p_adjusted": pair.p_adjusted, "significant": pair.significant,
             "url": flat_head_link(*pair.first, groups)} for pair in pairs.pairs]
    return vegalite.pair_heatmap(rows, [label(head) for head in pairs.heads],
                               f"Interaction of two masked heads ({metric})", "relative interaction", higher)


def _reference_lines(ablation: Ablation) -> dict:
    """The baseline's 95% CI (as a relative change: how precise the unmasked score is) and the
    non-inferiority margin (what counts as no loss), for a relative-change chart."""
    out: dict = {}
    base, sweep = ablation.baseline, ablation.random_fraction
    if base is not None and base.value:
        low, high = base.ci[base.metric]
        if low is not None and high is not None:
            out["band"] = {"low": (low - base.value) / abs(base.value), "high": (high - base.value) / abs(base.value),
                           "label": "baseline 95% CI"}
    if sweep is not None:
        out["rules"] = _margin_rule(sweep.non_inferiority, ablation.task.higher_is_better[ablation.task.metric])
    return out


def _margin_rule(test: NonInferiority | None, higher_is_better: bool = True) -> list[dict]:
    """The non-inferiority margin as a labelled line of a relative-change chart: below 0 where higher is
    better, above 0 where lower is (a loss)."""
    if test is None:
        return []
    if higher_is_better:
        return [{"y": -test.margin, "label": f"margin -{formatting.margin(test.margin)}"}]
    return [{"y": test.margin, "label": f"margin +{formatting.margin(test.margin)}"}]


def _layer_halves_chart(halves: LayerHalves, metric: str, grouped: bool = False) -> dict:
    """The lower against the upper half; an encoder-decoder's (`grouped`) halves are each group's."""
    within = " of each group" if grouped else ""
    rows = (_curve_rows(halves.fractions, halves.lower, f"lower layers{within}", halves.baseline)
            + _curve_rows(halves.fractions, halves.upper, f"upper layers{within}", halves.baseline))
    return vegalite.metric_curves(rows, f"Change in {metric}: lower vs upper layers{within}",
                                "share of all heads masked", f"change in {metric}")


def _importance_charts(importance: Importance, metric: str, higher_is_better: bool = True,
                       groups: list[str] | None = None) -> dict:
    rows = _layer_names(vegalite.head_rows(importance.importance), groups)
    labels = [names.layer_label(layer, groups) for layer in range(len(importance.importance))] if groups else None
    for row in rows:
        row["url"] = flat_head_link(row["layer"], row["head"], groups)
    pruning, random_order = importance.pruning, importance.random_order
    curve = [{"x": f, "mean": rel, "low": rel, "high": rel, "absolute": _minus(value, pruning.baseline),
              "group": "least important first"}
             for f, rel, value in zip(pruning.fractions, pruning.relative, pruning.value, strict=True)]
    spread = [[v for v in column if v is not None]  # per fraction, over the orders
              for column in zip(*random_order.relative, strict=True)]
    curve += [{"x": f, "mean": random_order.relative_mean[i], "low": min(spread[i], default=None),
               "high": max(spread[i], default=None), "absolute": _minus(random_order.mean[i], pruning.baseline),
               "group": f"{random_order.orders} random orders (mean, range)"}
              for i, f in enumerate(pruning.fractions)]
    return {"importance": vegalite.head_heatmap(rows, "Head importance (Michel et al. 2019)", "importance",
                                                layer_labels=labels),
            "pruning": vegalite.metric_curves(curve, f"Pruning: change in {metric}", "heads pruned",
                                            f"change in {metric}",
                                            rules=_margin_rule(importance.non_inferiority, higher_is_better))}


def _curve_rows(fractions: list[float], sweep: Sweep, group: str, baseline: float | None) -> list[dict]:
    """Mean relative change per fraction with the min-max over seeds as the band, and the mean change in
    the metric's units (the tooltip's absolute change) against the unmasked model's `baseline`."""
    rows = []
    for i, fraction in enumerate(fractions):
        values = [v for v in sweep.relative[i] if v is not None]
        rows.append({"x": fraction, "mean": sweep.relative_mean[i], "low": min(values, default=None),
                     "high": max(values, default=None), "absolute": _minus(sweep.mean[i], baseline), "group": group})
    return rows


def _minus(value: float | None, baseline: float | None) -> float | None:
    """An absolute change, unknown where either side is."""
    return None if value is None or baseline is None else value - baseline


def comparison_sections(report: Report) -> list[dict]:
    """Per pattern (and ablation result): both models' heatmaps and, when shapes agree, their difference."""
    other = report.comparison
    # User text (a directory name, compare.name) in chart and tooltip titles: one line, nothing Vega cannot show.
    model_names = tuple(chart_text(" ".join(info.name.split()), tooltip_title=True)
                  for info in (report.model, other.model))
    sections = []
    grids = [(key, anchor, title) for key, anchor, title, _, _ in PATTERN_SECTIONS]
    grids += [("delimiter", "delimiter", "[CLS], [SEP] and punctuation")]
    for key, anchor, title in grids:
        first, second = report.statistics[key].mean, other.statistics[key].mean
        sections.append(_comparison(f"compare-{anchor}", title, first, second, model_names, other.same_shape,
                                    names.domain(key)))
    both = report.ablation and other.ablation
    if both and report.ablation.single_heads and other.ablation.single_heads:
        first, second = report.ablation.single_heads.relative, other.ablation.single_heads.relative
        task = report.ablation.task
        extent = max([abs(v) for grid in (first, second) for row in grid for v in row if v is not None] + [1e-9])
        higher = task.higher_is_better[task.metric]
        sections.append(_comparison("compare-ablation-single-heads", f"Change in {names.metric(task.metric)}, "
                                    "one head masked", first, second, model_names, other.same_shape,
                                    (-extent, extent), percent=True, higher_is_better=higher))
    if both and report.ablation.whole_layers and other.ablation.whole_layers:
        rows = [{"x": layer, "group": name, "value": value, "delta": delta}
                for name, ablation in zip(model_names, (report.ablation, other.ablation), strict=True)
                for layer, value, delta in zip(ablation.whole_layers.layers, ablation.whole_layers.relative,
                                               ablation.whole_layers.delta, strict=True)]
        sections.append({"id": "compare-ablation-whole-layers", "title": "Change with a whole layer masked",
                         "charts": [vegalite.grouped_bars(rows, "Change in the metric per masked layer",
                                                        "layer masked", "change in the metric")]})
    return sections


def _comparison(anchor: str, title: str, first: list, second: list, model_names: tuple[str, str],
                same_shape: bool, domain: tuple[float, float] | None = None, percent: bool = False,
                higher_is_better: bool = True) -> dict:
    """Both models' heatmaps on one colour scale (fixed for shares; around 0 for changes, red for worse in the
    metric's direction) and, when shapes agree, their difference; `percent`: the grids are relative changes."""
    specs = [vegalite.head_heatmap(vegalite.head_rows(grid), name, "change" if percent else "mean", domain=domain,
                                   percent=percent, higher_is_better=higher_is_better)
             for grid, name in zip((first, second), model_names, strict=True)]
    if same_shape:
        rows = []
        for row in vegalite.head_rows(first):
            other = second[row["layer"]][row["head"]]
            difference = None if row["value"] is None or other is None else other - row["value"]
            rows.append(dict(row, a=row["value"], b=other, value=difference))
        specs.append(vegalite.difference_heatmap(rows, "Difference", model_names, percent=percent,
                                                 higher_is_better=higher_is_better))
    return {"id": anchor, "title": title, "charts": specs}


def similarity_chart(stats: PatternStatistics) -> dict | None:
    if not stats.similarity:
        return None
    points = []
    for point in stats.similarity.points:
        source = stats[stats.label_stats.get(point.label, "entropy")]
        example = source.example[point.layer][point.head]
        # The legend names each label as every page does (reportgen.findings.names), never by its key.
        points.append(dict(point.model_dump(), label=names.name(point.label),
                           url=head_link(max(example, 0), point.layer, point.head)))
    return vegalite.head_scatter(points, "Heads placed by the similarity of their attention")


def example_entropy_chart(entropy: list[list[float | None]]) -> dict:
    """An example's entropy per head; a cell opens that head in the head view above it on the same page.

    The link is the views' own state as a same-page anchor (as the page's pattern list writes it): the
    views apply it on hashchange and scroll to themselves, with no reload of the page's attention data.
    """
    rows = vegalite.head_rows(entropy)
    for row in rows:
        row["url"] = "#" + head_link(0, row["layer"], row["head"]).partition("#")[2]
    return vegalite.head_heatmap(rows, "Attention entropy on this example (nats)", "entropy")
