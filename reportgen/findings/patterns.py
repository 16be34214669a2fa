"""Findings about attention patterns (Clark et al. 2019; Voita et al. 2019): which heads show
which pattern, each against its threshold, the test behind it and what a head with a simpler
pattern (uniform, pure previous / next token) scores on the same inputs (issue 12)."""

from __future__ import annotations

import numpy as np

from reportgen.findings.contributions import delimiter_contribution_finding
from reportgen.findings.formatting import percent, share
from reportgen.findings.sentence import SHOWN_HEADS, Sentence, grid, head_name, plural, plus_minus, view
from reportgen.report import Finding, Link, PatternStatistics

# Pattern findings: (id, statistic, label, threshold key in settings.thresholds, chart anchor on the patterns page).
PATTERN_FINDINGS = [
    ("patterns-previous-token", "previous_token", "previous_token", "positional", "previous-token"),
    ("patterns-next-token", "next_token", "next_token", "positional", "next-token"),
    ("patterns-delimiter", "delimiter", "delimiter", "delimiter", "cls"),
    ("patterns-within-word", "within_word", "within_word", "within_word", "within-word"),
    ("patterns-other-sentence", "other_segment", "other_segment", "other_segment", "other-sentence"),
    ("patterns-same-word", "same_token", "same_token", "same_token", "same-word"),
]


def _head(stats: PatternStatistics, stat: str, layer: int, head: int) -> dict:
    values = stats[stat]
    return {"layer": layer, "head": head, "value": values.mean[layer][head], "std": values.std[layer][head],
            "example": values.example[layer][head]}


def _strongest(stats: PatternStatistics, stat: str, eligible: np.ndarray | None = None) -> dict | None:
    """The head with the largest mean of `stat` (among `eligible` heads), or None where none is measured."""
    mean = grid(stats[stat].mean)
    if eligible is not None:
        mean = np.where(eligible, mean, np.nan)
    if not np.isfinite(mean).any():
        return None
    layer, head = np.unravel_index(np.nanargmax(mean), mean.shape)
    return _head(stats, stat, int(layer), int(head))


def _nulls(stats: PatternStatistics, stat: str) -> dict:
    return stats.nulls[stat].model_dump() if stat in stats.nulls else {}


def pattern_numbers(stats: PatternStatistics, stat: str, label: str, threshold: float,
                    passes: np.ndarray | None = None) -> dict:
    """Which heads carry a pattern (`passes`, by default mean over `threshold`), strongest first;
    else the strongest candidate; with the pattern's nulls."""
    mean = grid(stats[stat].mean)
    if passes is None:
        passes = np.nan_to_num(mean, nan=-1) > threshold
    heads = sorted((_head(stats, stat, int(layer), int(head)) for layer, head in np.argwhere(passes)),
                   key=lambda x: -x["value"])
    return {"stat": stat, "threshold": threshold, "heads": heads[:SHOWN_HEADS], "count": len(heads),
            "labelled": sum(row.count(label) for row in stats.labels), "strongest": _strongest(stats, stat),
            "applies_to": stats[stat].count, "null": _nulls(stats, stat)}


def positional_numbers(stats: PatternStatistics, stat: str, thresholds: dict) -> dict:
    """Heads that pass Clark et al.'s test (mean weight above `positional`) or Voita et al.'s
    (argmax share at least `positional_argmax`), each with which of the two it passes."""
    clark = np.nan_to_num(grid(stats[stat].mean), nan=-1) > thresholds["positional"]
    voita = np.nan_to_num(grid(stats[f"{stat}_argmax"].mean), nan=-1) >= thresholds["positional_argmax"]
    numbers = pattern_numbers(stats, stat, stat, thresholds["positional"], clark | voita)
    numbers.update(argmax_threshold=thresholds["positional_argmax"], clark_count=int(clark.sum()),
                   voita_count=int(voita.sum()))
    for head in numbers["heads"] + ([numbers["strongest"]] if numbers["strongest"] else []):
        layer, index = head["layer"], head["head"]
        head.update(argmax=stats[f"{stat}_argmax"].mean[layer][index], clark=bool(clark[layer, index]),
                    voita=bool(voita[layer, index]), clark_n=stats[f"{stat}_clark"].mean[layer][index])
    return numbers


def _passing(passed: bool) -> str:
    return "passing" if passed else "failing"


