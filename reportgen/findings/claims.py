"""A published study's claims beside what this model shows (config `claims:`), each with the test
that answers it here and a verdict: supported, not supported here, contradicted, or not measured.

Only seed 004 for now (../shared/REFERENCE.md, "The seed-004 setting"). Every row is read off the
report's plain data, the ablation records and the findings already made, never off tensors, so a row
quotes exactly the numbers the rest of the site shows; each test is the one REFERENCE "Claims and the
test that answers them" asks for (non-inferiority for "costs nothing", paired tests for contrasts,
corrected p-values, pattern scores beside their nulls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reportgen.findings import names
from reportgen.findings.formatting import change, fractions_list, interval, margin, p_text, percent, share
from reportgen.findings.sentence import head_name, plural, plus_minus
from reportgen.report import Ablation, ClaimCheck, Finding, Link, PatternStatistics


@dataclass(frozen=True)
class SeedFigures:
    """What seed 004 reported (REFERENCE, "The seed-004 setting"): a character-level Chinese BERT-base,
    12 layers x 12 heads, fine-tuned as a 5-grade query-title cross-encoder ([CLS] into the classifier);
    accuracy on a test set, as relative change against the unmasked model."""

    layers: int = 12
    free_below: float = 0.20  # "random masking of under 20% of the heads costs nothing"
    bump_at: float = 0.10  # "... +1% relative at 10%"
    bump: float = 0.01
    lower: tuple[int, int] = (0, 5)  # "masking the lower layers (0-5) hurts more than the upper (6-11)"
    upper: tuple[int, int] = (6, 11)
    halves_up_to: float = 0.50  # "... at the same share of all heads (0-50%)"
    middle: tuple[int, int] = (5, 9)  # "masking one whole layer of 5-9 improves accuracy"
    best_layer: int = 8  # "... +2.3% relative for layer 8"
    best_gain: float = 0.023


SEED004 = SeedFigures()


def _as_reported(relative: float) -> str:
    """A relative change of the seed's, as precise as it was reported: +1%, +2.3%."""
    return f"{100 * relative:+g}%"


# The seed's claims as the findings page states them: id -> (the claim, the seed's own figure).
SEED004_CLAIMS = {
    "random-under-20": (f"Masking under {percent(SEED004.free_below)} of the heads at random costs nothing",
                        f"no loss below {percent(SEED004.free_below)}; {_as_reported(SEED004.bump)} relative at "
                        f"{percent(SEED004.bump_at)}"),
    "bump-at-10": (f"Masking {percent(SEED004.bump_at)} of the heads at random improves accuracy",
                   f"{_as_reported(SEED004.bump)} relative"),
    "lower-layers": ("Heads in the lower layers matter more than heads in the upper layers, at the same share of "
                     "all heads",
                     f"layers {SEED004.lower[0]}-{SEED004.lower[1]} cost more than {SEED004.upper[0]}-"
                     f"{SEED004.upper[1]} at 0-{percent(SEED004.halves_up_to)} of all heads (no figure given)"),
    "middle-layer": (f"Masking one whole middle layer (one of {SEED004.middle[0]}-{SEED004.middle[1]} of "
                     f"{SEED004.layers}) improves accuracy",
                     f"{_as_reported(SEED004.best_gain)} relative for layer {SEED004.best_layer}"),
    "word-boundaries": ("Some heads mark word boundaries", "reported for its character-level model, no figure"),
    "word-order": ("Some heads track word order (the previous or the next token)", "reported, no figure"),
    "term-matching": ("Some heads match query and title terms (the same word in the other sentence)",
                      "reported, no figure"),
}

NOT_MEASURED = "\u2013"  # this model's number where the claim was not measured
# The test that would answer each claim, for the rows where it could not run (the others name the test as it ran).
PLANNED_TESTS = {
    "random-under-20": "non-inferiority: the paired bootstrap 95% CI of the relative change against the margin",
    "bump-at-10": "the paired bootstrap 95% CI of the relative change at 10%, against 0",
    "lower-layers": "paired permutation test over examples, lower vs upper half masked, corrected over the fractions",
    "middle-layer": "paired permutation test over examples per whole layer masked, corrected over the layers",
    "word-boundaries": "within-word share and boundary selectivity against their thresholds and nulls",
    "word-order": "previous- and next-token weight (Clark et al.) and argmax share (Voita et al.)",
    "term-matching": "share of attention on the same word in the other sentence against its threshold",
}


