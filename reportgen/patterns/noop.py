"""Do the heads that look at [CLS] and [SEP] pass anything on? The "no-op" reading, tested.

Clark, Khandelwal, Levy and Manning (2019) read the heavy attention of middle-layer heads to [SEP]
as a no-op: a head with nothing to do rests there. Kobayashi, Kuribayashi, Yokoi and Inui (2020,
"Attention is Not Only a Weight") measured it: in BERT-base that attention is large in weight but
small in norm, ||A[i, j] f(x_j)||, i.e. the delimiters pass little on (reportgen.model.value_norms).

Here, per example and head, two numbers: the share of the head's attention weight on [CLS] and every
[SEP] (Clark's cls_sep statistic: the special tokens, <s> and </s> for RoBERTa), and the same share
of its contributions. For the NOOP_HEADS heads with the largest mean weight share over all inputs (the
cls_sep statistic the patterns page shows), the per-example differences (contribution share - weight
share) get a paired sign-flip permutation test each, Holm-corrected over those heads (REFERENCE.md,
"Claims and the test that answers them").

Only the examples are paired, not corpus sentences: the pattern accumulator's memory must not grow
with the corpus (tests/patterns/test_scale.py), and the examples are in memory anyway. Corpus sentences count
in the choice of heads, which then rests partly on other inputs than the test.

The heads are chosen by their weight share, as the question asks ("the heads that look at delimiters
most"), on inputs that include the tested ones. That choice favours heads whose weight share came out
high by chance, which pushes the difference the way the no-op reading predicts; the shift is about
the standard error of a head's mean share (a few hundredths on 14 examples), far below the gap
Kobayashi et al. report, and the selection is stated with the result (`selection`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reportgen.stats import adjust, at_floor, sign_flip_p

NOOP_HEADS = 5  # heads tested: as many as a pattern finding names (findings.sentence.SHOWN_HEADS)
PERMUTATIONS = 9_999  # sign flips per test: the smallest p-value is 1 / 10,000, 0.0005 after Holm over 5 heads
SEED = 0
ALPHA = 0.05
TOKENS = "[CLS] and every [SEP], the model's special tokens (<s> and </s> for RoBERTa)"
SELECTION = ("the {heads} heads with the largest mean share of attention weight on [CLS] and [SEP] (over all "
             "{inputs} inputs)")
TEST = ("paired sign-flip permutation test over the examples of the difference contribution share - weight "
        "share, per head, {permutations} random flips, two-sided, Holm-corrected over the {heads} heads")


class DelimiterShares:
    """Per example, the [L, H] shares of weight and of contribution on [CLS]/[SEP] (2 x L x H numbers an
    example; corpus sentences are not kept, so memory does not grow with the corpus)."""

    def __init__(self):
        self.weight: list[np.ndarray] = []
        self.contribution: list[np.ndarray] = []

    def add(self, weight: np.ndarray, contribution: np.ndarray) -> None:
        self.weight.append(np.asarray(weight, dtype=np.float32))
        self.contribution.append(np.asarray(contribution, dtype=np.float32))

    def test(self, chosen_by: np.ndarray, inputs: int) -> dict[str, Any] | None:
        """The test on the heads with the largest `chosen_by` [L, H] (the mean weight share over `inputs`
        inputs); None without any example."""
        if not self.weight:
            return None
        return delimiter_test(np.stack(self.weight), np.stack(self.contribution), chosen_by, inputs)


def smallest_p(examples: int, permutations: int) -> float:
    """The smallest p-value a two-sided sign-flip test can be expected to give: its floor 1 / (permutations
    + 1), or 2 / 2**examples where that is larger, the share of all sign patterns as extreme as the most
    extreme one (itself and its mirror; a run of random flips may miss them and go lower by chance). With
    few examples no head can pass the correction, and the finding says so."""
    return max(1 / (permutations + 1), 2.0 ** (1 - examples))


def delimiter_test(weight: np.ndarray, contribution: np.ndarray, chosen_by: np.ndarray, inputs: int,
                   heads: int = NOOP_HEADS, permutations: int = PERMUTATIONS, seed: int = SEED,
                   alpha: float = ALPHA) -> dict[str, Any]:
    """The test for weight and contribution shares on [CLS]/[SEP], [examples, L, H] each, on the `heads`
    heads with the largest `chosen_by` [L, H]. Plain data, as report.DelimiterContribution.

    Each head links to the example where it passes on least of what it looks at (largest weight -
    contribution share): its view in contributions mode shows the gap most plainly there.
    """
    examples, _, per_layer = weight.shape
    chosen = np.argsort(-np.nan_to_num(np.asarray(chosen_by, dtype=np.float64), nan=-np.inf).reshape(-1),
                        kind="stable")[:heads]
    looked = weight.reshape(examples, -1)[:, chosen].astype(np.float64)
    passed = contribution.reshape(examples, -1)[:, chosen].astype(np.float64)
    difference = passed - looked
    p_values = sign_flip_p(difference, permutations, seed)
    adjusted = adjust(p_values, "holm")
    strongest = (-difference).argmax(0)
    rows = [{"layer": int(index // per_layer), "head": int(index % per_layer), "weight": looked[:, n].mean(),
             "contribution": passed[:, n].mean(), "difference": difference[:, n].mean(),
             "std": difference[:, n].std(), "p_value": p_values[n], "p_adjusted": adjusted[n],
             "at_floor": at_floor(float(p_values[n]), permutations), "significant": bool(adjusted[n] < alpha),
             "example": int(strongest[n])}
            for n, index in enumerate(chosen)]
    return {"tokens": TOKENS, "selection": SELECTION.format(heads=len(chosen), inputs=inputs),
            "selected_over": inputs, "examples": examples, "weight": looked.mean(), "contribution": passed.mean(),
            "heads": rows, "permutations": permutations, "smallest_p": smallest_p(examples, permutations),
            "seed": seed, "correction": "holm", "alpha": alpha,
            "test": TEST.format(permutations=f"{permutations:,}", heads=len(chosen))}
