"""Findings about attention patterns (Clark et al. 2019; Voita et al. 2019): which heads show
which pattern, each against its threshold and the test behind it."""

from __future__ import annotations

import numpy as np

from reportgen.findings.sentence import SHOWN_HEADS, Sentence, grid, head_name, percent, plural, plus_minus, view
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


def pattern_numbers(stats: PatternStatistics, stat: str, label: str, threshold: float) -> dict:
    """Which heads carry a pattern (over its threshold), strongest first; else the strongest candidate."""
    mean = grid(stats[stat].mean)
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