def claim_checks(study: str | None, ablation: Ablation | None, found: list[Finding],
                 statistics: PatternStatistics, running: bool = False) -> list[ClaimCheck] | None:
    """The rows of the claims table for `study` (the config's `claims:`), None when no study is set.
    `running`: the ablation is still running (a site written before it finished), so an experiment it lacks
    is not measured yet rather than switched off."""
    if study is None:
        return None
    by_id = {finding.id: finding for finding in found}
    rows = [_random_under(ablation, by_id, running), _bump(ablation, by_id, running),
            _lower_layers(ablation, by_id, running), _middle_layer(ablation, by_id, running)]
    return rows + [_word_boundaries(statistics, by_id), _word_order(by_id), _term_matching(by_id)]


def _check(key: str, verdict: str, why: str, links: list[Link], *, number: str = NOT_MEASURED, test: str = "",
           numbers: dict[str, Any] | None = None, **evidence: Any) -> ClaimCheck:
    claim, seed_number = SEED004_CLAIMS[key]
    return ClaimCheck(id=f"seed004-{key}", study="seed004", claim=claim, study_number=seed_number, number=number,
                      test=test or PLANNED_TESTS[key], verdict=verdict, why=why, links=links, numbers=numbers or {},
                      **evidence)


def _behind(by_id: dict[str, Finding], *ids: str) -> list[Link]:
    """The findings a row rests on (their anchors on the findings page) and their charts; where a row rests on
    several, each link names its pattern ("previous token finding")."""
    links: list[Link] = []
    for fid in ids:
        if fid in by_id:
            which = fid.split("-", 1)[1].replace("-", " ") + " " if len(ids) > 1 else ""
            links.append(Link(label=f"{which}finding", href=f"index.html#finding-{fid}"))
            links.extend(Link(label=f"{which}{link.label}", href=link.href) for link in by_id[fid].links
                         if link.label == "chart")
    return links


# -- the ablation claims ----------------------------------------------------------------------------
def _unmeasured(ablation: Ablation | None, experiment: str, running: bool = False) -> str | None:
    """Why an experiment's claim cannot be checked on this model; None when it can."""
    if running and (ablation is None or ablation[experiment] is None):
        return f"the {experiment} experiment has not finished yet: this site was written while the build runs"
    if ablation is None:
        return "the head ablation is off (ablation.enabled: false)"
    task = ablation.task
    if task.undefined or (ablation.baseline is not None and ablation.baseline.value is None):
        reason = task.undefined or "e.g. the model gives every example the same score"
        return f"{names.metric(task.metric)} is undefined on the task data ({reason}), so no change can be tested"
    if ablation[experiment] is None:
        return f"the {experiment} experiment is switched off (ablation.experiments.{experiment}: false)"
    return None


def _said(ablation: Ablation) -> str:
    """The primary metric as the pages name it: every change in a row is relative change of it."""
    return names.metric(ablation.task.metric)


def _gain(value: float | None, higher: bool) -> float | None:
    """A change read as an improvement: positive is better, whichever way the metric points."""
    return None if value is None else (value if higher else -value)


def _at(fractions: list[float], wanted: float) -> int | None:
    return next((i for i, fraction in enumerate(fractions) if math.isclose(fraction, wanted)), None)


