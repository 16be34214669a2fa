"""Findings: the measured results turned into statements, computed with the analyses.

Each finding has a stable id derived from what it is (e.g. `ablation-whole-layers`), a
verdict (`supported`), its sentence with the numbers it quotes and their uncertainty (std
over examples, bootstrap CI, corrected p-values), the test behind it, and links to the
chart and the attention view that show it. A result the data do not support is stated as
such, never left out. The findings page only prints what is here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reportgen.report import Ablation, Finding, Headline, Link, PatternStatistics, Span, head_link, model_link

# Pattern findings: (id, statistic, label, threshold key in settings.thresholds, chart anchor on the patterns page).
PATTERN_FINDINGS = [
    ("patterns-previous-token", "previous_token", "previous_token", "positional", "previous-token"),
    ("patterns-next-token", "next_token", "next_token", "positional", "next-token"),
    ("patterns-delimiter", "delimiter", "delimiter", "delimiter", "cls"),
    ("patterns-within-word", "within_word", "within_word", "within_word", "within-word"),
    ("patterns-other-sentence", "other_segment", "other_segment", "other_segment", "other-sentence"),
    ("patterns-same-word", "same_token", "same_token", "same_token", "same-word"),
]
SHOWN_HEADS = 5  # heads a pattern finding names
SHOWN_SIGNIFICANT = 8  # significant single heads a finding names


class Sentence:
    """Builds a finding's sentence piece by piece: `s.strong("3 heads...").text(" Layer 2 ...")`."""

    def __init__(self):
        self.spans: list[Span] = []

    def text(self, text: str) -> Sentence:
        self.spans.append(Span(text=text))
        return self

    def strong(self, text: str) -> Sentence:
        self.spans.append(Span(text=text, style="strong"))
        return self

    def code(self, text: str) -> Sentence:
        self.spans.append(Span(text=text, style="code"))
        return self

    def link(self, text: str, href: str) -> Sentence:
        self.spans.append(Span(text=text, link=href))
        return self

    def finding(self, fid: str, group: str, supported: bool, links: list[Link], numbers: dict[str, Any],
                **evidence: Any) -> Finding:
        return Finding(id=fid, group=group, supported=supported, sentence="".join(s.text for s in self.spans),
                       spans=self.spans, links=links, numbers=numbers, **evidence)


# -- how numbers are written ---------------------------------------------------------------------
def head_name(head: dict, capital: bool = False) -> str:
    return f"{'Layer' if capital else 'layer'} {head['layer']} head {head['head']}"


def plus_minus(head: dict) -> str:
    return f"{head['value']:.2f} ± {head['std'] or 0:.2f}"


def percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def signed(x: float) -> str:
    return f"{x:+.4f}"


def plural(count: int, many: str, one: str = "") -> str:
    return one if count == 1 else many


def view(sentence: Sentence, head: dict) -> Sentence:
    return sentence.link("view", head_link(head["example"], head["layer"], head["head"]))


# -- patterns -----------------------------------------------------------------------------------
def _head(stats: PatternStatistics, stat: str, layer: int, head: int) -> dict:
    values = stats[stat]
    return {"layer": layer, "head": head, "value": values.mean[layer][head], "std": values.std[layer][head],
            "example": values.example[layer][head]}


