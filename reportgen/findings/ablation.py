"""Findings about the head-ablation experiments: each sentence says no more than its test
(see REFERENCE "Claims and the test that answers them" and `reportgen.stats`).

A head or a layer is named by `reportgen.findings.names` (`head_name`, `layer_name`): "layer 3 head 1", and
an encoder-decoder's by its group and its layer within the group (`Ablation.groups`), "cross-attention layer 1
head 0". The numbers keep the flat layer index, which the charts and links use."""

from __future__ import annotations

import numpy as np

from reportgen.findings import names
from reportgen.findings.formatting import (
    change,
    change_with_absolute,
    fractions_list,
    interval,
    margin,
    metric_value,
    p_number,
    p_text,
    percent,
)
from reportgen.findings.sentence import SHOWN_SIGNIFICANT, Sentence, grid, plural
from reportgen.report import Ablation, Finding, Link, flat_model_link


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _chart(anchor: str) -> list[Link]:
    return [Link(label="chart", href=f"ablation.html#{anchor}")]


DETAILS = [Link(label="details", href="ablation.html")]


def _undefined(ablation: Ablation) -> Finding:
    task = ablation.task
    reason = task.undefined or "for instance, the model gives every pair the same score"
    said = _capital(names.metric(task.metric))
    s = Sentence().strong(f"{said} is undefined on these {task.examples} task examples").text(
        f" ({reason}), so no ablation finding can be stated.")
    return s.finding("ablation-undefined", "ablation", False, DETAILS,
                     {"metric": task.metric, "examples": task.examples, "reason": task.undefined})


def _baseline(ablation: Ablation) -> Finding:
    base, metric = ablation.baseline, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    ci = base.ci[metric]
    s = Sentence().strong(f"The model scores {said} {metric_value(base.value)}").text(
        f" (95% CI [{metric_value(ci[0])}, {metric_value(ci[1])}]) on {ablation.task.examples} examples of "
        f"{names.task_data(ablation.task.data)} with all heads.")
    return s.finding("ablation-baseline", "ablation", True, DETAILS,
                     {"metric": metric, "value": base.value, "examples": ablation.task.examples},
                     test=base.ci_method, ci=ci)


def _gains(delta: np.ndarray, higher: bool) -> np.ndarray:
    """Changes read as gains: positive is better, whichever way the metric points (a loss rising is a cost)."""
    return delta if higher else -delta


def _extreme_text(gain: float, below: str, above: str) -> str:
    """An extreme change named by its sign read as a gain: below 0 "the largest drop" (or rise in a loss);
    at or above 0 every head's masking helped, so "the smallest gain", never a drop that did not happen.
    For the other extreme pass the negated gain and the words swapped: "the largest gain" or "the smallest
    drop"."""
    return f"the largest {below}" if gain < 0 else f"the smallest {above}"