def _random_under(ablation: Ablation | None, by_id: dict[str, Finding], running: bool = False) -> ClaimCheck:
    """"Costs nothing" is non-inferiority (REFERENCE, "Claims"): the paired CI of the change at 10% and at the
    largest fraction under 20%, against the margin; the fractions are a fixed sequence (NonInferiority.up_to)."""
    key, links = "random-under-20", _behind(by_id, "ablation-random-fraction")
    why = _unmeasured(ablation, "random_fraction", running)
    if why:
        return _check(key, "not measured", why, links)
    sweep, test = ablation.random_fraction, ablation.random_fraction.non_inferiority
    below = [i for i, fraction in enumerate(sweep.fractions) if 0 < fraction < SEED004.free_below]
    if not below:
        return _check(key, "not measured", f"no fraction between 0 and {percent(SEED004.free_below)} is among "
                      "ablation.fractions", links)
    checked = sorted({i for i in below if math.isclose(sweep.fractions[i], SEED004.bump_at)} | {below[-1]})
    verdict, why = _non_inferiority_verdict(ablation, below, checked)
    number = _said(ablation) + " " + "; ".join(f"at {percent(sweep.fractions[i])}: {change(sweep.relative_mean[i])} "
                                               f"(paired 95% CI {interval(test.change_ci[i])})" for i in checked)
    numbers = {"fractions": [sweep.fractions[i] for i in checked],
               "relative_mean": [sweep.relative_mean[i] for i in checked],
               "change_ci": [test.change_ci[i] for i in checked], "margin": test.margin,
               "non_inferior": [test.non_inferior[i] for i in checked], "up_to": test.up_to}
    return _check(key, verdict, why, links, number=number, test=f"non-inferiority: {test.test}", numbers=numbers,
                  metric=ablation.task.metric, value=sweep.relative_mean[checked[-1]],
                  ci=test.change_ci[checked[-1]])


def _non_inferiority_verdict(ablation: Ablation, below: list[int], checked: list[int]) -> tuple[str, str]:
    """Supported when every fraction up to the largest checked is non-inferior (the fixed sequence holds);
    contradicted when a checked fraction's whole CI lies below -margin, a loss larger than the margin;
    otherwise not supported here: a loss larger than the margin is not ruled out."""
    sweep, test = ablation.random_fraction, ablation.random_fraction.non_inferiority
    higher = ablation.task.higher_is_better[ablation.task.metric]
    largest = sweep.fractions[checked[-1]]
    if test.up_to >= largest:
        return "supported", (f"the paired 95% CI of the relative change lies above -{margin(test.margin)} (the "
                             f"margin) at every fraction up to {percent(largest)}")
    worse = [i for i in checked if _upper_gain(test.change_ci[i], higher) < -test.margin]
    if worse:
        return "contradicted", (f"at {percent(sweep.fractions[worse[0]])} the whole CI lies below "
                                f"-{margin(test.margin)}: a loss larger than the margin")
    failing = next((i for i in below if not test.non_inferior[i]), checked[-1])
    return "not supported here", (f"at {percent(sweep.fractions[failing])} the CI {interval(test.change_ci[failing])}"
                                  f" reaches below -{margin(test.margin)}, so a loss larger than the margin is not "
                                  "ruled out")


def _upper_gain(ci: list[float | None], higher: bool) -> float:
    """The best end of a CI of a change, read as a gain (NaN when the CI is undefined)."""
    ends = [_gain(end, higher) for end in ci]
    return max(ends) if None not in ends else math.nan


def _bump(ablation: Ablation | None, by_id: dict[str, Finding], running: bool = False) -> ClaimCheck:
    """Is the +1% at 10% real? The paired 95% CI of the relative change at 10%: above 0, around 0, below 0."""
    key, links = "bump-at-10", _behind(by_id, "ablation-random-fraction")
    why = _unmeasured(ablation, "random_fraction", running)
    if why:
        return _check(key, "not measured", why, links)
    sweep, test = ablation.random_fraction, ablation.random_fraction.non_inferiority
    at = _at(sweep.fractions, SEED004.bump_at)
    if at is None:
        return _check(key, "not measured", f"{percent(SEED004.bump_at)} is not among ablation.fractions", links)
    ci, higher = test.change_ci[at], ablation.task.higher_is_better[ablation.task.metric]
    if None in ci:
        return _check(key, "not measured", "the CI of the change is undefined", links)
    low, high = sorted(_gain(end, higher) for end in ci)
    seed = "contains" if low <= SEED004.bump <= high else "excludes"
    if low > 0:
        verdict, why = "supported", f"the paired 95% CI of the relative change lies above 0 (it {seed} the seed's " \
                                    f"{_as_reported(SEED004.bump)})"
    elif high < 0:
        verdict, why = "contradicted", "the whole paired 95% CI lies below 0: masking costs, it does not help"
    else:
        verdict, why = "not supported here", (f"the paired 95% CI {interval(ci)} contains 0, so no change either "
                                              f"way is shown (it {seed} the seed's {_as_reported(SEED004.bump)})")
    seeds = len(sweep.seeds)
    pooled = f", {seeds} seeds pooled" if seeds > 1 else ""
    number = f"{_said(ablation)} {change(sweep.relative_mean[at])} (paired 95% CI {interval(ci)}{pooled})"
    return _check(key, verdict, why, links, number=number, test=f"paired percentile bootstrap over examples "
                  f"({test.bootstrap_samples} resamples): the 95% CI of the relative change against 0",
                  metric=ablation.task.metric, value=sweep.relative_mean[at], ci=ci,
                  numbers={"fraction": sweep.fractions[at], "relative_mean": sweep.relative_mean[at], "ci": ci})


