"""The head-ablation records of a report: the task, each experiment and its test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    pass
from reportgen.report.base import Grid, Number, Record


# -- head ablation (ablation.py) --------------------------------------------------------------------
class AblationTask(Record):
    type: Literal["similarity", "classification", "mlm", "causal_lm", "seq2seq"]
    data: str  # "builtin" or the data file, relative to the config file
    examples: int
    distinct_texts: int
    metric: str  # the primary metric: every test and finding is about it
    metrics: list[str]
    higher_is_better: dict[str, bool]  # per metric
    method: Literal["zero", "uniform", "mean", "resample"]
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