def _grid(values: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


def pattern_numbers(stats: PatternStatistics, stat: str, label: str, threshold: float) -> dict:
    """Which heads carry a pattern (over its threshold), strongest first; else the strongest candidate."""
    mean = _grid(stats[stat].mean)
    over = np.argwhere(np.nan_to_num(mean, nan=-1) > threshold)
    heads = sorted((_head(stats, stat, int(layer), int(head)) for layer, head in over), key=lambda x: -x["value"])
    best = np.unravel_index(np.nanargmax(mean), mean.shape) if np.isfinite(mean).any() else None
    numbers = {"stat": stat, "threshold": threshold, "heads": heads[:SHOWN_HEADS], "count": len(heads),
               "labelled": sum(row.count(label) for row in stats.labels),
               "strongest": _head(stats, stat, int(best[0]), int(best[1])) if best is not None else None,
               "applies_to": stats[stat].count}
    if stat in ("previous_token", "next_token"):
        argmax = stats[f"{stat}_argmax"].mean
        for head in numbers["heads"] + ([numbers["strongest"]] if numbers["strongest"] else []):
            head["argmax"] = argmax[head["layer"]][head["head"]]
    return numbers


def _positional(n: dict, which: str) -> Sentence:
    s = Sentence()
    if n["count"]:
        s.strong(f"{n['count']} head{plural(n['count'], 's')} attend{plural(n['count'], '', 's')} "
                 f"to the {which} token.").text(" ")
        for i, head in enumerate(n["heads"]):
            s.text(f"{head_name(head, capital=i == 0)} puts {plus_minus(head)} of its attention on it and has its "
                   f"largest weight there for {percent(head['argmax'])} of tokens (")
            view(s, head).text(")" + ("; " if i < len(n["heads"]) - 1 else "."))
        return s
    strongest = n["strongest"]
    s.strong(f"No head attends mainly to the {which} token").text(
        f" (not supported: none above {n['threshold']}); the strongest is {head_name(strongest)} with "
        f"{plus_minus(strongest)} (")
    return view(s, strongest).text(").")


def _delimiter(n: dict, total: int) -> Sentence:
    s = Sentence()
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} of {total} heads put more than {percent(n['threshold'])} of their attention on "
                 "[CLS], [SEP] or punctuation").text(
            f', a "no-op" pattern (Clark et al. 2019); the strongest is {head_name(top)} with {plus_minus(top)} (')
        return view(s, top).text(").")
    strongest = n["strongest"]
    return s.strong(f"No head puts more than {percent(n['threshold'])} of its attention on delimiters").text(
        f" (not supported); the strongest is {head_name(strongest)} with {plus_minus(strongest)}.")


def _within_word(n: dict) -> Sentence:
    s = Sentence()
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} link{plural(n['count'], '', 's')} the pieces of "
                 "split words:").text(
            f" {head_name(top)} puts {plus_minus(top)} of a word piece's attention on the other pieces of its word "
            f"({n['applies_to']} inputs with split words; ")
        view(s, top).text(").")
        if n["labelled"] == 0:
            s.text(" Its main label is another pattern, so this is a secondary role.")
        return s
    if n["strongest"]:
        strongest = n["strongest"]
        return s.strong("No head mainly links the pieces of split words").text(
            f" (not supported: none above {n['threshold']} over {n['applies_to']} inputs with split words); "
            f"the strongest is {head_name(strongest)} with {plus_minus(strongest)}.")
    return s.strong("Within-word attention was not measured:").text(" no input has a word split into pieces.")


def _other_sentence(n: dict) -> Sentence:
    s = Sentence()
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} match{plural(n['count'], '', 'es')} words across "
                 "the two sentences:").text(
            f" {head_name(top)} puts {plus_minus(top)} of a word's attention on its occurrences in the other "
            f"sentence ({n['applies_to']} pairs; ")
        return view(s, top).text(").")
    if n["strongest"]:
        strongest = n["strongest"]
        s.strong("No head mainly matches words across sentences").text(
            f" (not supported: none above {n['threshold']} over {n['applies_to']} pairs); the strongest is "
            f"{head_name(strongest)} with {plus_minus(strongest)} (")
        return view(s, strongest).text(").")
    return s.strong("Cross-sentence matching was not measured:").text(" no input pair shares a word.")


def _same_word(n: dict) -> Sentence:
    s = Sentence()
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} attend{plural(n['count'], '', 's')} to the same "
                 "word:").text(
            f" {head_name(top)} puts {plus_minus(top)} on the token itself and other occurrences of its word (")
        return view(s, top).text(").")
    strongest = n["strongest"]
    return s.strong("No head mainly attends to the same word").text(
        f" (not supported: none above {n['threshold']}); the strongest is {head_name(strongest)} with "
        f"{plus_minus(strongest)}.")


def _broad(stats: PatternStatistics) -> Finding:
    broad = [(layer, head) for layer, row in enumerate(stats.labels) for head, label in enumerate(row)
             if label == "broad"]
    numbers = {"stat": "entropy", "count": len(broad), "layers": sorted({layer for layer, _ in broad}),
               "baseline": stats.entropy.uniform_baseline}
    s = Sentence()
    if broad:
        layers = numbers["layers"]
        s.strong(f"{len(broad)} heads attend broadly").text(
            f" (entropy within ln 2 of uniform, which is {numbers['baseline']:.2f} nats on average), in "
            f"layer{plural(len(layers), 's')} {', '.join(map(str, layers))}.")
    else:
        s.strong("No head attends broadly").text(
            " (not supported: no head's entropy comes within ln 2 of uniform).")
    return s.finding("patterns-broad", "patterns", bool(broad), [Link(label="chart", href="patterns.html#broad")],
                     numbers)


