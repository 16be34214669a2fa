"""The conventions behind the pattern statistics, as short sentences the pages print where they apply.

Written from the settings in use, so a page never states a threshold or a unit the build did not apply.
"""

from __future__ import annotations

from reportgen.config import PatternSettings

_SEGMENTATION = {
    "none": "Words are the tokenizer's words (a word split into pieces, e.g. straw ##berries, is one word).",
    "spaces": "Words are the input's space-separated words (`patterns.segmentation: spaces`), so a "
              "character-level model's characters are grouped into words.",
    "jieba": "Words come from jieba's segmentation of the text (`patterns.segmentation: jieba`), so a "
             "character-level model's characters are grouped into words.",
}


def conventions(settings: PatternSettings) -> dict[str, str]:
    """The conventions behind the numbers, as plain sentences a page can print where they apply."""
    thresholds = settings.thresholds
    unit = ("between words (`patterns.word_level: true`): attention to a word is the sum over its pieces, "
            "attention from a word the mean over its pieces (Clark et al. 2019); the within-word and "
            "boundary statistics stay between pieces" if settings.word_level else
            "between tokens (word pieces)")
    return {
        "denominator": "Next and previous token: the mean of A[q, q+1] (A[q, q-1]) over the n-1 queries that "
                       "have such a token, so a pure next-token head scores 1 at any length. Clark et al. "
                       "(2019) divide by all n tokens; their figure (ours times (n-1)/n) is given alongside.",
        "averaging": "Each statistic is computed per input, then averaged over the inputs it applies to; "
                     "the spread (±) is the standard deviation over those inputs.",
        "entropy_smoothing": "Entropy is in nats, of each row smoothed as 0.9999 A + 0.0001/n (Clark et al. "
                             "2019), averaged over queries; uniform attention scores ln n.",
        "broad": f"A head is broad when the mean over inputs of exp(entropy)/n is at least "
                 f"{thresholds.broad_share}: its attention is as spread as uniform attention over that "
                 "share of the tokens.",
        "positional": f"Two tests of a positional head: Clark et al.'s mean weight above "
                      f"{thresholds.positional}, and Voita et al.'s argmax test (the largest weight on that "
                      f"token for at least {thresholds.positional_argmax:.0%} of the queries).",
        "punctuation": "Punctuation is only '.' and ',' (Clark et al. 2019). It counts with [CLS] and [SEP] as a "
                       "delimiter and takes no part in the word patterns (same word, same word in the other "
                       "sentence).",
        "other_sentence": "Same word in the other sentence: words are compared lower-cased and rebuilt from their "
                          "pieces; [CLS], [SEP] and punctuation are left out, as queries and as keys; the mean "
                          "is over the queries whose word occurs in the other sentence.",
        "word_level": f"The statistics are computed {unit}.",
        "segmentation": _SEGMENTATION[settings.segmentation],
        "within_word": f"A head links the pieces of a word only when it puts more than {thresholds.within_word} "
                       f"on the other pieces of a piece's word and its boundary selectivity is above "
                       f"{thresholds.boundary_selectivity}: the mean weight on a neighbour in the same word minus "
                       "that on a neighbour across a word boundary, which is 0 for any purely positional head.",
        "nulls": "Nulls: what a uniform head (1/n on every token), a pure previous-token head and a pure "
                 "next-token head (the first / last token on itself) score on the same inputs, averaged "
                 "in the same way.",
    }
