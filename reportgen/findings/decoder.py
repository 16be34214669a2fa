"""Findings about a decoder's heads: induction, previous-token, duplicate-token heads and attention sinks
(/work/shared/REFERENCE.md, "Decoder heads"), each against its threshold and beside what the uniform causal
head (1/(q+1) on each visible key) scores on the same queries, e.g. "layer 1 head 6 is an induction head:
0.87 of its attention goes to the token after the earlier occurrence, against 0.02 for a uniform head".

The test is the one the head labels apply: a head carries a pattern when its mean over the queries is
above the pattern's threshold (config `patterns.thresholds`). The sentences say no more than that.
"""

from __future__ import annotations

import numpy as np

from reportgen.findings.formatting import share
from reportgen.findings.names import GROUPS
from reportgen.findings.sentence import SHOWN_HEADS, Sentence, grid, head_name, plural, plus_minus, view
from reportgen.report import CrossStatistics, DecoderStatistics, Finding, Link

# (finding id, statistic, chart anchor on the patterns page, what the weight goes to, the head's kind)
DECODER_FINDINGS = [
    ("patterns-induction", "induction", "induction",
     "the token that followed the earlier occurrence of the current token", "induction head"),
    ("patterns-previous-token", "previous_token", "previous-token", "the token just before", "previous-token head"),
    ("patterns-duplicate-token", "duplicate_token", "duplicate-token",
     "the earlier occurrences of the current token", "duplicate-token head"),
    ("patterns-sink", "sink", "sink", "the first token", "attention sink"),
    ("patterns-delimiter", "bos_delimiter", "delimiter", "the special tokens ([BOS], [EOS]) and '.' and ','",
     "delimiter head"),
]


def _heads(stats: DecoderStatistics | CrossStatistics, stat: str, passes: np.ndarray,
           group: str | None = None) -> list[dict]:
    record, named = stats[stat], {"group": group} if group else {}
    heads = [{"layer": int(layer), "head": int(head), "value": record.mean[layer][head],
              "std": record.std[layer][head], "example": record.example[layer][head], **named}
             for layer, head in np.argwhere(passes)]
    return sorted(heads, key=lambda head: -head["value"])


def decoder_numbers(stats: DecoderStatistics | CrossStatistics, stat: str, threshold: float,
                    group: str | None = None) -> dict:
    """The heads above `threshold` on `stat`, strongest first (at most SHOWN_HEADS), else the strongest head;
    each of an encoder-decoder's `group` (named and linked so) where one is given."""
    mean = grid(stats[stat].mean)
    passing = _heads(stats, stat, np.nan_to_num(mean, nan=-1) > threshold, group)
    strongest = _heads(stats, stat, mean == np.nanmax(mean), group)[0] if np.isfinite(mean).any() else None
    return {"stat": stat, "threshold": threshold, "heads": passing[:SHOWN_HEADS], "count": len(passing),
            "strongest": strongest, "null": stats[stat].null, "queries": stats[stat].queries}


def _where(stats: DecoderStatistics, stat: str) -> str:
    """The inputs a statistic is measured on, in words."""
    if stat == "induction":
        test = stats.induction_test
        return (f"on {test.sequences} sequences of {test.n} random tokens repeated twice (Olsson et al. 2022's "
                "induction test)")
    count = stats.counts.inputs
    return f"over {stats[stat].queries:,} tokens of {count} input{plural(count, 's')}"


def _with_view(s: Sentence, stat: str, head: dict) -> Sentence:
    """The head's view on its strongest example; the induction test's sequences have no page."""
    if stat == "induction" or head["example"] < 0:
        return s
    s.text(" (")
    return view(s, head).text(")")


def _sentence(stats: DecoderStatistics, n: dict, target: str, kind: str) -> Sentence:
    s = Sentence()
    null = f"a uniform causal head puts {share(n['null'])} there on the same tokens"
    where = _where(stats, n["stat"])
    if n["count"]:
        top = n["heads"][0]
        s.strong(f"{head_name(top, capital=True)} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}:").text(
            f" {plus_minus(top)} of its attention goes to {target}, against {share(n['null'])} for a uniform causal "
            f"head ({where}; threshold {n['threshold']})")
        _with_view(s, n["stat"], top).text(".")
        if n["count"] > 1:
            others = ", ".join(f"{head_name(head)} {share(head['value'])}" for head in n["heads"][1:])
            s.text(f" {n['count']} heads pass in all" + (f"; the next: {others}." if others else "."))
        return s
    strongest = n["strongest"]
    group = GROUPS.get(strongest.get("group"), "") + " " if strongest.get("group") else ""
    s.strong(f"No {group}head is {'an' if kind[0] in 'aeiou' else 'a'} {kind}").text(
        f" (not supported: none puts more than {n['threshold']} of its attention on {target}, {where}); the "
        f"strongest is {head_name(strongest)} with {plus_minus(strongest)}")
    return _with_view(s, n["stat"], strongest).text(f", and {null}.")


