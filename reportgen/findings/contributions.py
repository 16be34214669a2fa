"""The finding on what the heads that look at [CLS] and [SEP] pass on: Clark et al.'s (2019) "no-op"
reading tested as Kobayashi et al. (2020) did, phrased from the test in reportgen/patterns/noop.py (the numbers
are the report's; this module only writes them)."""

from __future__ import annotations

from reportgen.findings.formatting import p_text, share
from reportgen.findings.sentence import Sentence, head_name, plural
from reportgen.report import DelimiterContribution, DelimiterHead, Finding, Link, PatternStatistics, head_link

FINDING_ID = "patterns-delimiter-contribution"
ANCHOR = "patterns.html#delimiter-contribution"  # the section with the test's table
UNAVAILABLE = "patterns.html#attention-patterns"  # the page's top, which says why contributions are not shown


def delimiter_contribution_finding(stats: PatternStatistics) -> Finding:
    """Supported when every tested head passes on a significantly smaller share from [CLS]/[SEP] than
    it puts there in weight; otherwise the sentence says for how many it holds, with the numbers."""
    if stats.contribution is None:
        s = Sentence().strong("What the heads pass on was not measured:").text(
            " contributions are not available for this model (reportgen cannot locate its value and output "
            'projections), so the "no-op" reading of attention to [CLS] and [SEP] is not tested.')
        return s.finding(FINDING_ID, "patterns", False, [Link(label="patterns page", href=UNAVAILABLE)], {})
    test = stats.contribution.delimiter
    if test is None:
        s = Sentence().strong('The "no-op" reading of attention to [CLS] and [SEP] was not tested:').text(
            " there is no example to pair weights and contributions over.")
        return s.finding(FINDING_ID, "patterns", False, [Link(label="patterns page", href=UNAVAILABLE)], {})
    heads = test.heads
    lower = [head for head in heads if head.significant and (head.difference or 0) < 0]
    higher = [head for head in heads if head.significant and (head.difference or 0) > 0]
    supported = len(lower) == len(heads) > 0
    s = Sentence()
    if supported:
        _supported(s, test)
    elif lower:
        _partly(s, test, lower)
    else:
        _not_supported(s, test)
    if higher:
        s.text(f" In {len(higher)} of them the share of contribution is significantly above the share of weight.")
    _per_head(s, test, with_p=not supported)
    worst = max((head.p_adjusted for head in heads if head.p_adjusted is not None), default=None)
    return s.finding(FINDING_ID, "patterns", supported, [Link(label="table", href=ANCHOR)], test.model_dump(),
                     test=test.test, p_value=worst if supported else None)


def _paired(test: DelimiterContribution) -> str:
    """Over what the test is paired (the examples), and over what the heads were chosen when that is more."""
    paired = f"paired over {test.examples} example{plural(test.examples, 's')}"
    if test.selected_over > test.examples:
        paired += f", the heads chosen over all {test.selected_over} inputs, corpus sentences included"
    return paired


def _top(test: DelimiterContribution) -> str:
    count = len(test.heads)
    return f"the {count} head{plural(count, 's')} that put{plural(count, '', 's')} most weight on [CLS] and [SEP]"


def _supported(s: Sentence, test: DelimiterContribution) -> None:
    count = len(test.heads)
    # Every head's p is at most the largest; a bound however small the others are (at the floor or not).
    worst = max(head.p_adjusted for head in test.heads)
    every = "each of the" if count > 1 else "the"
    s.strong(f"In {_top(test)}, {share(test.weight)} of the attention weight goes there but only "
             f"{share(test.contribution)} of what {plural(count, 'they pass', 'it passes')} on").text(
        f" (contribution share below weight share in {every} {count}, {_paired(test)}; sign-flip permutation "
        f"test{plural(count, 's')}, {'all ' if count > 1 else ''}Holm-corrected p ≤ {worst:.2g}): "
        "as Kobayashi et al. (2020) found for BERT-base, this attention passes on much less than its weight "
        'suggests, as the "no-op" reading (Clark et al. 2019) expects.')


def _partly(s: Sentence, test: DelimiterContribution, lower: list[DelimiterHead]) -> None:
    count, rest = len(test.heads), len(test.heads) - len(lower)
    s.strong('The "no-op" reading of attention to [CLS] and [SEP] is only partly supported here:').text(
        f" of {_top(test)}, {len(lower)} pass{plural(len(lower), '', 'es')} on a significantly smaller share from "
        f"there than {plural(len(lower), 'they put', 'it puts')} there in weight, {rest} "
        f"{plural(rest, 'do', 'does')} not (not supported for {plural(rest, 'them', 'it')}); over the {count}, "
        f"{share(test.weight)} of the weight and {share(test.contribution)} of the contribution goes there "
        f"({_paired(test)}; sign-flip permutation tests, Holm-corrected).")


def _not_supported(s: Sentence, test: DelimiterContribution) -> None:
    tested = [head for head in test.heads if head.p_adjusted is not None]
    best = min(tested, key=lambda head: head.p_adjusted, default=None)
    smallest = "" if best is None else (
        f", the smallest Holm-corrected {p_text(best.p_adjusted, best.p_value, test.permutations)}")
    s.strong('The "no-op" reading of attention to [CLS] and [SEP] is not supported here:').text(
        f" in {_top(test)}, {share(test.weight)} of the weight and {share(test.contribution)} of what they pass on "
        f"goes there, and no head's contribution share is significantly below its weight share ({_paired(test)}; "
        f"sign-flip permutation tests{smallest}).")
    if len(test.heads) * test.smallest_p >= test.alpha:
        s.text(f" On {test.examples} example{plural(test.examples, 's')} no head can reach significance after the "
               f"correction: the smallest p-value the test can be expected to give is {test.smallest_p:.2g}.")


def _per_head(s: Sentence, test: DelimiterContribution, with_p: bool) -> None:
    """Each head's two shares (and its p-value, `with_p`), with a link to its view in contributions mode."""
    s.text(" Per head, weight → contribution:")
    for index, head in enumerate(test.heads):
        p_value = f", {p_text(head.p_adjusted, head.p_value, test.permutations)}" if with_p else ""
        s.text((" " if index == 0 else "; ") + f"{head_name(head.model_dump())} {share(head.weight)} → "
               f"{share(head.contribution)}{p_value}")
        if head.example >= 0:
            href = head_link(head.example, head.layer, head.head, mode="contributions")
            s.text(" (").link(f"view on example {head.example + 1}", href).text(")")
    s.text(".")
