"""The pattern statistics of a report: the encoder atlas, the decoder atlas and cross-attention heads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    pass
from reportgen.report.base import Grid, Number, Record


# -- pattern statistics (patterns.py) ---------------------------------------------------------------
class HeadStatistic(Record):
    """One statistic per head over the inputs: the spread and the strongest example with a page."""

    mean: Grid  # [layer][head] over the inputs it applies to; null where it applies to none
    std: Grid  # population standard deviation over the inputs it applies to
    min: Grid  # [layer][head] the lowest over those inputs
    max: Grid  # [layer][head] the highest over those inputs
    example: list[list[int]]  # 0-based index of the example where the head shows it most; -1: none
    example_value: Grid  # [layer][head] the statistic on `example`; null where it is -1
    count: int  # inputs the statistic applies to


class EntropyStatistic(HeadStatistic):
    uniform_baseline: float  # mean ln(n): the entropy of uniform attention


class PatternNull(Record):
    """What heads with a known simple pattern score on the same inputs, averaged as the real heads.

    uniform: 1/n on every token; previous: all weight on the previous token; next: all weight
    on the next token (the first / last token, which has none, puts its weight on itself).
    None where the statistic does not apply to any input. The uniform head's argmax shares
    follow numpy's tie rule (the first key), so they are about chance, not a real test.
    """

    uniform: Number  # the score of a head with 1/n on every token
    previous: Number  # of a head with all its weight on the previous token
    next: Number  # of a head with all its weight on the next token


class TopHead(Record):
    layer: int  # 0-based
    head: int  # 0-based, within the layer
    value: Number  # the head's mean of the statistic
    std: Number  # its spread over the inputs (the statistic's std)
    example: int  # 0-based index of the example where the head shows it most; -1: none
    example_value: Number  # the statistic on that example; null where example is -1


class SimilarityPoint(Record):
    layer: int  # 0-based
    head: int  # 0-based, within the layer
    x: float  # its place in the layout, in the distances' units (nats)
    y: float  # its second coordinate, likewise
    label: str  # the head's label (PatternStatistics.labels)


class HeadSimilarity(Record):
    """Clark et al. (2019) head distances, laid out in two dimensions."""

    measure: str  # the distance between two heads, in words (Jensen-Shannon divergence in nats)
    layout: str  # how the heads are laid out in two dimensions, in words (metric MDS)
    index: str  # which row of `distance` a head is: "layer * heads + head"
    distance: list[list[float]]  # [layer * heads + head] squared
    points: list[SimilarityPoint]  # each head's place in the layout, in `index` order
    stress: float  # Kruskal's stress-1 of the layout: 0 when its distances are `distance` exactly


class PatternCounts(Record):
    examples: int  # inputs the statistics are over: the examples, then the corpus sentences
    pairs: int  # of those, sentence pairs
    tokens: int  # tokens over all inputs
    layers: int  # the atlas's layers (an encoder-decoder's: its encoder's)
    heads: int  # heads per layer
    within_word_examples: int  # inputs with a word split into pieces, which within_word applies to
    other_segment_examples: int  # pairs with a word in both sentences, which other_segment applies to
    within_word_queries: int  # pieces of split words: the queries within_word is over, summed over the inputs
    other_segment_queries: int  # queries whose word occurs in the other sentence, summed over the inputs


class HeadContribution(Record):
    """One statistic on contribution shares per head, over the same inputs as its weight-based twin."""

    mean: Grid  # [layer][head] over the inputs it applies to; null where it applies to none
    std: Grid  # population standard deviation over the inputs it applies to
    example: list[list[int]]  # 0-based index of the example (with a page) where the head shows it most; -1: none
    count: int  # inputs it applies to


class DelimiterHead(Record):
    """One head of the no-op test: its mean shares of weight and of contribution on [CLS]/[SEP]."""

    layer: int  # 0-based
    head: int  # 0-based, within the layer
    weight: Number  # mean over the examples of the share of its attention weight on [CLS] and [SEP]
    contribution: Number  # the same share of what it passes on
    difference: Number  # mean over the examples of contribution - weight (below 0: it passes on less than it looks at)
    std: Number  # of the per-example differences
    p_value: Number  # the sign-flip test's, before correction
    p_adjusted: Number  # Holm-corrected over the tested heads
    at_floor: bool  # the raw p-value is 1 / (permutations + 1): only a bound
    significant: bool  # p_adjusted < alpha
    example: int  # the example where it passes on least of what it looks at


class DelimiterContribution(Record):
    """The "no-op" reading of attention to [CLS]/[SEP] (Clark et al. 2019) tested as Kobayashi et al. (2020)
    did: for the heads with most weight there, the share of weight vs the share of contribution, paired
    over the examples (reportgen/patterns/noop.py)."""

    tokens: str  # which keys count
    selection: str  # how the heads were chosen
    selected_over: int  # the inputs whose mean weight share chose the heads (examples and corpus sentences)
    examples: int  # the examples the test is paired over (corpus sentences are not kept)
    weight: Number  # mean over the heads and examples of the weight share
    contribution: Number  # the same for the contribution share
    heads: list[DelimiterHead]  # most weight first
    permutations: int  # random sign flips per head's test
    smallest_p: float  # the smallest p-value the test can be expected to give on this many examples, uncorrected
    seed: int  # of the random sign flips
    correction: Literal["holm"]  # Holm's, over the tested heads
    alpha: float  # significance level of the corrected p-values
    test: str  # the test in words


class ContributionStatistics(Record):
    """The pattern statistics on what the heads pass on (Kobayashi et al. 2020): each row of attention
    weighted by ||f(x_j)|| and renormalised to shares, then every statistic taken as on the weights."""

    statistics: dict[str, HeadContribution]  # per statistic of PatternStatistics' grids
    delimiter: DelimiterContribution | None  # None without any example (only corpus sentences)


class PatternStatistics(Record):
    """Per-head pattern statistics (definitions in patterns.py and ../shared/REFERENCE.md)."""

    # mean of A[q, q+1] over the queries that have a next token: a pure next-token head scores 1
    next_token: HeadStatistic
    previous_token: HeadStatistic  # mean of A[q, q-1] over the queries that have a previous token
    next_token_clark: HeadStatistic  # Clark et al.'s: the sum over q of A[q, q+1] divided by n
    previous_token_clark: HeadStatistic  # Clark et al.'s: the sum over q of A[q, q-1] divided by n
    cls: HeadStatistic  # mean over all queries of the weight on [CLS] (the first special token, or <s>)
    sep: HeadStatistic  # the same on [SEP] (every other special token, or </s>)
    cls_sep: HeadStatistic  # the same on [CLS] and [SEP]
    punctuation: HeadStatistic  # the same on the keys '.' and ','
    delimiter: HeadStatistic  # the same on [CLS], [SEP], '.' and ',': the delimiter label's statistic
    # weight on the token itself and on its word's other occurrences in its sentence, over the word queries (not
    # special tokens, '.' or ',')
    same_token: HeadStatistic
    # weight on the occurrences of the query's word in the other sentence of a pair, over the queries whose word
    # occurs there
    other_segment: HeadStatistic
    within_word: HeadStatistic  # weight on the other pieces of the query's word, over the pieces of split words
    adjacent_same_word: HeadStatistic  # mean A[q, q±1] over the neighbour pairs inside one word
    adjacent_boundary: HeadStatistic  # the same over neighbour pairs a word boundary separates
    distant_within_word: HeadStatistic  # mass on the non-neighbouring pieces of the query's word
    boundary_selectivity: HeadStatistic  # adjacent_same_word - adjacent_boundary, per example
    # share of the queries with a next token whose largest weight is on it (Voita et al.)
    next_token_argmax: HeadStatistic
    previous_token_argmax: HeadStatistic  # the same for the previous token
    entropy: EntropyStatistic  # mean row entropy in nats, rows smoothed 0.9999 A + 0.0001/n (Clark et al.)
    # exp(entropy) / n: the share of tokens uniform attention would cover to be as spread (1: uniform)
    effective_share: HeadStatistic
    max_weight: HeadStatistic  # mean over queries of the largest weight
    labels: list[list[str]]  # each head's dominant pattern, or "mixed"
    patterns: list[list[list[str]]]  # every pattern each head passes, strongest first
    label_counts: dict[str, int]  # label -> heads with it; every label, "mixed" last
    label_stats: dict[str, str]  # label -> the statistic behind it
    top_heads: dict[str, list[TopHead]]  # statistic -> its top_k heads (config patterns.top_k) by mean, highest first
    similarity: HeadSimilarity | None  # null when config patterns.similarity is off
    counts: PatternCounts  # what the statistics are over
    nulls: dict[str, PatternNull]  # per statistic of the grids above
    conventions: dict[str, str]  # short sentences: denominator, averaging, entropy_smoothing, punctuation, ...
    settings: dict[str, Any]  # the `patterns:` settings as used (corpus paths relative to the config)
    # The same statistics on contribution shares; None where the model's value norms are unknown
    # (a layout whose heads reportgen cannot locate, or attention that did not come from a model run).
    contribution: ContributionStatistics | None = None


# -- decoder heads (patterns/decoder_atlas.py) ------------------------------------------------------
class DecoderStatistic(Record):
    """One decoder statistic per head (reportgen/patterns/decoder.py), with the uniform causal head's score.

    `mean` pools every qualifying query of every input (a long input counts by its queries); `std` is the
    population spread of the same values, the inputs' own scores weighted by their queries; `min` and `max`
    are the lowest and highest of those scores. For induction the inputs are the test's random sequences,
    which have no page, so `example` is -1 throughout.
    """

    mean: Grid  # [layer][head] pooled over the qualifying queries; null where none qualifies
    std: Grid  # [layer][head] the inputs' scores' population spread, each weighted by its queries
    min: Grid  # [layer][head] the lowest score of an input it applies to
    max: Grid  # [layer][head] the highest
    example: list[list[int]]  # 0-based index of the example where the head shows it most; -1: none
    example_value: Grid  # [layer][head] the statistic on `example`; null where it is -1
    count: int  # inputs it applies to
    queries: int  # queries the means are over
    null: Number  # the uniform causal head (1/(q+1) on each key 0..q) on the same queries


class InductionTest(Record):
    """The induction test's input (Olsson et al. 2022): [BOS] + r + r, r random tokens of the vocabulary."""

    n: int  # random tokens per copy
    sequences: int  # random sequences, each a forward pass
    seed: int  # of the random tokens
    tokens: int  # 2n + 1 per sequence