def _single_heads(ablation: Ablation) -> Finding:
    tests, metric = ablation.single_heads, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    higher = ablation.task.higher_is_better[metric]
    delta = grid(tests.delta)
    gain = _gains(delta, higher)
    runs = tests.permutations

    def numbers(layer: int, head: int) -> dict:
        return {"layer": layer, "head": head, "delta": float(delta[layer, head]),
                "relative": tests.relative[layer][head], "p": tests.p_adjusted[layer][head],
                "raw": tests.p_value[layer][head]}

    def changed(h: dict) -> str:
        return change_with_absolute(h["relative"], h["delta"], said)

    def p_of(h: dict) -> str:
        return p_text(h["p"], h["raw"], runs, tests.alpha)

    def head_name(h: dict, capital: bool = False) -> str:
        return names.head_name(h["layer"], h["head"], ablation.groups, capital)

    heads = sorted((numbers(int(layer), int(head)) for layer, head in np.argwhere(tests.significant)),
                   key=lambda x: x["delta"] if higher else -x["delta"])  # the most harmful first

    def extreme(index) -> dict:
        return numbers(int(index[0]), int(index[1]))

    worst = extreme(np.unravel_index(np.nanargmin(gain), gain.shape))
    best = extreme(np.unravel_index(np.nanargmax(gain), gain.shape))
    # a drop in a score, a rise in a loss
    worse_word, better_word = ("drop", "gain") if higher else (f"rise in {said}", f"fall in {said}")
    correction, total = tests.correction.capitalize(), int(delta.size)
    s = Sentence()
    if heads:
        s.strong(f"{len(heads)} of {total} heads change{plural(len(heads), '', 's')} {said} significantly when "
                 "masked alone;").text(
            f" the other {total - len(heads)} show no significant change ({tests.test}, {correction}-corrected, "
            f"alpha {tests.alpha}). ")
        shown = heads[:SHOWN_SIGNIFICANT]
        s.text("; ".join(f"{head_name(h, capital=i == 0)}: {changed(h)}, {p_of(h)}"
                         for i, h in enumerate(shown)) + ".")
    else:
        s.strong(f"No single head changes {said} significantly when masked alone").text(
            f" ({tests.test}, {correction}-corrected over {total} heads, alpha {tests.alpha}). "
            f"{_capital(_extreme_text(gain[worst['layer'], worst['head']], worse_word, better_word))} "
            f"is {changed(worst)} ({head_name(worst)}, corrected {p_of(worst)}); "
            f"{_extreme_text(-gain[best['layer'], best['head']], better_word, worse_word)} "
            f"is {changed(best)} ({head_name(best)}, {p_of(best)}).")
    numbers = {"metric": metric, "significant": heads[:SHOWN_SIGNIFICANT], "count": len(heads), "total": total,
               "alpha": tests.alpha, "correction": tests.correction, "worst": worst, "best": best,
               "higher_is_better": higher}
    return s.finding("ablation-single-heads", "ablation", bool(heads), _chart("ablation-single-heads"), numbers,
                     test=tests.test, p_value=(heads[0] if heads else worst)["p"])


def _random_fraction(ablation: Ablation) -> Finding:
    """Non-inferiority, not "inside the baseline's CI" (REFERENCE, "Claims and the test that answers them")."""
    sweep, metric = ablation.random_fraction, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    higher = ablation.task.higher_is_better[metric]
    test = sweep.non_inferiority
    seeds = len(sweep.seeds)
    index = {fraction: i for i, fraction in enumerate(sweep.fractions)}
    failing = next((f for f, ok in zip(sweep.fractions, test.non_inferior, strict=True) if not ok), None)
    s = Sentence()
    if test.up_to > 0:
        at = index[test.up_to]
        worst = test.worst[at]
        cost = (f"losing less than {margin(test.margin)} of {said}" if higher
                else f"raising {said} by less than {margin(test.margin)}")
        bound = f"above -{margin(test.margin)}" if higher else f"below +{margin(test.margin)}"
        s.strong(f"Up to {percent(test.up_to)} of the heads can be masked at random {cost}:").text(
            f" at every fraction up to {percent(test.up_to)}, the paired 95% CI of the relative change "
            f"({seeds} seed{plural(seeds, 's')} pooled) lies {bound}; at {percent(test.up_to)} "
            f"it is {interval(test.change_ci[at])}")
        if worst is not None and seeds > 1:
            s.text(f" (worst seed, {sweep.seeds[worst]}: {interval(test.worst_ci[at])})")
        s.text(".")
    else:
        cost = (f"cost less than {margin(test.margin)} of {said}" if higher
                else f"raise {said} by less than {margin(test.margin)}")
        s.strong(f"Masking heads at random is not shown to {cost}")
        s.text(f" at any fraction ({seeds} seed{plural(seeds, 's')} pooled).")
    if failing is not None:
        s.text(f" At {percent(failing)} the CI is {interval(test.change_ci[index[failing]])}.")
    s.text(f" Test: {test.test}.")
    numbers = {"metric": metric, "up_to": test.up_to, "margin": test.margin, "seeds": seeds, "failing": failing,
               "ci": test.change_ci[index[test.up_to]] if test.up_to > 0 else None, "higher_is_better": higher}
    return s.finding("ablation-random-fraction", "ablation", test.up_to > 0, _chart("ablation-random-fraction"),
                     numbers, test=test.test, ci=numbers["ci"])