# An encoder-decoder's decoder self-attention has its atlas on a page of its own, and its findings ids of their own
# (an encoder's findings use the same names for the encoder's patterns).
SEQ2SEQ_DECODER_PAGE, SEQ2SEQ_DECODER_PREFIX = "decoder-patterns.html", "decoder-"


def decoder_findings(stats: DecoderStatistics, group: str | None = None) -> list[Finding]:
    """One finding per decoder pattern that was measured; a pattern not measured says why. With `group`
    ("decoder": an encoder-decoder's decoder self-attention) the ids, chart links and head names say so."""
    out = []
    page, prefix = (SEQ2SEQ_DECODER_PAGE, SEQ2SEQ_DECODER_PREFIX) if group else ("patterns.html", "")
    for plain_id, stat, anchor, target, kind in DECODER_FINDINGS:
        fid = prefix + plain_id
        label = next((label for label, name in stats.label_stats.items() if name == stat), None)
        links = [Link(label="chart", href=f"{page}#{anchor}")]
        if stats[stat] is None or label is None:
            out.append(_not_measured(stats, fid, stat, [], group))  # no section, so no chart to link to
            continue
        numbers = decoder_numbers(stats, stat, stats.thresholds[label], group)
        out.append(_sentence(stats, numbers, target, kind).finding(fid, "patterns", bool(numbers["count"]), links,
                                                                    numbers))
    return out


def _not_measured(stats: DecoderStatistics, fid: str, stat: str, links: list[Link],
                  group: str | None = None) -> Finding:
    s = Sentence()
    if stat == "induction":
        s.strong(f"Induction heads{' of the decoder' if group else ''} were not measured:").text(
            f" {stats.induction_missing or 'the test did not run'}.")
    elif stat == "duplicate_token":
        s.strong("Duplicate-token heads were not measured:").text(" no input repeats a token.")
    else:
        s.strong("Delimiter heads were not measured:").text(" no input has a special token, '.' or ','.")
    return s.finding(fid, "patterns", False, links, {"stat": stat, "count": 0})


def cross_finding(stats: CrossStatistics) -> Finding:
    """Whether an encoder-decoder's cross-attention heads park their attention on the source's special tokens
    (its </s>), the counterpart of Clark et al.'s [SEP] attention, beside a uniform head over the source."""
    numbers = decoder_numbers(stats, "source_special", stats.threshold, "cross")
    where = (f"over {numbers['queries']:,} decoder tokens of {stats.counts.examples} "
             f"example{plural(stats.counts.examples, 's')}; threshold {stats.threshold}, Clark et al.'s for [SEP]")
    null = f"a uniform head over the source puts {share(numbers['null'])} there"
    links = [Link(label="chart", href="cross-attention.html#source-special")]
    s = Sentence()
    if numbers["count"]:
        top = numbers["heads"][0]
        s.strong(f"{head_name(top, capital=True)} parks its attention on the source's special tokens:").text(
            f" {plus_minus(top)} of it goes to them, while {null} ({where}) (")
        view(s, top).text(").")
        if numbers["count"] > 1:
            others = ", ".join(f"{head_name(head)} {share(head['value'])}" for head in numbers["heads"][1:])
            s.text(f" {numbers['count']} heads pass in all" + (f"; the next: {others}." if others else "."))
    else:
        strongest = numbers["strongest"]
        s.strong("No cross-attention head parks its attention on the source's special tokens").text(
            f" (not supported: none puts more than {stats.threshold} of it there, {where}); the strongest is "
            f"{head_name(strongest)} with {plus_minus(strongest)} (")
        view(s, strongest).text(f"), and {null}.")
    return s.finding("cross-patterns-source-special", "patterns", bool(numbers["count"]), links, numbers)