def _positional(n: dict, which: str) -> Sentence:
    s = Sentence()
    tests = (f"Clark et al.'s test (mean weight above {n['threshold']}) or Voita et al.'s (largest weight on it "
             f"for at least {percent(n['argmax_threshold'])} of tokens)")
    uniform = f" A uniform head scores {share(n['null'].get('uniform'))} on these inputs."
    if n["count"]:
        s.strong(f"{n['count']} head{plural(n['count'], 's')} attend{plural(n['count'], '', 's')} "
                 f"to the {which} token").text(f" by {tests}. ")
        for i, head in enumerate(n["heads"]):
            s.text(f"{head_name(head, capital=i == 0)} puts {plus_minus(head)} of its attention on it, "
                   f"{_passing(head['clark'])} Clark's test, and has its largest weight there for "
                   f"{percent(head['argmax'])} of tokens, {_passing(head['voita'])} Voita's (")
            view(s, head).text(")" + ("; " if i < len(n["heads"]) - 1 else "."))
        return s.text(uniform)
    strongest = n["strongest"]
    s.strong(f"No head attends mainly to the {which} token").text(
        f" (not supported: none passes {tests}); the strongest is {head_name(strongest)} with "
        f"{plus_minus(strongest)}, its largest weight there for {percent(strongest['argmax'])} of tokens (")
    return view(s, strongest).text(")." + uniform)


def _delimiter(n: dict, total: int) -> Sentence:
    s = Sentence()
    uniform = f" A uniform head puts {share(n['null'].get('uniform'))} there on these inputs."
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} of {total} heads put more than {percent(n['threshold'])} of their attention on "
                 "[CLS], [SEP] or punctuation").text(
            f', the pattern Clark et al. (2019) read as a "no-op"; the strongest is {head_name(top)} with '
            f'{plus_minus(top)} (')
        return view(s, top).text(")." + uniform)
    strongest = n["strongest"]
    return s.strong(f"No head puts more than {percent(n['threshold'])} of its attention on delimiters").text(
        f" (not supported); the strongest is {head_name(strongest)} with {plus_minus(strongest)}." + uniform)


def within_word_numbers(stats: PatternStatistics, thresholds: dict) -> dict:
    """Heads that pass both within_word and boundary_selectivity, with the strongest of each."""
    within = np.nan_to_num(grid(stats.within_word.mean), nan=-1) > thresholds["within_word"]
    selective = (np.nan_to_num(grid(stats.boundary_selectivity.mean), nan=-np.inf)
                 > thresholds["boundary_selectivity"])
    numbers = pattern_numbers(stats, "within_word", "within_word", thresholds["within_word"], within & selective)
    selectivity = stats.boundary_selectivity.mean
    most_selective = _strongest(stats, "boundary_selectivity")
    if most_selective:
        most_selective["within_word"] = stats.within_word.mean[most_selective["layer"]][most_selective["head"]]
    for head in numbers["heads"] + ([numbers["strongest"]] if numbers["strongest"] else []):
        head["selectivity"] = selectivity[head["layer"]][head["head"]]
    numbers.update(selectivity_threshold=thresholds["boundary_selectivity"], most_selective=most_selective,
                   over_threshold_only=int((within & ~selective).sum()),
                   selectivity_null=_nulls(stats, "boundary_selectivity"))
    return numbers


def _within_word(n: dict) -> Sentence:
    s = Sentence()
    inputs = f"{n['applies_to']} input{plural(n['applies_to'], 's')} with split words"
    position = (f" A pure previous-token head scores {share(n['null'].get('previous'))} within word on these "
                f"inputs and {share(n['selectivity_null'].get('previous'))} selectivity.")
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} link{plural(n['count'], '', 's')} the pieces of "
                 "split words beyond position:").text(
            f" {head_name(top)} puts {plus_minus(top)} of a word piece's attention on the other pieces of its word, "
            f"and {share(top['selectivity'])} more weight on a neighbour inside its word than on one across a "
            f"word boundary (boundary selectivity, above {n['selectivity_threshold']}; {inputs}; ")
        view(s, top).text(").")
        if n["labelled"] == 0:
            s.text(" Its main label is another pattern, so this is a secondary role.")
        return s.text(position)
    strongest, selective = n["strongest"], n["most_selective"]
    if not strongest:
        return s.strong("Within-word attention was not measured:").text(" no input has a word split into pieces.")
    s.strong("No head links the pieces of split words beyond what position explains").text(
        f" (not supported: no head puts more than {n['threshold']} of a piece's attention on the other pieces of "
        f"its word with a boundary selectivity above {n['selectivity_threshold']}, over {inputs})." + position)
    s.text(f" The highest within-word score, {head_name(strongest)}'s {plus_minus(strongest)}, comes with a "
           f"selectivity of {share(strongest['selectivity'])}")
    if selective and round(selective["value"], 2) > 0:
        s.text(f"; the most selective head, {head_name(selective)}, puts {plus_minus(selective)} more weight on a "
               f"neighbour inside its word than across a boundary, with {share(selective['within_word'])} "
               "within word (")
        return view(s, selective).text(").")
    return s.text("; no head puts more weight on a neighbour inside its word than across a boundary.")