def _lower_layers(ablation: Ablation | None, by_id: dict[str, Finding], running: bool = False) -> ClaimCheck:
    """Lower vs upper half at the same share of all heads, by the paired test per fraction (corrected over
    the fractions); never by the spread over seeds, which is zero where every seed masks the whole half."""
    key, links = "lower-layers", _behind(by_id, "ablation-layer-halves")
    why = _unmeasured(ablation, "layer_halves", running)
    halves = ablation.layer_halves if why is None else None
    if halves is not None and halves.comparison is None:
        why = "no fraction of ablation.fractions masks a head within one half"
    if why:
        return _check(key, "not measured", why, links)
    test, higher = halves.comparison, ablation.task.higher_is_better[ablation.task.metric]
    # difference = metric(upper masked) - metric(lower masked): a gain means masking the lower half costs more
    gains = [_gain(d, higher) for d in test.difference]
    lower = [f for f, g, sig in zip(test.fractions, gains, test.significant, strict=True) if sig and g and g > 0]
    upper = [f for f, g, sig in zip(test.fractions, gains, test.significant, strict=True) if sig and g and g < 0]
    if lower and not upper:
        verdict, at = "supported", lower[-1]
        why = f"masking the lower half costs significantly more at {fractions_list(lower)} of all heads"
    elif upper and not lower:
        verdict, at = "contradicted", upper[-1]
        why = f"masking the upper half costs significantly more at {fractions_list(upper)} of all heads"
    else:
        verdict = "not supported here"
        p_values = [math.inf if p is None else p for p in test.p_adjusted]
        at = lower[-1] if lower else test.fractions[p_values.index(min(p_values))]
        why = (f"the lower half costs more at {fractions_list(lower)}, the upper half at {fractions_list(upper)}"
               if lower else "the halves do not differ significantly at any fraction tested")
    t, i = test.fractions.index(at), halves.fractions.index(at)
    p = p_text(test.p_adjusted[t], test.p_value[t], test.permutations, test.alpha)
    number = (f"{_said(ablation)} at {percent(at)}: lower half masked {change(halves.lower.relative_mean[i])}, "
              f"upper half {change(halves.upper.relative_mean[i])} (corrected {p})")
    note = (f"Lower = layers {_span(halves.lower_layers)}, upper = {_span(halves.upper_layers)} of this model's "
            f"{ablation.layers}; fractions tested: {fractions_list(test.fractions)}.")
    numbers = {"fraction": at, "lower_relative": halves.lower.relative_mean[i],
               "upper_relative": halves.upper.relative_mean[i], "difference": test.difference[t],
               "lower_costs_more": lower, "upper_costs_more": upper}
    return _check(key, verdict, why, links, number=number, test=f"{test.test}, alpha {test.alpha}",
                  numbers=numbers, metric=ablation.task.metric, note=note,
                  value=test.difference[t], p_value=test.p_adjusted[t])


def _span(layers: list[int]) -> str:
    return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])


def middle_layers(layers: int) -> list[int]:
    """The seed's middle layers (5-9 of 12) on a model with `layers` layers, by relative depth: layer l sits
    at (l + 0.5) / layers, and is a middle layer when that lies in [5/12, 10/12) (integer arithmetic)."""
    first, last = SEED004.middle
    return [layer for layer in range(layers)
            if 2 * first * layers <= (2 * layer + 1) * SEED004.layers < 2 * (last + 1) * layers]