class DecoderCounts(Record):
    examples: int  # the examples (each has a page)
    inputs: int  # the examples and the corpus sentences
    tokens: int  # tokens over all inputs; for cross-attention, the decoder tokens (its queries)
    layers: int  # layers of the heads described (a decoder's; an encoder-decoder's decoder or cross-attention layers)
    heads: int  # heads per layer


class DecoderStatistics(Record):
    """What a decoder's heads do (causal self-attention): the decoder patterns of ../shared/REFERENCE.md, each
    with its causal null. A statistic that does not apply to these inputs is absent (null), never 0."""

    previous_token: DecoderStatistic  # mean over q >= 1 of A[q, q-1]
    sink: DecoderStatistic  # mean over q >= 1 of A[q, 0], the weight on the first token (Xiao et al. 2023)
    # mean over q >= 1 of the row entropy in nats, unsmoothed; its `null` is the mean of ln(q+1)
    causal_entropy: DecoderStatistic
    duplicate_token: DecoderStatistic | None = None  # null when no example repeats a token
    bos_delimiter: DecoderStatistic | None = None  # special tokens, '.' and ','; null when no input has one
    induction: DecoderStatistic | None = None  # null when the induction test could not run
    induction_test: InductionTest | None = None  # null when the test did not run (induction_missing says why)
    induction_missing: str | None = None  # why the induction test did not run, when it did not
    labels: list[list[str]]  # each head's dominant pattern, or "mixed"
    patterns: list[list[list[str]]]  # every pattern each head passes, strongest first
    label_counts: dict[str, int]  # label -> heads with it; every label, "mixed" last
    label_stats: dict[str, str]  # label -> the statistic behind it
    thresholds: dict[str, float]  # label -> the threshold its statistic's mean must exceed
    top_heads: dict[str, list[TopHead]]  # statistic -> its top_k heads (config patterns.top_k) by mean, highest first
    counts: DecoderCounts  # what the statistics are over


class CrossStatistics(Record):
    """An encoder-decoder's cross-attention heads (reportgen/patterns/cross.py): where each decoder token looks
    in the source. Each statistic's `null` is a uniform head over the source on the same queries: the special
    tokens' share of the source for `source_special`, ln S for `entropy`."""

    source_special: DecoderStatistic  # the share of attention on the source's special tokens (</s>...)
    entropy: DecoderStatistic  # the row entropy in nats
    threshold: float  # a head above it on source_special parks its attention there (the findings' test)
    top_heads: dict[str, list[TopHead]]  # statistic -> its top_k heads (config patterns.top_k) by mean, highest first
    counts: DecoderCounts  # the examples, their decoder tokens (the queries), the cross-attention layers and heads