def pattern_findings(stats: PatternStatistics) -> list[Finding]:
    """One finding per pattern of Clark et al. (2019), and one for broad attention."""
    thresholds = stats.settings["thresholds"]
    total = stats.counts.layers * stats.counts.heads
    write = {"patterns-previous-token": lambda n: _positional(n, "previous"),
             "patterns-next-token": lambda n: _positional(n, "next"),
             "patterns-delimiter": lambda n: _delimiter(n, total),
             "patterns-within-word": _within_word, "patterns-other-sentence": _other_sentence,
             "patterns-same-word": _same_word}
    out = []
    for fid, stat, label, threshold, anchor in PATTERN_FINDINGS:
        numbers = pattern_numbers(stats, stat, label, thresholds[threshold])
        out.append(write[fid](numbers).finding(fid, "patterns", bool(numbers["count"]),
                                                [Link(label="chart", href=f"patterns.html#{anchor}")], numbers))
    return out + [_broad(stats)]


# -- ablation -----------------------------------------------------------------------------------
def _chart(anchor: str) -> list[Link]:
    return [Link(label="chart", href=f"ablation.html#{anchor}")]


DETAILS = [Link(label="details", href="ablation.html")]


def _within(value: float, ci: list[float]) -> bool:
    return ci[0] <= value <= ci[1]


def safe_fraction(fractions: list[float], values: list[float | None], ci: list[float]) -> float:
    """The largest fraction up to which every mean stays inside the baseline's CI."""
    safe = 0.0
    for fraction, value in zip(fractions, values, strict=True):
        if value is None or not _within(value, ci):
            break
        safe = fraction
    return safe


def _undefined(ablation: Ablation) -> Finding:
    task = ablation.task
    reason = task.undefined or "for instance, the model gives every pair the same score"
    s = Sentence().strong(f"{task.metric.capitalize()} is undefined on these {task.examples} task examples").text(
        f" ({reason}), so no ablation finding can be stated.")
    return s.finding("ablation-undefined", "ablation", False, DETAILS,
                     {"metric": task.metric, "examples": task.examples, "reason": task.undefined})


def _needs_baseline(fid: str, title: str, metric: str) -> Finding:
    """An experiment that ran but whose statement compares with the baseline's confidence
    interval, when the baseline experiment is off: its chart is there, its verdict is not."""
    s = Sentence().strong(f"{title}: no verdict.").text(
        f" The statement compares {metric} with the baseline's 95% confidence interval, and the baseline "
        "experiment is off (").code("ablation.experiments.baseline: false").text(
        "); the chart shows what was measured.")
    return s.finding(fid, "ablation", False, _chart(fid), {"metric": metric, "needs_baseline": True})


def _baseline(ablation: Ablation) -> Finding:
    base, metric = ablation.baseline, ablation.task.metric
    ci = base.ci[metric]
    s = Sentence().strong(f"The model scores {metric} {base.value:.4f}").text(
        f" (95% CI [{ci[0]:.4f}, {ci[1]:.4f}]) on {ablation.task.examples} task examples with all heads.")
    return s.finding("ablation-baseline", "ablation", True, DETAILS,
                     {"metric": metric, "value": base.value, "examples": ablation.task.examples},
                     test=base.ci_method, ci=ci)