def _layer_halves(ablation: Ablation) -> Finding:
    """Lower vs upper half compared per example at each fraction (never on the spread over seeds,
    which is zero where every seed draws the whole half)."""
    halves, metric = ablation.layer_halves, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    test = halves.comparison
    higher = ablation.task.higher_is_better[metric]
    index = {fraction: i for i, fraction in enumerate(halves.fractions)}
    # difference = metric(upper masked) - metric(lower masked): below 0 (for a higher-is-better metric) the upper
    # layers cost more to lose
    upper = [f for f, d, sig in zip(test.fractions, test.difference, test.significant, strict=True)
             if sig and (d < 0) == higher]
    lower = [f for f, d, sig in zip(test.fractions, test.difference, test.significant, strict=True)
             if sig and (d < 0) != higher]
    more, where = ("upper", upper) if len(upper) >= len(lower) else ("lower", lower)
    less = "lower" if more == "upper" else "upper"
    # an encoder-decoder's halves are taken within each group (reportgen.ablation.experiments.half_layers)
    layers = "layers of each group" if ablation.groups else "layers"
    s = Sentence()
    if where:
        at = where[-1]
        i, t = index[at], test.fractions.index(at)
        # "worse" reads the metric's direction: a lower score, or a higher loss
        s.strong(f"Masking heads in the {more} {layers} leaves {said} worse than in the {less} {layers} at "
                 f"{fractions_list(where)} of all heads").text(
            f" ({p_text(test.p_adjusted[t], test.p_value[t], test.permutations, test.alpha)} at {percent(at)}; "
            f"{test.test}). "
            f"At {percent(at)}, masking only lower-layer heads changes {said} by "
            f"{change(halves.lower.relative_mean[i])}, only upper-layer heads by "
            f"{change(halves.upper.relative_mean[i])}.")
        other = lower if more == "upper" else upper
        if other:
            s.text(f" At {fractions_list(other)} masking the {less} layers leaves it worse.")
    else:
        best = int(np.nanargmin([np.inf if p is None else p for p in test.p_adjusted]))
        s.strong(f"Lower and upper {layers} do not differ significantly at any fraction").text(
            f" (smallest corrected {p_text(test.p_adjusted[best], test.p_value[best], test.permutations, test.alpha)}"
            f", at {percent(test.fractions[best])}; {test.test}).")
    deterministic = [f for f, same in zip(halves.fractions, halves.same_mask, strict=True)
                     if same and f in test.fractions]
    if deterministic:
        s.text(f" At {fractions_list(deterministic)} every seed masks the same heads (the whole half), so the seeds "
               "cannot spread; the test is over examples.")
    numbers = {"metric": metric, "more": more if where else None, "fractions": where,
               "tested": test.fractions, "p_adjusted": test.p_adjusted, "same_mask": deterministic}
    return s.finding("ablation-layer-halves", "ablation", bool(where), _chart("ablation-layer-halves"), numbers,
                     test=test.test)


def _importance(ablation: Ablation) -> Finding:
    """The importance order against many random orders: the rank of its area (a p-value), paired
    tests per fraction, and how far it stays non-inferior; only what survives is claimed."""
    importance, metric = ablation.importance, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    area, test, orders = importance.area, importance.comparison, importance.random_order.orders
    alpha = test.alpha
    higher = ablation.task.higher_is_better[metric]
    better = [f for f, d, sig in zip(test.fractions, test.difference, test.significant, strict=True)
              if sig and (d > 0) == higher]
    supported = area.p_value < alpha
    rank = (f"its pruning curve's area beats {area.better_than} of {orders} random orders (rank p = "
            f"{p_number(area.p_value, alpha)}")
    rank += f", the smallest {orders} orders can give)" if area.p_value <= area.floor * (1 + 1e-9) else ")"
    s = Sentence()
    kept = "higher" if higher else "lower"
    if supported:
        s.strong(f"Pruning the least important heads first keeps {said} {kept} than random pruning orders:")
    else:
        s.strong(f"Pruning by importance is not shown to keep {said} {kept} than random pruning orders:")
    s.text(f" {rank}")
    if better:
        s.text(f"; it is significantly better at {fractions_list(better)} of the heads")
    else:
        s.text("; at no single fraction is it significantly better")
    s.text(f" ({test.test}).")
    if importance.non_inferiority and importance.non_inferiority.up_to > 0:
        s.text(f" It loses less than {margin(importance.non_inferiority.margin)} of {said} up to "
               f"{percent(importance.non_inferiority.up_to)} of the heads pruned (paired 95% CI).")
    s.text(f" Importance: Michel et al. 2019, normalised {importance.normalization}; loss: {importance.loss}.")
    numbers = {"metric": metric, "orders": orders, "better_than": area.better_than, "p_value": area.p_value,
               "better_at": better, "up_to": importance.non_inferiority.up_to if importance.non_inferiority else None,
               "normalization": importance.normalization}
    return s.finding("ablation-importance", "ablation", supported, _chart("ablation-importance"), numbers,
                     test=f"rank of the area under the pruning curve among {orders} random orders; {test.test}",
                     p_value=area.p_value)


