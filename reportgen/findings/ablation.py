"""Findings about the head-ablation experiments: each sentence says no more than its test
(see REFERENCE "Claims and the test that answers them" and `reportgen.stats`)."""

from __future__ import annotations

import numpy as np

from reportgen.findings.sentence import SHOWN_SIGNIFICANT, Sentence, grid, head_name, percent, signed
from reportgen.report import Ablation, Finding, Link, model_link


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
    delta = grid(tests.delta)
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


