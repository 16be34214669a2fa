"""The first screen of the findings page, in plain words: which model, what was looked for, and one take-home
sentence (issue 47: a newcomer met the model's name 1,335 px down and no take-home at all).

Everything here is read from the report's findings and atlas, and says no more than they do: a head is "needed"
only where its single-head test is significant, a pattern's count is its atlas's label count, and a report
without a task says it measured none. `lead(report)` gives the template plain data; the sentences it builds
use the glossary's long forms ("attention heads", "masking") so their first use links to the entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reportgen.findings import names
from reportgen.findings.formatting import margin, percent, words_list

KINDS = {"encoder": "an encoder", "decoder": "a decoder (each token sees only itself and the tokens before it)",
         "encoder-decoder": "an encoder-decoder"}
NAMED = 3  # a count up to this many names its heads; more link to the head labels instead
# What a head with each label does, as a verb phrase for "N heads ..."; a label without one is named instead.
DOES = {"delimiter": "put most of their attention on [CLS], [SEP] or punctuation",
        "bos_delimiter": "put most of their attention on special tokens or punctuation",
        "previous_token": "look at the token just before", "next_token": "look at the token just after",
        "broad": "spread their attention over many tokens", "same_token": "look at the same word",
        "other_segment": "look at the same word in the other sentence",
        "within_word": "look at the other pieces of the same word",
        "duplicate_token": "look at earlier copies of the same token",
        "induction": "look at what followed the earlier copy of a repeated token (induction)",
        "sink": "park their attention on the first token (an attention sink)"}


@dataclass(frozen=True)
class Lead:
    """What the template prints above the summary list."""

    model: str
    kind: str  # "an encoder", ...
    layers: int
    heads: int  # per layer
    take_home: str
    unseen: list[str] = field(default_factory=list)  # the patterns looked for that no head shows (the labels bullet
    # names the others with their counts, so every pattern looked for is named)
    named: dict[str, str] = field(default_factory=dict)  # label -> its heads named ("layer 2 head 5"), few only
    significant: str = ""  # the single heads whose masking matters, named when few


def heads_named(heads: Sequence[tuple[int, int]], groups: Sequence[str] | None = None) -> str:
    """"layer 2 head 5", "layer 0 head 1 and layer 3 head 2", "layer 0 head 1, layer 1 head 0 and layer 3 head 2"."""
    return words_list([names.head_name(layer, head, groups) for layer, head in heads])


def lead(report) -> Lead:
    """The first screen's facts and take-home sentence for `report` (a reportgen.report.Report)."""
    atlas = report.atlas
    groups = report.groups
    by_label: dict[str, list[tuple[int, int]]] = {}
    for layer, row in enumerate(atlas.labels):
        for head, label in enumerate(row):
            by_label.setdefault(label, []).append((layer, head))
    named = {label: heads_named(heads, groups) for label, heads in by_label.items()
             if label != "mixed" and len(heads) <= NAMED}
    single = _finding(report, "ablation-single-heads")
    significant = ""
    if single is not None and 0 < single.numbers["count"] <= NAMED:
        significant = heads_named([(h["layer"], h["head"]) for h in single.numbers["significant"]], groups)
    unseen = [names.name(label) for label, count in atlas.label_counts.items() if label != "mixed" and not count]
    total = sum(atlas.label_counts.values())
    sentence = f"{_pattern_clause(atlas.label_counts, total)}; {_task_clause(report, significant)}"
    if patched := _patching_clause(report, groups):
        sentence += f"; {patched}"
    return Lead(model=report.model.name, kind=KINDS[report.architecture],
                layers=len(atlas.labels), heads=report.heads,
                take_home=sentence[:1].upper() + sentence[1:], unseen=unseen, named=named, significant=significant)


def _finding(report, fid: str):
    return next((f for f in report.findings if f.id == fid), None)


def _pattern_clause(counts: dict[str, int], total: int) -> str:
    """The most common label in plain words: "most of its attention heads (45 of 72) put ...", "28 of its 72
    attention heads put ..., more than show any other pattern"; or that no head passes any threshold."""
    labelled = sorted(((count, label) for label, count in counts.items() if label != "mixed" and count),
                      reverse=True)
    if not labelled:
        return f"none of its {total} attention heads passes the threshold of any pattern looked for"
    count, label = labelled[0]
    does = DOES.get(label)
    if does is None:
        return f"its most common head pattern is {names.name(label)} ({count} of {total} attention heads)"
    if count > total / 2:
        return f"most of its attention heads ({count} of {total}) {does}"
    return f"{count} of its {total} attention heads {does}, more than show any other pattern"


def _task_clause(report, significant: str) -> str:
    """What masking showed, as far as its tests go; without a task, that none was measured."""
    ablation = report.ablation
    if ablation is None:
        progress = getattr(report, "progress", None)  # a site written while its build runs (or was stopped)
        if progress is not None:
            return ("the head ablation was stopped before it finished, so this report does not say which heads the "
                    "model needs" if progress.interrupted else
                    "the head ablation is still running, so which heads the model needs is not said yet")
        return "no task was measured, so this report does not say which heads the model needs"
    said = names.metric(ablation.task.metric)
    single, fraction = _finding(report, "ablation-single-heads"), _finding(report, "ablation-random-fraction")
    parts = []
    if single is not None:
        count, total = single.numbers["count"], single.numbers["total"]
        if count == 0:
            parts.append(f"masking any one head alone changes {said} by no significant amount")
        else:
            who = f" ({significant})" if significant else ""
            parts.append(f"masking one head alone changes {said} significantly for {count} of {total} heads{who}")
    if fraction is not None and fraction.numbers["up_to"] and not parts:  # one clause: the bullets give the rest
        worse = "raising" if ablation.task.higher_is_better[ablation.task.metric] is False else "lowering"
        parts.append(f"up to {percent(fraction.numbers['up_to'])} of the heads can be masked at random, "
                     f"{worse} {said} by less than {margin(fraction.numbers['margin'])}")
    if not parts:
        return f"the head ablation on {said} states its findings below"
    return " and ".join(parts)


def _patching_clause(report, groups: Sequence[str] | None) -> str:
    """What activation patching found, as far as its tests go: the head that restores most of the behaviour, named
    only where its finding is supported; that the pairs show no behaviour; else nothing (its findings say why)."""
    if getattr(report, "patching", None) is None:
        return ""
    if _finding(report, "patching-absent") is not None:
        return "its prompt pairs show no behaviour for activation patching to locate"
    restored = _finding(report, "patching-denoising")
    if restored is None or not restored.supported:
        return "activation patching finds no single head that restores a significant share of the behaviour"
    n = restored.numbers
    name = names.head_name(n["layer"], n["head"], groups)
    return (f"activation patching names {name} as the head that carries its prompt pairs' behaviour most: patched "
            f"from the clean run, it alone restores {percent(n['effect'])} of the logit difference")