def _single_heads(ablation: Ablation) -> Finding:
    tests, metric = ablation.single_heads, ablation.task.metric
    delta = _grid(tests.delta)
    heads = sorted(({"layer": int(layer), "head": int(head), "delta": float(delta[layer, head]),
                     "p": tests.p_adjusted[layer][head]} for layer, head in np.argwhere(tests.significant)),
                   key=lambda x: x["delta"])

    def extreme(index) -> dict:
        layer, head = int(index[0]), int(index[1])
        return {"layer": layer, "head": head, "delta": float(delta[layer, head]), "p": tests.p_adjusted[layer][head]}

    worst = extreme(np.unravel_index(np.nanargmin(delta), delta.shape))
    best = extreme(np.unravel_index(np.nanargmax(delta), delta.shape))
    correction, total = tests.correction.capitalize(), int(delta.size)
    s = Sentence()
    if heads:
        s.strong(f"{len(heads)} of {total} heads change {metric} significantly when masked alone;").text(
            f" the other {total - len(heads)} show no significant change ({tests.test}, {correction}-corrected, "
            f"alpha {tests.alpha}). ")
        shown = heads[:SHOWN_SIGNIFICANT]
        s.text("; ".join(f"{head_name(h, capital=i == 0)}: {signed(h['delta'])} (p = {h['p']:.3g})"
                         for i, h in enumerate(shown)) + ".")
    else:
        s.strong(f"No single head changes {metric} significantly when masked alone").text(
            f" ({tests.test}, {correction}-corrected over {total} heads, alpha {tests.alpha}). The largest drop is "
            f"{signed(worst['delta'])} ({head_name(worst)}, corrected p = {worst['p']:.3g}); the largest gain "
            f"{signed(best['delta'])} ({head_name(best)}, p = {best['p']:.3g}).")
    numbers = {"metric": metric, "significant": heads[:SHOWN_SIGNIFICANT], "count": len(heads), "total": total,
               "alpha": tests.alpha, "correction": tests.correction, "worst": worst, "best": best}
    return s.finding("ablation-single-heads", "ablation", bool(heads), _chart("ablation-single-heads"), numbers,
                     test=tests.test, p_value=(heads[0] if heads else worst)["p"])


def _random_fraction(ablation: Ablation, ci: list[float]) -> Finding:
    sweep, metric = ablation.random_fraction, ablation.task.metric
    safe = safe_fraction(sweep.fractions, sweep.mean, ci)
    tail = (f" (mean over {len(sweep.seeds)} seeds); at {percent(sweep.fractions[-1])} the mean relative change "
            f"is {100 * sweep.relative_mean[-1]:+.1f}%.")
    s = Sentence()
    if safe > 0:
        s.strong(f"Up to {percent(safe)} of the heads can be masked at random with {metric} staying inside the "
                 "baseline's 95% CI").text(tail)
    else:
        s.strong(f"Masking even 10% of the heads at random moves {metric} outside the baseline's 95% CI").text(tail)
    numbers = {"metric": metric, "safe_fraction": safe, "seeds": len(sweep.seeds),
               "last_fraction": sweep.fractions[-1], "last_relative": sweep.relative_mean[-1]}
    return s.finding("ablation-random-fraction", "ablation", safe > 0, _chart("ablation-random-fraction"), numbers,
                     ci=ci)


def _layer_halves(ablation: Ablation) -> Finding:
    halves, metric = ablation.layer_halves, ablation.task.metric
    last = len(halves.fractions) - 1
    lower, upper = halves.lower.relative_mean[last], halves.upper.relative_mean[last]
    # over the seeds' spread: a difference smaller than it is not a finding
    spread = max(halves.lower.relative_std[last], halves.upper.relative_std[last])
    difference, fraction = abs(upper - lower), halves.fractions[last]
    supported = difference > 2 * spread
    more = "upper" if upper < lower else "lower"
    s = Sentence()
    if supported:
        s.strong(f"The {more} layers matter more:").text(
            f" masking {percent(fraction)} of all heads only from the lower layers changes {metric} by "
            f"{100 * lower:+.1f}%, only from the upper layers by {100 * upper:+.1f}% (difference "
            f"{100 * difference:.1f} points, more than twice the spread over seeds).")
    else:
        s.strong("Lower and upper layers do not differ clearly:").text(
            f" masking {percent(fraction)} of all heads from the lower layers changes {metric} by {100 * lower:+.1f}%, "
            f"from the upper by {100 * upper:+.1f}% (difference {100 * difference:.1f} points, within twice the "
            "spread over seeds: not supported).")
    numbers = {"metric": metric, "fraction": fraction, "lower": lower, "upper": upper, "more": more,
               "difference": difference, "spread": spread}
    return s.finding("ablation-layer-halves", "ablation", supported, _chart("ablation-layer-halves"), numbers)