def seed_layer_here(layers: int) -> int:
    """The layer at the relative depth of the seed's best layer (8 of 12)."""
    return (2 * SEED004.best_layer + 1) * layers // (2 * SEED004.layers)


def _middle_layer(ablation: Ablation | None, by_id: dict[str, Finding], running: bool = False) -> ClaimCheck:
    """Each middle layer masked whole, by its paired test against the unmasked model (corrected over all layers)."""
    key, links = "middle-layer", _behind(by_id, "ablation-whole-layers")
    why = _unmeasured(ablation, "whole_layers", running)
    if why:
        return _check(key, "not measured", why, links)
    tests, higher = ablation.whole_layers, ablation.task.higher_is_better[ablation.task.metric]
    middle, analogue = middle_layers(ablation.layers), seed_layer_here(ablation.layers)
    gain = {layer: _gain(tests.relative[layer], higher) for layer in middle}
    improving = [layer for layer in middle if tests.significant[layer] and (gain[layer] or 0) > 0]
    losing = [layer for layer in middle if tests.significant[layer] and (gain[layer] or 0) < 0]
    measured = [layer for layer in middle if gain[layer] is not None]
    if not measured:
        return _check(key, "not measured", "the relative change is undefined (the unmasked metric is 0)", links)
    best = max(measured, key=lambda layer: gain[layer])
    if improving:
        best = max(improving, key=lambda layer: gain[layer])
        verdict, why = "supported", f"masking layer {best} improves {_said(ablation)} significantly"
    elif losing:
        verdict = "contradicted"
        why = f"every significant change among the middle layers is a loss (layer{plural(len(losing), 's')} " \
              f"{', '.join(map(str, losing))})"
    else:
        verdict, why = "not supported here", f"no middle layer changes {_said(ablation)} significantly"

    def said(layer: int) -> str:
        p = p_text(tests.p_adjusted[layer], tests.p_value[layer], tests.permutations, tests.alpha)
        return f"layer {layer}: {change(tests.relative[layer])} (corrected {p})"

    number = f"{_said(ablation)}, best middle {said(best)}" + (f"; {said(analogue)}" if analogue != best else "")
    note = (f"The seed's layers {SEED004.middle[0]}-{SEED004.middle[1]} of {SEED004.layers} are "
            f"layer{plural(len(middle), 's')} {_span(middle)} of this model's {ablation.layers} by relative depth "
            f"((l + 0.5) / layers), its layer {SEED004.best_layer} is layer {analogue}.")
    numbers = {"middle": middle, "seed_layer": analogue, "best": best, "relative": tests.relative[best],
               "improving": improving, "losing": losing}
    test = (f"{tests.test}, {tests.correction.capitalize()}-corrected over the {ablation.layers} layers, "
            f"alpha {tests.alpha}")
    return _check(key, verdict, why, links, number=number, test=test, numbers=numbers, metric=ablation.task.metric,
                  note=note, value=tests.relative[best], p_value=tests.p_adjusted[best])


# -- the pattern claims -----------------------------------------------------------------------------
SEGMENTATION_NOTES = {
    "none": "Words here are the tokenizer's: a word split into pieces (WordPiece's ##pieces on a BERT vocabulary), "
            "not the seed's Chinese words of single characters.",
    "spaces": "Words here are the input's space-separated words (segmentation: spaces).",
    "jieba": "Words here come from jieba (segmentation: jieba), as words of Chinese characters in the seed's setting.",
}


