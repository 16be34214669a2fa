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
    count: int  # prompt pairs
    tokens: int | None  # the prompts' length when all have one (built-in pairs do); else null
    metric: str  # "logit(answer) - logit(wrong) at the last token" (or the [MASK], or the decoder's last token)
    clean: Number  # the metric's mean over pairs on the clean prompts
    corrupted: Number  # and on the corrupted ones
    clean_ci: list[Number]  # [low, high]: 95% percentile bootstrap over pairs
    corrupted_ci: list[Number]  # [low, high], as clean_ci
    difference: Number  # clean - corrupted, the behaviour the heads are asked to carry
    difference_ci: list[Number]  # [low, high], as clean_ci: what `present` holds against min_difference
    min_difference: float  # config patching.min_difference, in logits
    present: bool  # the difference's interval clears min_difference; else no head is significant and none is named


class PatchingEffects(Record):
    """One direction's exact patching of each head alone: denoising patches the clean run's head into the corrupted
    run (1: the head alone restores the behaviour), noising the corrupted run's head into the clean one (the head
    matters as much as the effect falls below 1). effect = (patched - corrupted) / (clean - corrupted), a ratio of
    sums over pairs; the test is a paired sign-flip permutation test of (patched - unpatched), Holm-corrected."""

    direction: Direction  # denoising or noising, as above
    effect: Grid  # [flat layer][head] the normalised effect above
    low: Grid  # 95% percentile bootstrap over pairs
    high: Grid  # its upper end (low: the lower)
    p_adjusted: Grid  # the sign-flip test's p-value, Holm-corrected over the heads patched exactly
    # p_adjusted < alpha, the interval leaving out the unpatched run's value, and the behaviour present (pairs.present)
    significant: list[list[bool]]
    estimate: Grid | None  # attribution patching's estimate of the same effect (null: not computed)


class PositionEffects(Record):
    """One direction's exact patching of chosen heads at each position alone (prompts of one length)."""

    direction: Direction  # denoising or noising (PatchingEffects)
    heads: list[list[int]]  # [flat layer, head] of each row
    tokens: list[str]  # the first pair's clean prompt, as shown (the columns)
    corrupted_tokens: list[str]  # and its corrupted prompt
    effect: list[list[Number]]  # [row][position]


class PatchingAgreement(Record):
    """How attribution patching ranks the heads beside exact patching, on the heads exact patching ran: the Spearman
    correlation of the two changes over heads, how many of exact patching's top `top` heads the estimate puts in its
    top `top`, and the heads of either top the other leaves out."""

    direction: Direction  # denoising or noising (PatchingEffects)
    spearman: Number  # over the heads, of the two methods' sizes |mean change|; null when undefined
    overlap: int  # heads in both tops
    top: int  # heads in each top: config patching.top, at most the heads exact patching ran
    disagree: list[list[int]]  # [flat layer, head]


class Patching(Record):
    """Activation patching on prompt pairs (config `patching:`)."""

    pairs: PatchingPairs  # the prompt pairs and the metric on them
    directions: list[PatchingEffects]  # each direction's effects: denoising, then noising
    positions: list[PositionEffects]  # empty when prompts differ in length, are longer than 64 tokens, or max_masks
    agreement: list[PatchingAgreement]  # per direction, attribution patching's estimate beside exact patching
    exact_heads: list[list[int]] | None  # null: every head was patched exactly; else the estimate's top heads that were
    runs: int  # patched forward rows exact patching took (max_masks bounds it)
    max_masks: int  # config patching.max_masks: the patched forward rows exact patching may take
    alpha: float  # significance level of the corrected p-values (config patching.alpha)
    bootstrap_samples: int  # resamples of the pairs behind each interval (config patching.bootstrap_samples)
    permutations: int  # sign flips of each head's test (config patching.permutations)
    correction: Literal["holm"] = "holm"  # of the p-values over the heads
    example: int | None  # 0-based index of the example that is the first pair's clean prompt (its head views)
    seconds: dict[str, float]  # exact and attribution patching's time
