"""The pattern statistics of a report: the encoder atlas, the decoder atlas and cross-attention heads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    pass
from reportgen.report.base import Grid, Number, Record


# -- pattern statistics (patterns.py) ---------------------------------------------------------------
class HeadStatistic(Record):
    """One statistic per head over the inputs: the spread and the strongest example with a page."""

    mean: Grid
    std: Grid  # population standard deviation over the inputs it applies to
    min: Grid
    max: Grid
    example: list[list[int]]  # 0-based index of the example where the head shows it most; -1: none
    example_value: Grid
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

    uniform: Number
    previous: Number
    next: Number


class TopHead(Record):
    layer: int
    head: int
    value: Number
    std: Number
    example: int
    example_value: Number


class SimilarityPoint(Record):
    layer: int
    head: int
    x: float
    y: float
    label: str


class HeadSimilarity(Record):
    """Clark et al. (2019) head distances, laid out in two dimensions."""

    measure: str
    layout: str
    index: str
    distance: list[list[float]]  # [layer * heads + head] squared
    points: list[SimilarityPoint]
    stress: float


class PatternCounts(Record):
    examples: int
    pairs: int
    tokens: int
    layers: int
    heads: int
    within_word_examples: int
    other_segment_examples: int
    within_word_queries: int
    other_segment_queries: int


class HeadContribution(Record):
    """One statistic on contribution shares per head, over the same inputs as its weight-based twin."""

    mean: Grid
    std: Grid  # population standard deviation over the inputs it applies to
    example: list[list[int]]  # 0-based index of the example (with a page) where the head shows it most; -1: none
    count: int


class DelimiterHead(Record):
    """One head of the no-op test: its mean shares of weight and of contribution on [CLS]/[SEP]."""

    layer: int
    head: int
    weight: Number  # mean over the examples of the share of its attention weight on [CLS] and [SEP]
    contribution: Number  # the same share of what it passes on
    difference: Number  # mean over the examples of contribution - weight (below 0: it passes on less than it looks at)
    std: Number  # of the per-example differences
    p_value: Number  # the sign-flip test's, before correction
    p_adjusted: Number  # Holm-corrected over the tested heads
    at_floor: bool  # the raw p-value is 1 / (permutations + 1): only a bound
    significant: bool
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
    permutations: int
    smallest_p: float  # the smallest p-value the test can be expected to give on this many examples, uncorrected
    seed: int
    correction: Literal["holm"]
    alpha: float
    test: str


class ContributionStatistics(Record):
    """The pattern statistics on what the heads pass on (Kobayashi et al. 2020): each row of attention
    weighted by ||f(x_j)|| and renormalised to shares, then every statistic taken as on the weights."""

    statistics: dict[str, HeadContribution]  # per statistic of PatternStatistics' grids
    delimiter: DelimiterContribution | None  # None without any example (only corpus sentences)


class PatternStatistics(Record):
    """Per-head pattern statistics (definitions in patterns.py and ../shared/REFERENCE.md)."""

    next_token: HeadStatistic
    previous_token: HeadStatistic
    next_token_clark: HeadStatistic  # Clark et al.'s: the sum over q of A[q, q+1] divided by n
    previous_token_clark: HeadStatistic
    cls: HeadStatistic
    sep: HeadStatistic
    cls_sep: HeadStatistic
    punctuation: HeadStatistic
    delimiter: HeadStatistic
    same_token: HeadStatistic
    other_segment: HeadStatistic
    within_word: HeadStatistic
    adjacent_same_word: HeadStatistic  # mean A[q, q±1] over the neighbour pairs inside one word
    adjacent_boundary: HeadStatistic  # the same over neighbour pairs a word boundary separates
    distant_within_word: HeadStatistic  # mass on the non-neighbouring pieces of the query's word
    boundary_selectivity: HeadStatistic  # adjacent_same_word - adjacent_boundary, per example
    next_token_argmax: HeadStatistic
    previous_token_argmax: HeadStatistic
    entropy: EntropyStatistic
    effective_share: HeadStatistic
    max_weight: HeadStatistic
    labels: list[list[str]]  # each head's dominant pattern, or "mixed"
    patterns: list[list[list[str]]]  # every pattern each head passes, strongest first
    label_counts: dict[str, int]
    label_stats: dict[str, str]  # label -> the statistic behind it
    top_heads: dict[str, list[TopHead]]
    similarity: HeadSimilarity | None
    counts: PatternCounts
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

    mean: Grid
    std: Grid
    min: Grid
    max: Grid
    example: list[list[int]]  # 0-based index of the example where the head shows it most; -1: none
    example_value: Grid
    count: int  # inputs it applies to
    queries: int  # queries the means are over
    null: Number  # the uniform causal head (1/(q+1) on each key 0..q) on the same queries


class InductionTest(Record):
    """The induction test's input (Olsson et al. 2022): [BOS] + r + r, r random tokens of the vocabulary."""

    n: int  # random tokens per copy
    sequences: int
    seed: int
    tokens: int  # 2n + 1 per sequence


class DecoderCounts(Record):
    examples: int  # the examples (each has a page)
    inputs: int  # the examples and the corpus sentences
    tokens: int
    layers: int
    heads: int


class DecoderStatistics(Record):
    """What a decoder's heads do (causal self-attention): the decoder patterns of ../shared/REFERENCE.md, each
    with its causal null. A statistic that does not apply to these inputs is absent (null), never 0."""

    previous_token: DecoderStatistic
    sink: DecoderStatistic
    causal_entropy: DecoderStatistic
    duplicate_token: DecoderStatistic | None = None  # null when no example repeats a token
    bos_delimiter: DecoderStatistic | None = None  # special tokens, '.' and ','; null when no input has one
    induction: DecoderStatistic | None = None  # null when the induction test could not run
    induction_test: InductionTest | None = None
    induction_missing: str | None = None  # why the induction test did not run, when it did not
    labels: list[list[str]]  # each head's dominant pattern, or "mixed"
    patterns: list[list[list[str]]]  # every pattern each head passes, strongest first
    label_counts: dict[str, int]
    label_stats: dict[str, str]  # label -> the statistic behind it
    thresholds: dict[str, float]  # label -> the threshold its statistic's mean must exceed
    top_heads: dict[str, list[TopHead]]
    counts: DecoderCounts


class CrossStatistics(Record):
    """An encoder-decoder's cross-attention heads (reportgen/patterns/cross.py): where each decoder token looks
    in the source. Each statistic's `null` is a uniform head over the source on the same queries: the special
    tokens' share of the source for `source_special`, ln S for `entropy`."""

    source_special: DecoderStatistic  # the share of attention on the source's special tokens (</s>...)
    entropy: DecoderStatistic  # the row entropy in nats
    threshold: float  # a head above it on source_special parks its attention there (the findings' test)
    top_heads: dict[str, list[TopHead]]
    counts: DecoderCounts
