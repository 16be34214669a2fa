"""The report: everything a build measured, as typed records. `report.json` is their serialisation.

This module is the contract between the stages. The analyses return these records, the site
stage renders them (templates and charts read nothing else, apart from the view payloads of
`ExampleViews`), and readers of `report.json` can check it against `reportgen schema --report`
(the JSON Schema of `Report`). Grids are [layer][head]; a number that could not be measured
(a pattern absent from every input, an undefined metric) is null.

Bump SCHEMA_VERSION when a key changes meaning or goes away.

`Report.load(path)` reads a published report.json back into these records (its schema version
checked first), and `Report.heads_frame()` lays the per-head numbers out as a pandas table, one
row per head (pandas is the optional extra `reportgen[pandas]`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from reportgen.errors import DataError, ReportgenError

if TYPE_CHECKING:
    import pandas

SCHEMA_VERSION = 3  # 3: `decoder` (a decoder's statistics), and `statistics` null for a decoder

Number = float | None
Grid = list[list[Number]]  # [layer][head]


class Record(BaseModel):
    """A part of the report. Unknown keys are refused, so the schema says all there is.

    Records also read like the JSON they serialise to (`report["statistics"]["entropy"]`), the
    way templates and readers of report.json address them.
    """

    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)


# -- the model and the examples ------------------------------------------------------------------
class ModelSummary(Record):
    """The model as the site names it; its local path is left out (it says nothing to a reader)."""

    name: str
    model_type: str
    layers: int
    heads: int
    hidden: int
    parameters: int
    fingerprint: str  # sha256 over the model's files


class ExampleHead(Record):
    """A head that shows a pattern on one example, and the token pair that shows it most.

    query/key: the (q, k) cell of the pattern with the largest weight A[q, k] for this head on
    this example (e.g. straw -> ##berries for within_word); both None for previous/next token,
    which are spread over every query. For delimiter only `key` is set: the [CLS], [SEP], '.'
    or ',' token with the largest mean weight over the queries (the pattern is spread over them).
    """

    layer: int
    head: int
    value: float  # the pattern's statistic for this head on this example
    query: int | None  # token index on the example page
    key: int | None
    query_token: str | None
    key_token: str | None
    weight: Number = None  # A[query, key]; for delimiter the mean weight on `key`


class ExamplePattern(Record):
    """One of the six seed patterns on one example: the heads that show it most there."""

    pattern: Literal["previous_token", "next_token", "same_token", "other_segment", "within_word", "delimiter"]
    threshold: float  # the label threshold of the pattern
    weak: bool  # no head is above the threshold on this example (or the pattern does not apply to it)
    # strongest first, at most 3; empty where the pattern does not apply to the example (no split word, a
    # single sentence) or, for within_word, where no head is boundary-selective on it (weak is then True)
    heads: list[ExampleHead]


class Example(Record):
    id: int  # 1, 2, ...: its page is example-{id}.html
    name: str | None
    text: str
    pair: str | None
    n_tokens: int  # an encoder-decoder's: the source's
    truncated: bool
    page: str
    qk_page: str | None  # only examples up to views.QK_MAX_TOKENS tokens have a query/key page
    entropy: Grid  # mean attention entropy per head on this example, in nats (Clark et al. 2019)
    # the six seed patterns, in the order of reportgen.patterns.per_example.SEED_PATTERNS
    patterns: list[ExamplePattern]
    # Each head's label on this example alone: patterns.label_heads on its own statistics (the site-wide
    # `statistics.labels` use their means over the inputs), "mixed" where no pattern passes; the example's head map.
    labels: list[list[str]]
    target: str | None = None  # an encoder-decoder's target, which its decoder reads (teacher-forced)
    target_tokens: int | None = None  # the decoder's input tokens: the start token, then the target shifted right


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

    `mean` pools every qualifying query of every input (a long input counts by its queries); `std`, `min`
    and `max` are over the inputs' own scores. For induction the inputs are the test's random sequences,
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


# -- head ablation (ablation.py) --------------------------------------------------------------------
class AblationTask(Record):
    type: Literal["similarity", "classification", "mlm", "causal_lm", "seq2seq"]
    data: str  # "builtin" or the data file, relative to the config file
    examples: int
    distinct_texts: int
    metric: str  # the primary metric: every test and finding is about it
    metrics: list[str]
    higher_is_better: dict[str, bool]  # per metric
    method: Literal["zero", "uniform"]
    method_note: str
    undefined: str | None  # why the metric is undefined on this data; None when it is defined


class Baseline(Record):
    metric: str
    value: Number
    metrics: dict[str, Number]
    ci: dict[str, list[Number]]  # per metric, [low, high]
    confidence: float
    bootstrap_samples: int
    ci_method: str


class MaskTests(Record):
    """Masks tested one by one against the unmasked model: the test and its correction."""

    test: str
    correction: Literal["holm", "bonferroni"]
    alpha: float
    permutations: int  # 0 when no test ran (undefined metric)
    baseline: Number


class HeadTests(MaskTests):
    """Each head masked alone; [layer][head]."""

    value: Grid
    delta: Grid
    relative: Grid
    p_value: Grid
    p_adjusted: Grid
    significant: list[list[bool]]


class LayerTests(MaskTests):
    """Every head of one layer masked, for each layer; [layer]."""

    layers: list[int]
    value: list[Number]
    delta: list[Number]
    relative: list[Number]
    p_value: list[Number]
    p_adjusted: list[Number]
    significant: list[bool]


class Sweep(Record):
    """The metric per fraction of masked heads ([fraction][seed]) and its summaries per fraction."""

    values: Grid
    relative: Grid
    mean: list[Number]
    std: list[Number]
    min: list[Number]
    max: list[Number]
    relative_mean: list[Number]
    relative_std: list[Number]


class NonInferiority(Record):
    """Is a change no loss? The paired bootstrap CI of the relative change at each fraction against a
    margin (REFERENCE, "Claims and the test that answers them": inside the baseline's CI is no test)."""

    margin: float  # relative to the unmasked model's metric: a change above -margin is no loss
    confidence: float
    bootstrap_samples: int
    change_ci: list[list[Number]]  # [fraction][low, high] of the relative change, pairs (seeds/orders) pooled
    worst: list[int | None]  # [fraction] the pair (index) whose CI reaches lowest
    worst_ci: list[list[Number]]  # [fraction][low, high] of that pair
    non_inferior: list[bool]  # [fraction] the pooled CI lies above -margin
    up_to: float  # the largest fraction with every fraction up to it non-inferior (fixed-sequence); 0 if none
    test: str


class PairedComparison(Record):
    """Two conditions compared at each fraction by a paired permutation test over examples (pairs of
    conditions pooled, one swap per example), corrected over the fractions."""

    first: str
    second: str
    fractions: list[float]  # the fractions tested
    difference: list[Number]  # [fraction] mean over pairs of metric(second) - metric(first)
    p_value: list[Number]
    p_adjusted: list[Number]
    at_floor: list[bool]  # the raw p-value is 1 / (permutations + 1): only a bound
    significant: list[bool]
    permutations: int
    correction: Literal["holm", "bonferroni"]
    alpha: float
    test: str


class RandomFraction(Sweep):
    fractions: list[float]
    n_masked: list[int]
    seeds: list[int]
    baseline: Number
    non_inferiority: NonInferiority | None  # None when the metric is undefined


class LayerHalves(Record):
    fractions: list[float]  # of all heads, drawn only from one half
    n_masked: list[int]
    seeds: list[int]
    lower_layers: list[int]
    upper_layers: list[int]
    baseline: Number
    note: str
    lower: Sweep
    upper: Sweep
    same_mask: list[bool]  # [fraction] every seed drew the same mask (e.g. the whole half): no spread over seeds
    comparison: PairedComparison | None  # lower-masked vs upper-masked outputs; None when the metric is undefined


class Pruning(Record):
    fractions: list[float]
    n_pruned: list[int]
    value: list[Number]
    relative: list[Number]
    order: list[list[int]]  # [layer, head] in the order pruned
    baseline: Number


class RandomOrder(Record):
    orders: int
    source: str  # how the orders were drawn
    values: Grid  # [order][fraction]
    relative: Grid  # [order][fraction], change relative to the unmasked model
    mean: list[Number]
    std: list[Number]
    relative_mean: list[Number]


class AreaRank(Record):
    """The importance order's area under its pruning curve ranked among the random orders' areas:
    the rank is a one-sided Monte Carlo p-value (1 + orders at least as good) / (1 + orders)."""

    importance: Number  # mean relative change over the fractions (area under the curve / its width)
    random: list[Number]  # [order]
    better_than: int  # random orders with a worse area
    p_value: Number
    floor: float  # 1 / (orders + 1): the smallest p-value this many orders can give


class Calibration(Record):
    """The linear map a * cosine + b fitted once on the unmasked model (least squares against the grade
    rescaled to [0, 1]), so that the importance loss measures ranking errors rather than scale."""

    slope: float
    intercept: float
    error_removed: float  # share of the squared error the fit removes


class Importance(Record):
    """Michel, Levy and Neubig (2019) head importance and the pruning curves it gives."""

    importance: Grid
    normalization: str
    variant: str
    loss: str
    recompute: bool
    calibration: Calibration | None  # similarity task only
    pruning: Pruning
    random_order: RandomOrder
    area: AreaRank | None  # None when the metric is undefined
    comparison: PairedComparison | None  # importance order vs random orders per fraction
    non_inferiority: NonInferiority | None  # the importance order against the margin


class HeadPair(Record):
    """Two heads masked together, and their interaction: the pair's change minus the sum of the two
    single changes, I = (m(ab) - m0) - (m(a) - m0) - (m(b) - m0), on the primary metric."""

    first: list[int]  # [layer, head]; the head with the larger |single change| of the two
    second: list[int]
    value: Number  # the metric with both masked
    change: Number  # m(ab) - m0
    relative: Number  # (m(ab) - m0) / |m0|
    interaction: Number  # I, in the metric's units
    interaction_relative: Number  # I / |m0|
    ci: list[Number]  # [low, high] 95% paired bootstrap CI of I (metric units)
    p_value: Number  # two-sided p-value of I = 0 from the bootstrap SE; null when the metric is undefined
    p_adjusted: Number
    significant: bool


class HeadPairs(Record):
    """The head_pairs experiment: pairs of heads masked together, each pair's interaction with its test."""

    selection: str  # how the pairs were chosen, in words
    top_k: int | None  # the k of top-k by |single change|; null when every pair was masked
    heads: list[list[int]]  # the chosen heads [layer, head], largest |single change| first
    single_change: list[Number]  # [chosen head] m(a) - m0
    pairs: list[HeadPair]
    tested: int  # pairs whose interaction was tested (defined), the family the correction is over
    significant_count: int
    bootstrap_samples: int  # resamples behind the CIs and the standard errors of the p-values
    confidence: float
    test: str
    correction: Literal["holm", "bonferroni"]
    alpha: float
    baseline: Number


class Ablation(Record):
    """The head-ablation experiments on the task; an experiment that was switched off is null."""

    task: AblationTask
    layers: int
    heads: int
    experiments: list[str]  # the ones that ran
    baseline: Baseline | None = None
    single_heads: HeadTests | None = None
    whole_layers: LayerTests | None = None
    random_fraction: RandomFraction | None = None
    layer_halves: LayerHalves | None = None
    importance: Importance | None = None
    head_pairs: HeadPairs | None = None  # only when ablation.experiments.head_pairs is on
    # an encoder-decoder's group of each flat layer ("encoder", "decoder" self-attention, "cross"-attention:
    # reportgen.model.head_sites); None for every other model, whose flat layer is its depth
    groups: list[str] | None = None


# -- comparison, findings, manifest -----------------------------------------------------------------
class Comparison(Record):
    """The second model (config `compare:`) through the same analyses."""

    model: ModelSummary
    same_shape: bool  # the same layers x heads, so differences per head are shown
    statistics: PatternStatistics
    ablation: Ablation | None
    model_files: dict[str, str]


class Span(Record):
    """A piece of a finding's sentence: plain text, optionally emphasised or a link into the site."""

    text: str
    style: Literal["strong", "code"] | None = None
    link: str | None = None  # a page of the site with its anchor, e.g. "example-1.html#view=head&layer=2&head=0"


class Link(Record):
    label: str
    href: str  # a page of the site, with its anchor


class Finding(Record):
    """One statement about the model, with what it rests on.

    `sentence` is the statement as plain text; `spans` are the same words with their emphasis
    and links, as the findings page shows them. `numbers` are the values the sentence quotes.
    """

    id: str  # stable: the anchor finding-{id} on the findings page
    group: Literal["patterns", "ablation"]
    supported: bool  # False: the data do not support the statement, and the sentence says so
    sentence: str
    spans: list[Span]
    links: list[Link]
    numbers: dict[str, Any]
    test: str | None = None  # how the claim was tested, when a test answers it
    p_value: Number = None  # the corrected p-value of the claim's test, when it has one
    ci: list[Number] | None = None  # the 95% confidence interval the claim quotes, when it has one


class ClaimCheck(Record):
    """A published study's claim (config `claims:`, e.g. seed 004's) beside what this model shows.

    The table on the findings page prints these: the study's claim and figure, this model's figure
    (`number`, with its CI or p-value), the test that answers the claim here, and the verdict with
    its reason. `value`, `ci` and `p_value` are the figures `number` quotes, copied from the ablation
    and pattern records (reportgen/findings/claims.py), so the table and report.json agree.
    """

    id: str  # stable: the anchor claim-{id} on the findings page
    study: Literal["seed004"]
    claim: str  # the study's claim, in words
    study_number: str  # the study's own figure for it
    number: str  # this model's figure with its CI or p-value; "\u2013" when not measured
    test: str  # the test that answers the claim on this model
    verdict: Literal["supported", "not supported here", "contradicted", "not measured"]
    why: str  # the reason for the verdict; for "not measured", what is missing or switched off
    note: str | None = None  # how the claim maps onto this model (metric, layers by relative depth, words)
    metric: str | None = None  # the primary metric the change is of (ablation claims)
    value: Number = None
    ci: list[Number] | None = None
    p_value: Number = None  # corrected, when the test has one
    numbers: dict[str, Any]
    links: list[Link]  # the findings and charts behind it


class Headline(Record):
    """The few numbers at the top of the findings page."""

    heads: int
    labels: dict[str, int]
    baseline: Finding | None
    significant_heads: int | None


class ExperimentCost(Record):
    """What one ablation experiment cost this build."""

    masks: int  # masks it evaluated, each one pass over the task's data
    computed: int | None  # of those, evaluated by this build (the rest came from the cache); None in a --reproducible
    seconds: float | None  # None in a --reproducible build, which is the same whatever the cache held


class Manifest(Record):
    """What a reader needs to reproduce the run."""

    config: dict[str, Any]  # the config as used, paths relative to the config file
    model_files: dict[str, str]  # file -> sha256
    data_files: dict[str, str]
    versions: dict[str, str]
    device: str
    seeds: dict[str, list[int] | int | None]  # per random process; None where it did not run
    seconds: dict[str, float] | None  # per stage; None in a --reproducible build
    # per ablation experiment that ran: its masks and seconds, so a user sees what to switch off
    experiments: dict[str, ExperimentCost] | None = None


class ExperimentState(Record):
    """Where one ablation experiment of a build still running stands."""

    name: str
    state: Literal["done", "running", "waiting"]
    masks_done: int
    masks: int | None  # its masks in all; None until it starts (the engine counts them then)


class BuildProgress(Record):
    """A site written before its build finished: the pattern pages are final, the ablation is not. The
    experiments not run yet are null in `ablation`; `seconds_left` is the time still needed at the
    measured seconds per mask evaluated so far (None before the first mask was timed)."""

    experiments: list[ExperimentState]
    seconds_per_mask: float | None
    seconds_left: float | None
    stages_left: list[str]  # what runs after the ablation ("comparison"), if anything


class Report(Record):
    """What `reportgen build` measured: every number on the site, and nothing else."""

    schema_version: Literal[3] = SCHEMA_VERSION
    title: str
    site_url: str | None
    built: str | None  # UTC time of the build; None in a --reproducible build
    versions: dict[str, str]
    model: ModelSummary
    layers: int  # an encoder-decoder's: every attention layer, its groups' in `groups` order
    heads: int
    examples: list[Example]
    # a decoder's heads see only the keys up to the query; an encoder-decoder has three groups of heads
    architecture: Literal["encoder", "decoder", "encoder-decoder"] = "encoder"
    # an encoder-decoder's group of each of the `layers`: "encoder" (self-attention over the source), "decoder"
    # (causal self-attention over the decoder's inputs), "cross" (the decoder's inputs over the source); null otherwise
    groups: list[Literal["encoder", "decoder", "cross"]] | None = None
    statistics: PatternStatistics | None  # the encoder atlas (an encoder-decoder's: its encoder's); null for a decoder
    decoder: DecoderStatistics | None = None  # the decoder atlas; null for an encoder
    cross: CrossStatistics | None = None  # an encoder-decoder's cross-attention heads; null for other models
    ablation: Ablation | None
    comparison: Comparison | None = None
    findings: list[Finding]
    claims: list[ClaimCheck] | None = None  # config `claims:`; null when none is set
    headline: Headline
    warnings: list[str]
    manifest: Manifest
    progress: BuildProgress | None = None  # a site written while the build still runs; null once it finished

    @property
    def atlas(self) -> PatternStatistics | DecoderStatistics:
        """The heads' pattern statistics whatever the architecture: the encoder atlas (an encoder-decoder's
        encoder's), or a decoder's."""
        return self.statistics if self.statistics is not None else self.decoder

    def to_json(self) -> str:
        """report.json: sorted keys, no NaN (a number that is not one is null), one key per line and each list of
        plain values (a head's numbers, a test's resamples) on its key's line: as easy to read and diff as
        indented JSON, and a third lighter (the default site's report, 505 KB indented, is 371 KB so)."""
        return _readable_json(self.model_dump(mode="json"), "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """A published report.json (or a site directory holding one) read back into the records.

        Its `schema_version` is checked before anything else is read: a report of another version
        (an older or newer reportgen wrote it), a file that is not a reportgen report, not UTF-8 or
        not JSON, or a missing file raises a `DataError` (exit code 4) whose one line names the file
        and what is wrong.
        """
        path = Path(path)
        if path.is_dir() and (path / "report.json").is_file():
            path = path / "report.json"
        data = _read_json(path)
        if not isinstance(data, dict) or "schema_version" not in data:
            raise DataError(f"{path}: not a reportgen report (no schema_version at the top level)")
        version = data["schema_version"]
        if version != SCHEMA_VERSION:
            if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
                advice = "upgrade reportgen to read it"
            else:
                advice = "rebuild the site with this reportgen"
            raise DataError(f"{path}: schema version {_shown(version)}, this reportgen reads {SCHEMA_VERSION}; "
                            f"{advice}")
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            more = err.error_count() - 1
            raise DataError(f"{path}: not a valid report of schema version {SCHEMA_VERSION}: key '{where}': "
                            f"{first['msg']}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
                            ) from None

    def heads_frame(self) -> pandas.DataFrame:
        """One row per head of the model, in layer then head order: the per-head numbers of the report.

        Columns:

        - `layer`, `head`: 0-based, as on the site.
        - `label`: the head's main pattern, the key of `statistics.labels` ("previous_token", ...,
          "mixed" where no pattern passes its threshold): what colours the head map.
        - for an encoder-decoder, `group` ("encoder", "decoder", "cross") and `group_layer` (the layer within
          its group): its encoder's rows carry the encoder statistics, its decoder self-attention's the
          decoder statistics, its cross-attention's `cross_source_special` and `cross_entropy` (and their nulls,
          a uniform head over the source), NaN elsewhere, and no label on the cross-attention rows.
        - for a decoder, instead of the encoder statistics below: each statistic of `decoder`
          (`previous_token`, `sink`, `causal_entropy`, `duplicate_token`, `induction`) and `<statistic>_null`,
          the uniform causal head's score on the same tokens; NaN for a statistic that was not measured.
        - for each pattern statistic of `statistics` (`previous_token`, `next_token`, `cls_sep`,
          `same_token`, `within_word`, `entropy`, ...): `<statistic>`, the head's mean over the inputs,
          and `<statistic>_null`, what a uniform head scores on the same inputs (`statistics.nulls`;
          the same in every row, NaN where it does not apply).
        - with single-head ablation (`ablation.single_heads`): `ablation_value` (the task metric with
          the head masked), `ablation_delta` (its change from the unmasked model, in the metric's units),
          `ablation_relative` (the change relative to the unmasked metric), `ablation_p_value`,
          `ablation_p_adjusted` (corrected over the heads) and `ablation_significant`; with the
          importance experiment, `importance` (Michel et al.). Absent when the report has none.

        A number the report has as null is NaN. Needs pandas (`pip install "reportgen[pandas]"`).
        """
        try:
            import pandas
        except ImportError:
            raise MissingExtra('Report.heads_frame needs pandas: pip install "reportgen[pandas]"') from None
        cells = [(layer, head) for layer in range(self.layers) for head in range(self.heads)]
        where = [self._group_layer(layer) for layer, _ in cells]  # (group, layer within it) of each row
        atlases = {"encoder": self.statistics, "decoder": self.decoder}
        columns: dict[str, list[Any]] = {"layer": [layer for layer, _ in cells], "head": [head for _, head in cells]}
        if self.groups:
            columns["group"] = [group for group, _ in where]
            columns["group_layer"] = [within for _, within in where]
        columns["label"] = [atlases[group].labels[within][head] if atlases.get(group) is not None else None
                            for (group, within), (_, head) in zip(where, cells, strict=True)]

        def column(name: str, atlas: str, statistic, null: Number) -> None:
            """One statistic's values on its atlas's rows, NaN on the other groups' rows."""
            ours = [(within, head) if group == atlas else None
                    for (group, within), (_, head) in zip(where, cells, strict=True)]
            columns[name] = [_number(statistic.mean[c[0]][c[1]]) if statistic and c else float("nan") for c in ours]
            columns[f"{name}_null"] = [_number(null) if c else float("nan") for c in ours]
        for name in decoder_statistics() if self.decoder is not None else ():
            statistic = getattr(self.decoder, name)
            column(name, "decoder", statistic, statistic.null if statistic else None)
        for name in head_statistics() if self.statistics is not None else ():
            null = self.statistics.nulls.get(name)
            column(name, "encoder", getattr(self.statistics, name), null.uniform if null is not None else None)
        for name in ("source_special", "entropy") if self.cross is not None else ():
            statistic = getattr(self.cross, name)
            column(f"cross_{name}", "cross", statistic, statistic.null)
        single = self.ablation.single_heads if self.ablation is not None else None
        if single is not None:
            for key in ("value", "delta", "relative", "p_value", "p_adjusted"):
                columns[f"ablation_{key}"] = _per_head(getattr(single, key), cells)
            columns["ablation_significant"] = [bool(single.significant[layer][head]) for layer, head in cells]
        importance = self.ablation.importance if self.ablation is not None else None
        if importance is not None:
            columns["importance"] = _per_head(importance.importance, cells)
        return pandas.DataFrame(columns)


    def _group_layer(self, layer: int) -> tuple[str, int]:
        """(the atlas a flat layer's heads are in, its layer there): an encoder-decoder's group and layer
        within it; any other model's own atlas ("encoder", or "decoder" for a decoder) and the layer itself."""
        if self.groups:
            return group_layer(layer, self.groups)
        return ("decoder" if self.architecture == "decoder" else "encoder"), layer


class MissingExtra(ReportgenError, ImportError):
    """An optional dependency is not installed; the message says which extra of reportgen brings it."""


def head_statistics() -> list[str]:
    """The per-head pattern statistics of `PatternStatistics`, in its order (the columns of `heads_frame`)."""
    return [name for name, info in PatternStatistics.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, HeadStatistic)]


def decoder_statistics() -> list[str]:
    """The per-head statistics of `DecoderStatistics`, in its order (a decoder's columns of `heads_frame`)."""
    return [name for name, info in DecoderStatistics.model_fields.items()
            if DecoderStatistic in (info.annotation, *getattr(info.annotation, "__args__", ()))]


def _per_head(grid: list[list[Number]], cells: list[tuple[int, int]]) -> list[float]:
    return [_number(grid[layer][head]) for layer, head in cells]


def _number(value: Number) -> float:
    return float("nan") if value is None else float(value)


def _shown(value: Any) -> str:
    """A value from a file as a one-line message may quote it."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _read_json(path: Path) -> Any:
    """The JSON value in `path`; a DataError naming the file when it cannot be read as JSON."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: report file not found; build the site first (reportgen build)") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    except ValueError:  # a NUL character in the name
        raise DataError(f"{str(path)!r}: the report file name holds a NUL character") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{path}: is a directory without a report.json, not a report file")
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever
        raise DataError(f"{path}: is not a regular file; a report is the report.json a build writes")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}), "
                        "so not a reportgen report.json") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}), "
                        "so not a reportgen report.json") from None
    except (RecursionError, ValueError) as err:  # nesting too deep, a number of thousands of digits
        raise DataError(f"{path}: cannot be read as JSON ({type(err).__name__}), so not a reportgen report.json"
                        ) from None