def _whole_layers(ablation: Ablation) -> Finding:
    tests, metric = ablation.whole_layers, ablation.task.metric
    said = names.metric(metric)  # as the pages write it
    delta = np.array(tests.delta, dtype=float)
    gain = _gains(delta, ablation.task.higher_is_better[metric])

    def layer_numbers(layer: int) -> dict:
        return {"layer": layer, "delta": float(delta[layer]), "relative": tests.relative[layer],
                "significant": tests.significant[layer], "p": tests.p_adjusted[layer], "raw": tests.p_value[layer]}

    worst, best = layer_numbers(int(np.nanargmin(gain))), layer_numbers(int(np.nanargmax(gain)))
    improves = bool(gain[best["layer"]] > 0)
    groups = ablation.groups
    costs = bool(gain[worst["layer"]] < 0)
    # "costs most" only where a removal makes the metric worse (a loss rising); else the smallest gain
    lead = (f"Removing {names.layer_name(worst['layer'], groups)} costs most:" if costs else
            f"No whole layer's removal makes {said} worse; removing {names.layer_name(worst['layer'], groups)} "
            "helps least:")
    s = Sentence().strong(lead).text(
        f" {change_with_absolute(worst['relative'], worst['delta'], said)}, "
        f"{'significant' if worst['significant'] else 'not significant'} (corrected "
        f"{p_text(worst['p'], worst['raw'], tests.permutations, tests.alpha)}; {tests.test}). ")
    if improves and not costs:
        s.text(f"Removing {names.layer_name(best['layer'], groups)} helps most: "
               f"{change_with_absolute(best['relative'], best['delta'], said)}, "
               f"{'significant' if best['significant'] else 'not significant'} "
               f"({p_text(best['p'], best['raw'], tests.permutations, tests.alpha)}).")
    elif improves:
        s.text(f"Removing {names.layer_name(best['layer'], groups)} changes it by "
               f"{change_with_absolute(best['relative'], best['delta'], said)}, "
               f"{'a significant improvement' if best['significant'] else 'not a significant change'} "
               f"({p_text(best['p'], best['raw'], tests.permutations, tests.alpha)}).")
    else:
        s.text("No whole-layer removal improves the metric.")
    links = _chart("ablation-whole-layers") + [Link(label="model view",
                                                    href=flat_model_link(worst["layer"], ablation.groups))]
    return s.finding("ablation-whole-layers", "ablation", True, links,
                     {"metric": metric, "worst": worst, "best": best, "improves": improves, "costs": costs,
                      "permutations": tests.permutations, "alpha": tests.alpha},
                     test=tests.test, p_value=worst["p"])


def ablation_findings(ablation: Ablation) -> list[Finding]:
    """Statements about the head-ablation experiments that ran (see the statistics module for the tests)."""
    base = ablation.baseline
    if ablation.task.undefined or (base is not None and base.value is None):
        # e.g. Spearman of constant predictions: nothing can be said about what masking changes
        return [_undefined(ablation)]
    out = [_baseline(ablation)] if base else []
    if ablation.single_heads:
        out.append(_single_heads(ablation))
    if ablation.random_fraction:
        out.append(_random_fraction(ablation))
    if ablation.layer_halves and ablation.layer_halves.comparison:  # None: no fraction masks any head to compare
        out.append(_layer_halves(ablation))
    if ablation.whole_layers:
        out.append(_whole_layers(ablation))
    if ablation.importance and ablation.importance.comparison:  # None: no pruning step masks a head
        out.append(_importance(ablation))
    return out