def _other_sentence(n: dict) -> Sentence:
    s = Sentence()
    uniform = f" A uniform head scores {share(n['null'].get('uniform'))} on these pairs."
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} match{plural(n['count'], '', 'es')} words across "
                 "the two sentences:").text(
            f" {head_name(top)} puts {plus_minus(top)} of a word's attention on its occurrences in the other "
            f"sentence ({n['applies_to']} pair{plural(n['applies_to'], 's')}; ")
        return view(s, top).text(")." + uniform)
    if n["strongest"]:
        strongest = n["strongest"]
        s.strong("No head mainly matches words across sentences").text(
            f" (not supported: none above {n['threshold']} over {n['applies_to']} pair{plural(n['applies_to'], 's')}); "
            "the strongest is "
            f"{head_name(strongest)} with {plus_minus(strongest)} (")
        return view(s, strongest).text(")." + uniform)
    return s.strong("Cross-sentence matching was not measured:").text(" no input pair shares a word.")


def _same_word(n: dict) -> Sentence:
    s = Sentence()
    uniform = f" A uniform head scores {share(n['null'].get('uniform'))} on these inputs."
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{n['count']} head{plural(n['count'], 's')} attend{plural(n['count'], '', 's')} to the same "
                 "word:").text(
            f" {head_name(top)} puts {plus_minus(top)} on the token itself and other occurrences of its word (")
        return view(s, top).text(")." + uniform)
    strongest = n["strongest"]
    return s.strong("No head mainly attends to the same word").text(
        f" (not supported: none above {n['threshold']}); the strongest is {head_name(strongest)} with "
        f"{plus_minus(strongest)}." + uniform)


def _broad(stats: PatternStatistics) -> Finding:
    """Broad: the rule the labels apply, mean over inputs of exp(entropy)/n at least broad_share."""
    threshold = stats.settings["thresholds"]["broad_share"]
    passing = np.nan_to_num(grid(stats.effective_share.mean), nan=-1) >= threshold
    broad = [(int(layer), int(head)) for layer, head in np.argwhere(passing)]
    labelled = sum(row.count("broad") for row in stats.labels)
    numbers = {"stat": "effective_share", "threshold": threshold, "count": len(broad), "labelled": labelled,
               "layers": sorted({layer for layer, _ in broad}), "baseline": stats.entropy.uniform_baseline,
               "null": _nulls(stats, "effective_share")}
    rule = (f"the mean over inputs of exp(entropy)/n is at least {threshold}: attention as spread as uniform attention "
            f"over {percent(threshold)} of the tokens or more")
    s = Sentence()
    if broad:
        layers = numbers["layers"]
        s.strong(f"{len(broad)} head{plural(len(broad), 's')} attend{plural(len(broad), '', 's')} broadly").text(
            f" ({rule}), in layer{plural(len(layers), 's')} {', '.join(map(str, layers))}.")
        if labelled < len(broad):
            s.text(f" {len(broad) - labelled} of them carry a stronger pattern's label.")
    else:
        s.strong("No head attends broadly").text(f" (not supported: for no head is {rule}).")
    s.text(f" A uniform head scores {share(numbers['null'].get('uniform'))}; a pure previous-token head "
           f"{share(numbers['null'].get('previous'))} on these inputs.")
    return s.finding("patterns-broad", "patterns", bool(broad), [Link(label="chart", href="patterns.html#broad")],
                     numbers)


def pattern_findings(stats: PatternStatistics) -> list[Finding]:
    """One finding per pattern of Clark et al. (2019), the test of the [CLS]/[SEP] "no-op" reading with
    what the heads pass on (after the delimiter finding), and one for broad attention."""
    thresholds = stats.settings["thresholds"]
    total = stats.counts.layers * stats.counts.heads
    write = {"patterns-previous-token": lambda n: _positional(n, "previous"),
             "patterns-next-token": lambda n: _positional(n, "next"),
             "patterns-delimiter": lambda n: _delimiter(n, total),
             "patterns-within-word": _within_word, "patterns-other-sentence": _other_sentence,
             "patterns-same-word": _same_word}
    out = []
    for fid, stat, label, threshold, anchor in PATTERN_FINDINGS:
        if label in ("previous_token", "next_token"):
            numbers = positional_numbers(stats, stat, thresholds)
        elif label == "within_word":
            numbers = within_word_numbers(stats, thresholds)
        else:
            numbers = pattern_numbers(stats, stat, label, thresholds[threshold])
        out.append(write[fid](numbers).finding(fid, "patterns", bool(numbers["count"]),
                                                [Link(label="chart", href=f"patterns.html#{anchor}")], numbers))
        if fid == "patterns-delimiter":
            out.append(delimiter_contribution_finding(stats))
    return out + [_broad(stats)]