def _whole_layers(ablation: Ablation) -> Finding:
    tests, metric = ablation.whole_layers, ablation.task.metric
    delta = np.array(tests.delta, dtype=float)

    def layer_numbers(layer: int) -> dict:
        return {"layer": layer, "delta": float(delta[layer]), "relative": tests.relative[layer],
                "significant": tests.significant[layer], "p": tests.p_adjusted[layer]}

    worst, best = layer_numbers(int(np.nanargmin(delta))), layer_numbers(int(np.nanargmax(delta)))
    improves = bool(best["delta"] > 0)
    s = Sentence().strong(f"Removing layer {worst['layer']} costs most:").text(
        f" {signed(worst['delta'])} {metric} ({100 * worst['relative']:+.1f}%, "
        f"{'significant' if worst['significant'] else 'not significant'}, corrected p = {worst['p']:.3g}). ")
    if improves:
        s.text(f"Removing layer {best['layer']} improves it by {signed(best['delta'])}, "
               f"{'a significant improvement' if best['significant'] else 'not a significant change'} "
               f"(p = {best['p']:.3g}).")
    else:
        s.text("No whole-layer removal improves the metric.")
    links = _chart("ablation-whole-layers") + [Link(label="model view", href=model_link(worst["layer"]))]
    return s.finding("ablation-whole-layers", "ablation", True, links,
                     {"metric": metric, "worst": worst, "best": best, "improves": improves},
                     test=tests.test, p_value=worst["p"])


def _importance(ablation: Ablation, ci: list[float]) -> Finding:
    importance, metric = ablation.importance, ablation.task.metric
    pruned = safe_fraction(importance.pruning.fractions, importance.pruning.value, ci)
    random = safe_fraction(importance.pruning.fractions, importance.random_order.mean, ci)
    s = Sentence()
    if pruned > random:
        s.strong("Gradient-based importance finds which heads can go first:").text(
            f" pruning the least important heads keeps {metric} inside the baseline's 95% CI up to "
            f"{percent(pruned)} of the heads, against {percent(random)} in random order (Michel et al. 2019; "
            f"importance normalised {importance.normalization}).")
    else:
        s.strong("Importance-ordered pruning does no better than random order here:").text(
            f" both keep {metric} inside the baseline's 95% CI up to {percent(pruned)} (importance order) and "
            f"{percent(random)} (random order) of the heads (not supported).")
    numbers = {"metric": metric, "pruned_safe": pruned, "random_safe": random,
               "normalization": importance.normalization}
    return s.finding("ablation-importance", "ablation", pruned > random, _chart("ablation-importance"), numbers,
                     ci=ci)


def ablation_findings(ablation: Ablation) -> list[Finding]:
    """Statements about the head-ablation experiments that ran (see the statistics module for the tests)."""
    base = ablation.baseline
    if ablation.task.undefined or (base is not None and base.value is None):
        # e.g. Spearman of constant predictions: nothing can be said about what masking changes
        return [_undefined(ablation)]
    metric = ablation.task.metric
    ci = base.ci[metric] if base else None
    out = [_baseline(ablation)] if base else []
    if ablation.single_heads:
        out.append(_single_heads(ablation))
    if ablation.random_fraction:
        out.append(_random_fraction(ablation, ci) if ci else
                   _needs_baseline("ablation-random-fraction", "Random fractions of heads", metric))
    if ablation.layer_halves:
        out.append(_layer_halves(ablation))
    if ablation.whole_layers:
        out.append(_whole_layers(ablation))
    if ablation.importance:
        out.append(_importance(ablation, ci) if ci else
                   _needs_baseline("ablation-importance", "Importance-ordered pruning", metric))
    return out


def all_findings(statistics: PatternStatistics, ablation: Ablation | None) -> list[Finding]:
    return pattern_findings(statistics) + (ablation_findings(ablation) if ablation else [])


def headline(statistics: PatternStatistics, findings: list[Finding]) -> Headline:
    """The few numbers at the top of the report."""
    by_id = {f.id: f for f in findings}
    single = by_id.get("ablation-single-heads")
    return Headline(heads=statistics.counts.layers * statistics.counts.heads, labels=statistics.label_counts,
                    baseline=by_id.get("ablation-baseline"),
                    significant_heads=single.numbers["count"] if single else None)
