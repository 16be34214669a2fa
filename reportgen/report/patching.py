"""The activation-patching records of a report (reportgen.patching): the prompt pairs, each direction's effect per
head with its interval and test, per head and position, and how attribution patching's estimate agrees.

Grids are [flat layer][head] as everywhere in the report (an encoder-decoder's layers in its groups' order); a
head exact patching did not run on (the estimate's top heads only, past `max_masks`) is null in every grid.
"""

from __future__ import annotations

from typing import Literal

from reportgen.report.base import Grid, Number, Record

Direction = Literal["denoising", "noising"]


class PatchingPairs(Record):
    """The prompt pairs and the metric read on them."""

    data: str  # "builtin" (the induction pairs) or the JSONL file, relative to the config file
    behaviour: str  # what the pairs test, in words ("induction: ..." or "the pairs of <file>")
    count: int
    tokens: int | None  # the prompts' length when all have one (built-in pairs do); else null
    metric: str  # "logit(answer) - logit(wrong) at the last token" (or the [MASK], or the decoder's last token)
    clean: Number  # the metric's mean over pairs on the clean prompts
    corrupted: Number  # and on the corrupted ones
    clean_ci: list[Number]  # [low, high]: 95% percentile bootstrap over pairs
    corrupted_ci: list[Number]
    difference: Number  # clean - corrupted, the behaviour the heads are asked to carry
    difference_ci: list[Number]
    min_difference: float  # config patching.min_difference, in logits
    present: bool  # the difference's interval clears min_difference; else no head is significant and none is named


class PatchingEffects(Record):
    """One direction's exact patching of each head alone: denoising patches the clean run's head into the corrupted
    run (1: the head alone restores the behaviour), noising the corrupted run's head into the clean one (the head
    matters as much as the effect falls below 1). effect = (patched - corrupted) / (clean - corrupted), a ratio of
    sums over pairs; the test is a paired sign-flip permutation test of (patched - unpatched), Holm-corrected."""

    direction: Direction
    effect: Grid
    low: Grid  # 95% percentile bootstrap over pairs
    high: Grid
    p_adjusted: Grid
    # p_adjusted < alpha, the interval leaving out the unpatched run's value, and the behaviour present (pairs.present)
    significant: list[list[bool]]
    estimate: Grid | None  # attribution patching's estimate of the same effect (null: not computed)


class PositionEffects(Record):
    """One direction's exact patching of chosen heads at each position alone (prompts of one length)."""

    direction: Direction
    heads: list[list[int]]  # [flat layer, head] of each row
    tokens: list[str]  # the first pair's clean prompt, as shown (the columns)
    corrupted_tokens: list[str]  # and its corrupted prompt
    effect: list[list[Number]]  # [row][position]


class PatchingAgreement(Record):
    """How attribution patching ranks the heads beside exact patching, on the heads exact patching ran: the Spearman
    correlation of the two changes over heads, how many of exact patching's top `top` heads the estimate puts in its
    top `top`, and the heads of either top the other leaves out."""

    direction: Direction
    spearman: Number
    overlap: int
    top: int
    disagree: list[list[int]]  # [flat layer, head]


class Patching(Record):
    """Activation patching on prompt pairs (config `patching:`)."""

    pairs: PatchingPairs
    directions: list[PatchingEffects]
    positions: list[PositionEffects]  # empty when prompts differ in length, are longer than 64 tokens, or max_masks
    agreement: list[PatchingAgreement]
    exact_heads: list[list[int]] | None  # null: every head was patched exactly; else the estimate's top heads that were
    runs: int  # patched forward rows exact patching took (max_masks bounds it)
    max_masks: int
    alpha: float
    bootstrap_samples: int
    permutations: int
    correction: Literal["holm"] = "holm"
    example: int | None  # 0-based index of the example that is the first pair's clean prompt (its head views)
    seconds: dict[str, float]  # exact and attribution patching's time