def _readable_json(value: object, newline: str) -> str:
    """`value` as JSON, objects and lists of lists or objects indented one space per level, lists of plain values
    (numbers, strings, null, booleans) on one line."""
    inner = newline + " "
    if isinstance(value, dict) and value:
        fields = (f"{json.dumps(key)}: {_readable_json(value[key], inner)}" for key in sorted(value))
        return "{" + inner + ("," + inner).join(fields) + newline + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return "[" + inner + ("," + inner).join(_readable_json(item, inner) for item in value) + newline + "]"
    return json.dumps(value, allow_nan=False, separators=(", ", ": "))


def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json (`reportgen schema --report`)."""
    schema = Report.model_json_schema(mode="serialization")
    schema["title"] = f"reportgen report.json, schema_version {SCHEMA_VERSION}"
    return schema


# -- links into the site ------------------------------------------------------------------------
def head_link(example: int, layer: int, head: int, token: int | None = None, key: int | None = None,
              mode: Literal["contributions"] | None = None, group: str | None = None) -> str:
    """The head view of one head on an example page (0-based example index), optionally with one
    query token (`token`, left column) or else one key token (`key`, right column) pinned, and with
    `mode="contributions"` showing what the head passes on instead of its weights. An encoder-decoder's
    `group` ("decoder" or "cross"; `layer` within it) opens that group of its views; the encoder's is the default.

    The address format is the views' state, parsed and written by formatHash / parseHash in
    site_src/assets/javascripts/views-core.js; this module is its only spelling in Python.
    """
    pinned = f"&token={token}" if token is not None else f"&key={key}" if key is not None else ""
    shown = f"&mode={mode}" if mode is not None else ""
    return f"example-{example + 1}.html#view=head{_attention_group(group)}&layer={layer}&head={head}{pinned}{shown}"


def model_link(layer: int, example: int = 0, group: str | None = None) -> str:
    """The model view of an example page at one layer (of an encoder-decoder's `group`, as in `head_link`)."""
    return f"example-{example + 1}.html#view=model{_attention_group(group)}&layer={layer}"


def group_layer(layer: int, groups: Sequence[str] | None) -> tuple[str | None, int]:
    """(group, layer within the group) of an encoder-decoder's flat layer `layer` (its `groups`, as
    Report.groups: encoder, then decoder, then cross layers); (None, layer) without groups."""
    if not groups:
        return None, layer
    group = groups[layer]
    return group, list(groups[:layer]).count(group)


def flat_head_link(layer: int, head: int, groups: Sequence[str] | None = None, example: int = 0) -> str:
    """`head_link` of a head given by its flat layer (an ablation's rows), opening its group's views."""
    group, within = group_layer(layer, groups)
    return head_link(example, within, head, group=group)


def flat_model_link(layer: int, groups: Sequence[str] | None = None, example: int = 0) -> str:
    """`model_link` of a flat layer (an ablation's rows), opening its group's views."""
    group, within = group_layer(layer, groups)
    return model_link(within, example, group)


def _attention_group(group: str | None) -> str:
    if group not in (None, "encoder", "decoder", "cross"):
        raise ValueError(f"not an attention group: {group!r}")
    return f"&attn={group}" if group not in (None, "encoder") else ""


# -- what the site draws beside the report ----------------------------------------------------------
@dataclass
class ExampleViews:
    """The attention of one example as the pages draw it: plain data made from the model run.

    Not part of report.json: the encoded views live in the example pages themselves.
    """

    tokens: list[str]
    segments: list[int]  # 0: first sentence, 1: second, -1: special token
    payload: dict[str, Any]  # views.example_payload: 8-bit attention rows for the head and model views
    qk_payload: dict[str, Any] | None  # views.qk_payload, for examples with a query/key page
    matrices: dict[tuple[int, int], list[list[float]]] = field(default_factory=dict)  # (layer, head) -> weights