def _word_boundaries(statistics: PatternStatistics, by_id: dict[str, Finding]) -> ClaimCheck:
    """Within-word attention measured beyond adjacency: a head must also put more weight on a neighbour inside
    its word than across a boundary (boundary selectivity; REFERENCE, "Claims": a pure previous-token head
    scores about 0.56 within word)."""
    key, fid = "word-boundaries", "patterns-within-word"
    finding, links = by_id.get(fid), _behind(by_id, fid)
    note = SEGMENTATION_NOTES.get(statistics.settings.get("segmentation"), None)
    if finding is None or not finding.numbers.get("strongest"):
        return _check(key, "not measured", "no input has a word split into pieces", links, note=note)
    n = finding.numbers
    test = (f"within-word share above {n['threshold']} and boundary selectivity above "
            f"{n['selectivity_threshold']} (weight on a neighbour inside the word minus across a boundary), "
            f"over {n['applies_to']} input{plural(n['applies_to'], 's')}; a pure previous-token head scores "
            f"{share(n['null'].get('previous'))} within word")
    if finding.supported:
        top = n["heads"][0]
        number = (f"{n['count']} head{plural(n['count'], 's')}; {head_name(top)}: within word {plus_minus(top)}, "
                  f"selectivity {share(top['selectivity'])}")
        why, value = f"{n['count']} head{plural(n['count'], 's pass', ' passes')} both tests", top["selectivity"]
    else:
        top, selective = n["strongest"], n["most_selective"]
        number = f"highest within word: {head_name(top)}, {plus_minus(top)} (selectivity {share(top['selectivity'])})"
        if selective and (selective["layer"], selective["head"]) != (top["layer"], top["head"]):
            number += (f"; most selective: {head_name(selective)}, selectivity {share(selective['value'])} "
                       f"(within word {share(selective['within_word'])})")
        why, value = "no head passes both the within-word and the boundary-selectivity threshold", top["value"]
    return _check(key, "supported" if finding.supported else "not supported here", why, links, number=number,
                  test=test, note=note, value=value, numbers={"count": n["count"], "head": top})


def _word_order(by_id: dict[str, Finding]) -> ClaimCheck:
    """Positional heads: Clark et al.'s test (mean weight on the neighbour) or Voita et al.'s (argmax share)."""
    key, ids = "word-order", ("patterns-previous-token", "patterns-next-token")
    found = [by_id[fid] for fid in ids if fid in by_id]
    links = _behind(by_id, *ids)
    if not found:
        return _check(key, "not measured", "the positional findings were not made", links)
    counts = {finding.id.removeprefix("patterns-").removesuffix("-token"): finding.numbers["count"]
              for finding in found}
    heads = [finding.numbers["heads"][0] if finding.numbers["count"] else finding.numbers["strongest"]
             for finding in found]
    top = max(heads, key=lambda head: head["value"])
    number = (", ".join(f"{count} {which}-token head{plural(count, 's')}" for which, count in counts.items())
              + f"; strongest: {head_name(top)} with {plus_minus(top)}")
    numbers = found[0].numbers
    test = (f"Clark et al.: mean weight on the neighbour above {numbers['threshold']}, or Voita et al.: the largest "
            f"weight on it for at least {percent(numbers['argmax_threshold'])} of tokens; a uniform head scores "
            f"{share(numbers['null'].get('uniform'))}")
    supported = any(finding.supported for finding in found)
    why = ("heads attend to the " + " and the ".join(w for w, c in counts.items() if c) + " token" if supported
           else "no head passes either test for the previous or the next token")
    return _check(key, "supported" if supported else "not supported here", why, links, number=number, test=test,
                  value=top["value"], numbers={"counts": counts, "head": top})


def _term_matching(by_id: dict[str, Finding]) -> ClaimCheck:
    """Query-title term matching is attention to the same word in the other sentence of a pair."""
    key, fid = "term-matching", "patterns-other-sentence"
    finding, links = by_id.get(fid), _behind(by_id, fid)
    if finding is None or not finding.numbers.get("strongest"):
        return _check(key, "not measured", "no input pair shares a word (give examples or corpus lines as pairs)",
                      links)
    n = finding.numbers
    top = n["heads"][0] if finding.supported else n["strongest"]
    pairs = f"{n['applies_to']} pair{plural(n['applies_to'], 's')}"
    number = (f"{n['count']} head{plural(n['count'], 's')}; {'strongest' if finding.supported else 'best'}: "
              f"{head_name(top)} with {plus_minus(top)}")
    test = (f"mean share of a word's attention on the same word in the other sentence above {n['threshold']}, over "
            f"{pairs}; a uniform head scores {share(n['null'].get('uniform'))}")
    why = (f"{n['count']} head{plural(n['count'], 's pass', ' passes')}" if finding.supported
           else f"no head is above {n['threshold']}")
    return _check(key, "supported" if finding.supported else "not supported here", why, links, number=number,
                  test=test, value=top["value"], numbers={"count": n["count"], "head": top})
